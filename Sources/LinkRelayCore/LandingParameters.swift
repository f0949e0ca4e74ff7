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
    /// `asc=\u{301}false` would hide a second `asc` that every other reader sees.
    public static func parse(query: String?) -> Result<LandingParameters, Rejection> {
        parse(query: query?[...])
    }

    /// `parse(query:)` on a query that is part of a larger string (a request's target), without copying it.
    public static func parse(query: Substring?) -> Result<LandingParameters, Rejection> {
        let utf8 = (query ?? "").utf8
        var asc: (value: Substring.UTF8View, count: Int)?
        var authId: (value: Substring.UTF8View, count: Int)?
        // Each `&`-separated pair in turn, without collecting them (the landing's hot path).
        var start = utf8.startIndex
        while start < utf8.endIndex {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: "&")) ?? utf8.endIndex
            let pair = utf8[start..<end]
            start = end == utf8.endIndex ? end : utf8.index(after: end)
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let name = pair[..<(equals ?? pair.endIndex)]
            let value = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
            if name.elementsEqual("asc".utf8) {
                asc = (asc?.value ?? value, (asc?.count ?? 0) + 1)
            } else if name.elementsEqual("authId".utf8) {
                authId = (authId?.value ?? value, (authId?.count ?? 0) + 1)
            }
        }
        guard let asc else { return .failure(.missingAsc) }
        guard asc.count == 1 else { return .failure(.duplicateAsc) }
        let tapped: Bool
        if asc.value.elementsEqual("true".utf8) {
            tapped = true
        } else if asc.value.elementsEqual("false".utf8) {
            tapped = false
        } else {
            return .failure(.invalidAsc)
        }
        guard let authId else { return .failure(.missingAuthId) }
        guard authId.count == 1 else { return .failure(.duplicateAuthId) }
        guard isUUID(authId.value) else { return .failure(.invalidAuthId) }
        return .success(LandingParameters(asc: tapped, authId: lowercased(authId.value)))
    }

    /// ASCII text in lower case, written straight into the new string.
    private static func lowercased(_ ascii: Substring.UTF8View) -> String {
        String(unsafeUninitializedCapacity: ascii.count) { buffer in
            for (offset, byte) in ascii.enumerated() {
                buffer[offset] = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
            }
            return ascii.count
        }
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
