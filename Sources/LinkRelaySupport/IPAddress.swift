import NIOCore

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
        guard let storage = Self.parse(text) else { return nil }
        self.storage = storage
    }

    /// Whether this is an IPv4 address (not an IPv4-mapped IPv6 one).
    public var isIPv4: Bool {
        if case .v4 = storage { return true }
        return false
    }

    /// Whether this is a loopback address: 127.0.0.0/8 (also IPv4-mapped) or ::1.
    public var isLoopback: Bool {
        switch unmapped.storage {
        case .v4(let value): value >> 24 == 127
        case .v6(let high, let low): high == 0 && low == 1
        }
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

    /// The address a socket reports, without a round trip through text.
    public init?(_ address: SocketAddress) {
        switch address {
        case .v4(let v4):
            storage = .v4(UInt32(bigEndian: v4.address.sin_addr.s_addr))
        case .v6(let v6):
            storage = withUnsafeBytes(of: v6.address.sin6_addr) { bytes in
                let word = { (range: Range<Int>) in bytes[range].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
                return .v6(high: word(0..<8), low: word(8..<16))
            }
        case .unixDomainSocket:
            return nil
        }
    }

    /// NIO's parsing (`inet_pton`, strict by POSIX: no leading zeros in IPv4, no zone, no brackets),
    /// after the few checks it cannot make: a C string stops at a NUL, and NIO would look a zone (`%`)
    /// up with `getaddrinfo`.
    private static func parse(_ text: some StringProtocol) -> Storage? {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= 45, !bytes.contains(0), !bytes.contains(UInt8(ascii: "%")),
            let address = try? SocketAddress(ipAddress: String(text), port: 0), let parsed = IPAddress(address)
        else { return nil }
        return parsed.storage
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
