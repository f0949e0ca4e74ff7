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
            guard let length = Self.decimal(parts[1], maximum: width) else { return nil }
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

    /// A decimal number of 1–3 digits with no leading zero, at most `maximum`.
    private static func decimal(_ bytes: ArraySlice<UInt8>, maximum: Int) -> Int? {
        guard (1...3).contains(bytes.count), bytes.count == 1 || bytes.first != UInt8(ascii: "0") else { return nil }
        var value = 0
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value <= maximum ? value : nil
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
