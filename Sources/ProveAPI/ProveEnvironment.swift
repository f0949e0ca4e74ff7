import Foundation

/// Maps a configured environment name to a Prove base URL.
public enum ProveEnvironment {
    public static let uatBaseURL = "https://platform.uat.proveapis.com"
    public static let prodBaseURL = "https://platform.proveapis.com"
    public static let uatEUBaseURL = "https://platform.uat.eu.proveapis.com"
    public static let prodEUBaseURL = "https://platform.eu.proveapis.com"

    /// Prove's environments by the names `--prove` takes, in the order the help and the docs list them;
    /// `uat-us` and `prod-us` are what Prove's SDKs call the first two.
    public static let named: [(name: String, baseURL: String)] = [
        ("uat", uatBaseURL), ("uat-us", uatBaseURL), ("prod", prodBaseURL), ("prod-us", prodBaseURL),
        ("uat-eu", uatEUBaseURL), ("prod-eu", prodEUBaseURL),
    ]

    /// A name of `named` gives its base URL; an `http(s)` URL with a host is returned without trailing
    /// slashes; anything else gives `nil`. `"sandbox"` is handled by the caller.
    public static func baseURL(for value: String) -> String? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let known = named.first(where: { $0.name == trimmed.lowercased() }) { return known.baseURL }
        guard let url = URL(string: trimmed),
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty,
            url.query == nil, url.fragment == nil
        else { return nil }
        var result = trimmed
        while result.hasSuffix("/") { result.removeLast() }
        return result
    }
}
