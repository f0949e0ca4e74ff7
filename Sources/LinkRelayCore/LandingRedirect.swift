/// Where the phone lands after the Instant Link: `…/l/{linkKey}?asc=…&authId=…`, the relay's own
/// finalTargetUrl with Prove's parameters. The relay checks every landing with `check`; an app that
/// receives the redirect URL (a Universal Link or App Link) can check it the same way with `parse`.
public struct LandingRedirect: Sendable, Equatable {
    /// Characters of random key in `/l/{key}`: 32 from `A-Za-z0-9` is over 190 bits.
    public static let linkKeyLength = 32

    public var linkKey: String
    public var parameters: LandingParameters

    public enum Rejection: Error, Sendable, Equatable, CustomStringConvertible {
        /// The query breaks the landing's rules (the relay answers 400).
        case badParameters(LandingParameters.Rejection)
        /// The path is not `/l/` and a key of the relay's shape (404).
        case notALink

        public var description: String {
            switch self {
            case .badParameters(let rejection): rejection.rawValue
            case .notALink: "the path is not /l/ and a key of \(LandingRedirect.linkKeyLength) letters and digits"
            }
        }
    }

    public init(linkKey: String, parameters: LandingParameters) {
        self.linkKey = linkKey
        self.parameters = parameters
    }

    /// Checks a landing's key (from `/l/{key}`) and raw query, in the relay's order: the query first.
    public static func check(linkKey: Substring, query: Substring?) -> Result<LandingRedirect, Rejection> {
        let parameters: LandingParameters
        switch LandingParameters.parse(query: query) {
        case .failure(let rejection): return .failure(.badParameters(rejection))
        case .success(let parsed): parameters = parsed
        }
        let key = linkKey.utf8
        guard key.count == linkKeyLength, key.allSatisfy(isKeyCharacter) else { return .failure(.notALink) }
        return .success(LandingRedirect(linkKey: String(linkKey), parameters: parameters))
    }

    /// Checks a whole redirect URL: `https://relay.example/l/{key}?asc=…&authId=…`, or its path and query
    /// alone. Only the path and the query count: the relay serves one public URL, which the app knows.
    public static func parse(_ url: String) -> Result<LandingRedirect, Rejection> {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") {
            rest = rest[scheme.upperBound...]
            rest = rest[(rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex)...]
        }
        let fragment = rest.firstIndex(of: "#") ?? rest.endIndex
        rest = rest[..<fragment]
        let mark = rest.firstIndex(of: "?")
        let path = rest[..<(mark ?? rest.endIndex)]
        let query = mark.map { rest[rest.index(after: $0)...] }
        guard path.hasPrefix("/l/") else {
            // The query's rules come first, as for a landing.
            if case .failure(let rejection) = LandingParameters.parse(query: query) {
                return .failure(.badParameters(rejection))
            }
            return .failure(.notALink)
        }
        return check(linkKey: path.dropFirst(3), query: query)
    }

    private static func isKeyCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: false
        }
    }
}
