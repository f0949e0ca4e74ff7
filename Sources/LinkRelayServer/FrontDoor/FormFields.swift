import Foundation

/// `name=value&…` as forms and query strings write it.
enum FormFields {
    /// The value of `name`, percent-decoded, `+` read as a space; nil when absent or not decodable. A name
    /// given twice is a 400 that names it (`what`: "query parameter", "form field"): readers that take
    /// the first and the last (a proxy, a log, the relay) would otherwise act on different values. Names
    /// compare once decoded, so `to%6Ben` is `token` too.
    static func value(_ name: String, in text: Substring, what: String) throws(Problem) -> String? {
        var found: Substring?
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard decode(parts[0]) == name else { continue }
            guard found == nil else { throw Problem.badRequest("The \(what) \(name) appears more than once.") }
            found = parts.count > 1 ? parts[1] : ""
        }
        return found.flatMap(decode)
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
