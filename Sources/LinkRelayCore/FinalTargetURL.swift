/// Prove's rules for a `finalTargetUrl`: at most 128 characters from `A-Za-z0-9-._+=/:?`.
/// The relay also requires an absolute http(s) URL with a host, and a port from 1 to 65535 if it names one,
/// since a phone must be able to open it.
public enum FinalTargetURL {
    public static let maximumLength = 128

    public enum Violation: Error, Sendable, Equatable, CustomStringConvertible {
        case empty
        case tooLong(Int)
        case forbiddenCharacter(Character)
        case notAbsoluteHTTP
        case missingHost
        case invalidPort

        public var description: String {
            switch self {
            case .empty: "the URL is empty"
            case .tooLong(let length): "the URL has \(length) characters; Prove allows at most \(maximumLength)"
            case .forbiddenCharacter(let character):
                "the URL contains \"\(character)\"; Prove allows only A-Z a-z 0-9 - . _ + = / : ?"
            case .notAbsoluteHTTP: "the URL must start with http:// or https://"
            case .missingHost: "the URL has no host"
            case .invalidPort: "the URL's port is not a number from 1 to 65535"
            }
        }
    }

    public static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "+"), UInt8(ascii: "="),
            UInt8(ascii: "/"), UInt8(ascii: ":"), UInt8(ascii: "?"):
            true
        default: false
        }
    }

    public static func validate(_ url: String) -> Violation? {
        guard !url.isEmpty else { return .empty }
        if let bad = url.first(where: { character in
            !(character.isASCII && character.utf8.count == 1 && isAllowed(character.utf8.first!))
        }) {
            return .forbiddenCharacter(bad)
        }
        guard url.utf8.count <= maximumLength else { return .tooLong(url.utf8.count) }
        let rest: Substring
        if url.hasPrefix("https://") {
            rest = url.dropFirst(8)
        } else if url.hasPrefix("http://") {
            rest = url.dropFirst(7)
        } else {
            return .notAbsoluteHTTP
        }
        let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != ":" }
        guard !host.isEmpty else { return .missingHost }
        // `:` after the host starts a port, which must be a number: `http://host:8080-l/x` is not a URL at all.
        if rest[host.endIndex...].first == ":" {
            let port = rest[host.endIndex...].dropFirst().prefix { $0 != "/" && $0 != "?" }
            guard port.count <= 5, port.allSatisfy({ ("0"..."9").contains($0) }), let number = Int(port),
                (1...65535).contains(number)
            else { return .invalidPort }
        }
        return nil
    }
}
