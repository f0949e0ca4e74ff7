/// An IPv4 or IPv6 address, parsed strictly from its text form.
///
/// IPv4 is exactly four decimal numbers 0–255 with no leading zeros ("010.0.0.1" is refused:
/// some stacks would read it as octal). IPv6 is eight groups of 1–4 hex digits, with at most one
/// `::` and optionally an IPv4 tail (`::ffff:1.2.3.4`). Zone ids (`%eth0`), brackets, ports,
/// prefixes, whitespace and host names are refused.
///
/// An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, what a dual-stack socket reports for an IPv4
/// peer) stays an IPv6 value, but `unmapped`, `IPNetwork.contains` and `rateLimitKey` treat it as
/// the IPv4 address it carries.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    enum Storage: Hashable, Sendable {
        case v4(UInt32)
        case v6(high: UInt64, low: UInt64)
    }

    let storage: Storage

    init(storage: Storage) { self.storage = storage }

    /// Parses `text`, or returns nil unless it is exactly one IPv4 or IPv6 address.
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 45 else { return nil }
        if bytes.contains(UInt8(ascii: ":")) {
            guard let (high, low) = Self.parseIPv6(bytes[...]) else { return nil }
            storage = .v6(high: high, low: low)
        } else {
            guard let value = Self.parseIPv4(bytes[...]) else { return nil }
            storage = .v4(value)
        }
    }

    /// Whether this is an IPv4 address (not an IPv4-mapped IPv6 one).
    public var isIPv4: Bool {
        if case .v4 = storage { return true }
        return false
    }

    /// Whether this is an IPv4-mapped IPv6 address (`::ffff:0:0/96`).
    public var isIPv4Mapped: Bool { mappedIPv4 != nil }

    /// The IPv4 address inside an IPv4-mapped IPv6 address; any other address unchanged.
    public var unmapped: IPAddress {
        guard let mappedIPv4 else { return self }
        return IPAddress(storage: .v4(mappedIPv4))
    }

    /// The canonical text: dotted decimal for IPv4; RFC 5952 for IPv6 (lower case, no leading
    /// zeros, the longest run of two or more zero groups as `::`, `::ffff:a.b.c.d` for mapped).
    public var description: String {
        switch storage {
        case .v4(let value):
            return Self.format(ipv4: value)
        case .v6(let high, let low):
            if let mappedIPv4 { return "::ffff:" + Self.format(ipv4: mappedIPv4) }
            return Self.format(ipv6: high, low)
        }
    }

    /// The key for per-IP rate and connection limits: an IPv4 client (or IPv4-mapped) by its
    /// full address ("192.0.2.7"), an IPv6 client by its /64 ("2001:db8:1:2::/64"), because one
    /// host usually owns a whole /64 and could otherwise rotate through 2^64 addresses.
    public var rateLimitKey: String {
        let address = unmapped
        if address.isIPv4 { return address.description }
        return IPNetwork(containing: address, prefixLength: 64)!.description
    }

    /// The 128-bit form: IPv6 as is, IPv4 as its IPv4-mapped address.
    var bits128: (high: UInt64, low: UInt64) {
        switch storage {
        case .v4(let value): (0, 0xFFFF_0000_0000 | UInt64(value))
        case .v6(let high, let low): (high, low)
        }
    }

    /// The IPv4 address as 32 bits, for IPv4 and IPv4-mapped addresses.
    var ipv4Bits: UInt32? {
        switch storage {
        case .v4(let value): value
        case .v6: mappedIPv4
        }
    }

    private var mappedIPv4: UInt32? {
        guard case .v6(let high, let low) = storage, high == 0, low >> 32 == 0xFFFF else { return nil }
        return UInt32(truncatingIfNeeded: low)
    }

    // MARK: - Parsing

    private static func parseIPv4(_ bytes: ArraySlice<UInt8>) -> UInt32? {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard let octet = decimal(part, maximum: 255) else { return nil }
            value = value << 8 | UInt32(octet)
        }
        return value
    }

    /// A decimal number of 1–3 digits with no leading zero, at most `maximum`.
    static func decimal(_ bytes: ArraySlice<UInt8>, maximum: Int) -> Int? {
        guard (1...3).contains(bytes.count), bytes.count == 1 || bytes.first != UInt8(ascii: "0") else { return nil }
        var value = 0
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value <= maximum ? value : nil
    }

    private static func parseIPv6(_ bytes: ArraySlice<UInt8>) -> (UInt64, UInt64)? {
        let colon = UInt8(ascii: ":")
        // Split around the one `::`, if any.
        var doubleColon: Int?
        var index = bytes.startIndex
        while index < bytes.endIndex - 1 {
            if bytes[index] == colon && bytes[index + 1] == colon {
                guard doubleColon == nil else { return nil }
                doubleColon = index
                index += 2
            } else {
                index += 1
            }
        }
        let head: ArraySlice<UInt8>
        let tail: ArraySlice<UInt8>
        if let doubleColon {
            head = bytes[bytes.startIndex..<doubleColon]
            tail = bytes[(doubleColon + 2)...]
        } else {
            head = bytes
            tail = []
        }
        // An IPv4 tail may only be the last group of the text; `groups` refuses a dot elsewhere.
        let hasIPv4Tail = bytes.contains(UInt8(ascii: "."))
        guard let headGroups = groups(head, ipv4Tail: hasIPv4Tail && doubleColon == nil),
            let tailGroups = groups(tail, ipv4Tail: hasIPv4Tail && doubleColon != nil)
        else { return nil }
        var all = headGroups
        if doubleColon != nil {
            // `::` stands for one or more zero groups.
            let missing = 8 - headGroups.count - tailGroups.count
            guard missing >= 1 else { return nil }
            all += Array(repeating: 0, count: missing) + tailGroups
        }
        guard all.count == 8 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for group in all[0..<4] { high = high << 16 | UInt64(group) }
        for group in all[4..<8] { low = low << 16 | UInt64(group) }
        return (high, low)
    }

    /// The 16-bit groups of a colon-separated run (empty text gives none); the last element may be
    /// an IPv4 address (two groups) when `ipv4Tail` is set.
    private static func groups(_ bytes: ArraySlice<UInt8>, ipv4Tail: Bool) -> [UInt16]? {
        guard !bytes.isEmpty else { return [] }
        let parts = bytes.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        var result: [UInt16] = []
        for (position, part) in parts.enumerated() {
            if ipv4Tail && position == parts.count - 1 {
                guard let value = parseIPv4(part) else { return nil }
                result += [UInt16(value >> 16), UInt16(truncatingIfNeeded: value)]
            } else {
                guard let group = hexGroup(part) else { return nil }
                result.append(group)
            }
        }
        return result
    }

    private static func hexGroup(_ bytes: ArraySlice<UInt8>) -> UInt16? {
        guard (1...4).contains(bytes.count) else { return nil }
        var value: UInt16 = 0
        for byte in bytes {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    // MARK: - Formatting

    private static func format(ipv4 value: UInt32) -> String {
        [24, 16, 8, 0].map { String((value >> UInt32($0)) & 0xFF) }.joined(separator: ".")
    }

    private static func format(ipv6 high: UInt64, _ low: UInt64) -> String {
        let groups = (0..<8).map { index -> UInt16 in
            let word = index < 4 ? high : low
            return UInt16(truncatingIfNeeded: word >> UInt64(48 - 16 * (index % 4)))
        }
        // The longest run of at least two zero groups (the first one on a tie) becomes `::`.
        var best = (start: -1, length: 0)
        var start = -1
        for index in 0...8 {
            if index < 8 && groups[index] == 0 {
                if start < 0 { start = index }
            } else if start >= 0 {
                if index - start > best.length { best = (start, index - start) }
                start = -1
            }
        }
        let hex = { (slice: ArraySlice<UInt16>) in slice.map { String($0, radix: 16) }.joined(separator: ":") }
        guard best.length >= 2 else { return hex(groups[...]) }
        return hex(groups[..<best.start]) + "::" + hex(groups[(best.start + best.length)...])
    }
}

/// An IPv4 or IPv6 network in CIDR form: "10.0.0.0/8", "fd00::/8", or a single address
/// ("10.0.0.1" is "10.0.0.1/32", "::1" is "::1/128").
///
/// Parsing is strict: the address follows `IPAddress`; the prefix is decimal, without leading
/// zeros, 0–32 for IPv4 and 0–128 for IPv6; and host bits must be zero ("10.0.0.1/8" is refused
/// as probably a typo). An IPv4 network contains IPv4-mapped IPv6 addresses of its range, and an
/// IPv6 network contains an IPv4 address when it contains its IPv4-mapped form (so "::/0" holds
/// every address).
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The first address of the network (host bits zero).
    public let address: IPAddress
    /// How many leading bits are fixed.
    public let prefixLength: Int

    /// Parses "address" or "address/prefix", or returns nil.
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        guard bytes.count <= 64 else { return nil }
        let parts = bytes.split(separator: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(decoding: parts[0], as: UTF8.self)) else { return nil }
        let width = address.isIPv4 ? 32 : 128
        var prefixLength = width
        if parts.count == 2 {
            guard let length = IPAddress.decimal(parts[1], maximum: width) else { return nil }
            prefixLength = length
        }
        guard let network = IPNetwork(containing: address, prefixLength: prefixLength), network.address == address
        else { return nil }
        self = network
    }

    /// The network of `prefixLength` bits that contains `address` (host bits are cleared), or nil
    /// when the prefix is out of range (0–32 for IPv4, 0–128 for IPv6).
    public init?(containing address: IPAddress, prefixLength: Int) {
        switch address.storage {
        case .v4(let value):
            guard (0...32).contains(prefixLength) else { return nil }
            self.address = IPAddress(storage: .v4(value & Self.mask32(prefixLength)))
        case .v6(let high, let low):
            guard (0...128).contains(prefixLength) else { return nil }
            let (highMask, lowMask) = Self.mask128(prefixLength)
            self.address = IPAddress(storage: .v6(high: high & highMask, low: low & lowMask))
        }
        self.prefixLength = prefixLength
    }

    /// Whether `address` is in this network (see the type's notes on IPv4-mapped addresses).
    public func contains(_ address: IPAddress) -> Bool {
        switch self.address.storage {
        case .v4(let network):
            guard let value = address.ipv4Bits else { return false }
            return value & Self.mask32(prefixLength) == network
        case .v6(let networkHigh, let networkLow):
            let (high, low) = address.bits128
            let (highMask, lowMask) = Self.mask128(prefixLength)
            return high & highMask == networkHigh && low & lowMask == networkLow
        }
    }

    /// "address/prefix" in canonical form, e.g. "10.0.0.0/8", "2001:db8::/32", "::1/128".
    public var description: String { "\(address)/\(prefixLength)" }

    private static func mask32(_ length: Int) -> UInt32 {
        length == 0 ? 0 : UInt32.max << UInt32(32 - length)
    }

    private static func mask128(_ length: Int) -> (UInt64, UInt64) {
        let high: UInt64 = length >= 64 ? .max : (length == 0 ? 0 : UInt64.max << UInt64(64 - length))
        let low: UInt64 = length <= 64 ? 0 : (length == 128 ? .max : UInt64.max << UInt64(128 - length))
        return (high, low)
    }
}

