/// The parameters Prove appends to the finalTargetUrl when the phone lands: `asc` and `authId`.
public struct LandingParameters: Sendable, Equatable {
    /// Prove's hint of whether the tap succeeded. Never trusted for the outcome.
    public var asc: Bool
    /// The UUID Prove gave this landing, lower-cased.
    public var authId: String

    public init(asc: Bool, authId: String) {
        self.asc = asc
        self.authId = authId
    }

    public enum Rejection: String, Error, Sendable, Equatable {
        case missingAsc = "asc is missing"
        case duplicateAsc = "asc appears more than once"
        case invalidAsc = "asc is not exactly true or false"
        case missingAuthId = "authId is missing"
        case duplicateAuthId = "authId appears more than once"
        case invalidAuthId = "authId is not a UUID written 8-4-4-4-12"
    }

    /// Parses a raw (still percent-encoded) query string strictly.
    ///
    /// `asc` and `authId` must each appear exactly once, spelled exactly so, with values written
    /// literally: percent-encoding in them is rejected rather than decoded, so `asc=%74rue` or
    /// `authId=%7B...%7D` never pass. Other parameters are ignored and never acted on.
    ///
    /// The query is read as UTF-8 bytes, as Prove, proxies and logs read it, never as `Character`s: a combining
    /// mark after `&` or `=` would otherwise join it into one grapheme cluster, so that `&\u{301}asc=false` or
    /// `asc=\u{301}false` hid a second `asc` that every other reader sees.
    public static func parse(query: String?) -> Result<LandingParameters, Rejection> {
        var ascValues: [Substring.UTF8View] = []
        var authIdValues: [Substring.UTF8View] = []
        for pair in (query ?? "").utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let name = pair[..<(equals ?? pair.endIndex)]
            let value = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
            if name.elementsEqual("asc".utf8) {
                ascValues.append(value)
            } else if name.elementsEqual("authId".utf8) {
                authIdValues.append(value)
            }
        }
        guard ascValues.count <= 1 else { return .failure(.duplicateAsc) }
        guard let ascValue = ascValues.first else { return .failure(.missingAsc) }
        let asc: Bool
        if ascValue.elementsEqual("true".utf8) {
            asc = true
        } else if ascValue.elementsEqual("false".utf8) {
            asc = false
        } else {
            return .failure(.invalidAsc)
        }
        guard authIdValues.count <= 1 else { return .failure(.duplicateAuthId) }
        guard let authIdValue = authIdValues.first else { return .failure(.missingAuthId) }
        guard isUUID(authIdValue) else { return .failure(.invalidAuthId) }
        return .success(LandingParameters(asc: asc, authId: String(decoding: authIdValue, as: UTF8.self).lowercased()))
    }

    /// True for exactly 8-4-4-4-12 hexadecimal digits in either case.
    public static func isUUID(_ text: Substring) -> Bool {
        isUUID(text.utf8)
    }

    private static func isUUID(_ utf8: Substring.UTF8View) -> Bool {
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                if byte != UInt8(ascii: "-") { return false }
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                    UInt8(ascii: "A")...UInt8(ascii: "F"):
                    continue
                default: return false
                }
            }
        }
        return true
    }
}
