import Foundation

/// `name=value&…` as forms and query strings write it.
enum FormFields {
    /// The first value of `name`, percent-decoded, `+` read as a space; nil when absent or not decodable.
    static func first(_ name: String, in text: Substring) -> String? {
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard decode(parts[0]) == name else { continue }
            return parts.count > 1 ? decode(parts[1]) : ""
        }
        return nil
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
