import Foundation

/// Maps a configured environment name to a Prove base URL.
public enum ProveEnvironment {
    public static let uatBaseURL = "https://platform.uat.proveapis.com"
    public static let prodBaseURL = "https://platform.proveapis.com"
    public static let uatEUBaseURL = "https://platform.uat.eu.proveapis.com"
    public static let prodEUBaseURL = "https://platform.eu.proveapis.com"

    /// `"uat"` and `"prod"` (Prove's SDKs name them `uat-us` and `prod-us`; also `"uat-eu"`, `"prod-eu"`) give
    /// Prove's base URLs; an `http(s)` URL with a host
    /// is returned without trailing slashes; anything else gives `nil`. `"sandbox"` is handled by the caller.
    public static func baseURL(for value: String) -> String? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        switch trimmed.lowercased() {
        case "uat", "uat-us": return uatBaseURL
        case "prod", "prod-us": return prodBaseURL
        case "uat-eu": return uatEUBaseURL
        case "prod-eu": return prodEUBaseURL
        default: break
        }
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