/// Who the client is, for per-IP limits and logs, honouring `X-Forwarded-For` only as far as it
/// was written by trusted proxies.
public enum ClientAddress {
    /// The client's address, given the TCP peer, every `X-Forwarded-For` header value, and the
    /// networks of the proxies we trust.
    ///
    /// The rule:
    /// 1. No peer: nil (without a verified hop the header proves nothing).
    /// 2. The peer is not in `trustedProxies` (or there are none): the peer. The header is ignored,
    ///    since anyone can send it.
    /// 3. Otherwise the header values are joined in order and split on commas; entries are trimmed
    ///    of spaces and tabs, and empty entries are skipped. Walking from the right (the entry the
    ///    nearest proxy appended), trusted-proxy addresses are skipped; the first address that is
    ///    not a trusted proxy is the client.
    /// 4. A malformed entry (not exactly one IP address: a host name, a port, "unknown", garbage)
    ///    stops the walk: the client is the last trusted hop, the rightmost trusted address that
    ///    handed the request over (the peer if the garbage is rightmost). Nothing left of garbage
    ///    is believed.
    /// 5. If every entry is a trusted proxy (or the header is empty), the leftmost trusted hop
    ///    (the leftmost entry, or the peer when there are none).
    public static func resolve(peer: IPAddress?, forwardedFor: [String], trustedProxies: [IPNetwork]) -> IPAddress? {
        guard let peer else { return nil }
        func isTrusted(_ address: IPAddress) -> Bool { trustedProxies.contains { $0.contains(address) } }
        guard isTrusted(peer) else { return peer }
        let entries = forwardedFor.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false)
        var lastTrusted = peer
        for entry in entries.reversed() {
            let trimmed = entry.trimmingSpacesAndTabs()
            if trimmed.isEmpty { continue }
            guard let address = IPAddress(trimmed) else { return lastTrusted }
            guard isTrusted(address) else { return address }
            lastTrusted = address
        }
        return lastTrusted
    }
}

extension Substring {
    fileprivate func trimmingSpacesAndTabs() -> Substring {
        let isBlank = { (character: Character) in character == " " || character == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
