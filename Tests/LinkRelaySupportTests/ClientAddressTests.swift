import Testing

@testable import LinkRelaySupport

struct ClientAddressTests {
    static func ip(_ text: String) -> IPAddress { IPAddress(text)! }
    static func net(_ text: String) -> IPNetwork { IPNetwork(text)! }

    // MARK: - IPAddress parsing

    @Test(arguments: [
        ("0.0.0.0", "0.0.0.0"),
        ("1.2.3.4", "1.2.3.4"),
        ("255.255.255.255", "255.255.255.255"),
        ("192.0.2.10", "192.0.2.10"),
        ("::", "::"),
        ("::1", "::1"),
        ("1::", "1::"),
        ("2001:db8::1", "2001:db8::1"),
        ("2001:DB8::1", "2001:db8::1"),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
        ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"),
        ("2001:0:0:1:0:0:0:1", "2001:0:0:1::1"),
        ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"),
        ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"),
        ("::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8"),
        ("fe80::abcd:ef01", "fe80::abcd:ef01"),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
        ("::FFFF:192.0.2.1", "::ffff:192.0.2.1"),
        ("0:0:0:0:0:ffff:c000:0201", "::ffff:192.0.2.1"),
        ("64:ff9b::192.0.2.33", "64:ff9b::c000:221"),
        ("1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304"),
        ("::1.2.3.4", "::102:304"),
    ])
    func parsesAndPrintsCanonically(text: String, canonical: String) throws {
        let address = try #require(IPAddress(text))
        #expect(address.description == canonical)
        #expect(IPAddress(canonical) == address)
    }

    @Test(arguments: [
        "", " ", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-1", "01.2.3.4", "1.2.3.04", "1.2.3.4 ", " 1.2.3.4",
        "1..3.4", "1.2.3.", ".1.2.3", "1.2.3.4/32", "1.2.3.4:80", "0x1.2.3.4", "1e2.1.1.1", "١.٢.٣.٤",
        "localhost", "example.com", "unknown", ":", ":::", "1:::2", "1::2::3", ":1::", "::1:", "1:2:3:4:5:6:7",
        "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "12345::", "g::", "fe80::1%eth0",
        "[::1]", "[::1]:443", "::ffff:1.2.3", "::ffff:256.1.1.1", "1.2.3.4::", "::1.2.3.4:1", "1:2:3:4:5:6:7:1.2.3.4",
        "2001:db8::/32", "::ffff:01.2.3.4", String(repeating: "1", count: 100),
    ])
    func refusesMalformedAddresses(text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func parsesSubstrings() {
        let header = "203.0.113.9, 10.0.0.1"
        let first = header.split(separator: ",")[0]
        #expect(IPAddress(first) == Self.ip("203.0.113.9"))
    }

    @Test func mappedAddressUnmapsToIPv4() {
        let mapped = Self.ip("::ffff:198.51.100.7")
        #expect(mapped.isIPv4Mapped)
        #expect(!mapped.isIPv4)
        #expect(mapped.unmapped == Self.ip("198.51.100.7"))
        #expect(mapped.unmapped.isIPv4)
        #expect(mapped != Self.ip("198.51.100.7"))
        #expect(Self.ip("2001:db8::1").unmapped == Self.ip("2001:db8::1"))
        #expect(Self.ip("1.2.3.4").unmapped == Self.ip("1.2.3.4"))
        #expect(!Self.ip("::1.2.3.4").isIPv4Mapped)
    }

    @Test func equalAddressesHashEqually() {
        let set: Set = [Self.ip("2001:db8::1"), Self.ip("2001:0DB8:0:0::0001"), Self.ip("10.0.0.1")]
        #expect(set.count == 2)
    }

    // MARK: - Rate-limit keys

    @Test(arguments: [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8::1", "2001:db8::/64"),
        ("::1", "::/64"),
    ])
    func rateLimitKeyUsesFullIPv4AndIPv6Slash64(text: String, key: String) {
        #expect(Self.ip(text).rateLimitKey == key)
    }

    // MARK: - IPNetwork parsing

    @Test(arguments: [
        ("10.0.0.1", "10.0.0.1/32"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("192.168.1.128/25", "192.168.1.128/25"),
        ("::1", "::1/128"),
        ("::/0", "::/0"),
        ("fd00::/8", "fd00::/8"),
        ("2001:db8::/32", "2001:db8::/32"),
        ("2001:DB8:0:0::/64", "2001:db8::/64"),
        ("::ffff:10.0.0.0/104", "::ffff:10.0.0.0/104"),
        ("2001:db8::1/128", "2001:db8::1/128"),
    ])
    func parsesNetworks(text: String, canonical: String) throws {
        let network = try #require(IPNetwork(text))
        #expect(network.description == canonical)
        #expect(IPNetwork(canonical) == network)
    }

    @Test(arguments: [
        "", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/08", "10.0.0.0/ 8", "10.0.0.0/8 ",
        "10.0.0.0/8/8", "10.0.0.0/a", "10.0.0.1/8", "::/129", "::1/64", "fd00::/1000", "fd00::/08", "10.0.0/8",
        "localhost", "localhost/8", "example.com/24", "*", "any", "10.0.0.0-10.0.0.255", "fe80::/10%eth0",
    ])
    func refusesMalformedNetworks(text: String) {
        #expect(IPNetwork(text) == nil)
    }

    @Test func networkContainingClearsHostBits() {
        #expect(IPNetwork(containing: Self.ip("10.1.2.3"), prefixLength: 8) == Self.net("10.0.0.0/8"))
        #expect(IPNetwork(containing: Self.ip("2001:db8::1"), prefixLength: 32) == Self.net("2001:db8::/32"))
        #expect(IPNetwork(containing: Self.ip("10.1.2.3"), prefixLength: 33) == nil)
        #expect(IPNetwork(containing: Self.ip("::1"), prefixLength: -1) == nil)
    }

    // MARK: - contains

    @Test(arguments: [
        ("10.0.0.0/8", "10.0.0.0", true),
        ("10.0.0.0/8", "10.255.255.255", true),
        ("10.0.0.0/8", "11.0.0.0", false),
        ("10.0.0.0/8", "9.255.255.255", false),
        ("10.0.0.1", "10.0.0.1", true),
        ("10.0.0.1", "10.0.0.2", false),
        ("192.168.1.128/25", "192.168.1.200", true),
        ("192.168.1.128/25", "192.168.1.127", false),
        ("0.0.0.0/0", "203.0.113.1", true),
        ("0.0.0.0/0", "2001:db8::1", false),
        ("10.0.0.0/8", "::ffff:10.1.2.3", true),
        ("10.0.0.0/8", "::ffff:11.1.2.3", false),
        ("10.0.0.0/8", "::10.1.2.3", false),
        ("10.0.0.0/8", "a00:1::", false),
        ("::1", "::1", true),
        ("::1", "::2", false),
        ("::1", "127.0.0.1", false),
        ("fd00::/8", "fd12:3456::1", true),
        ("fd00::/8", "fe00::1", false),
        ("2001:db8::/32", "2001:db8:ffff::1", true),
        ("2001:db8::/32", "2001:db9::", false),
        ("2001:db8:1:2::/64", "2001:db8:1:2:ffff::1", true),
        ("2001:db8:1:2::/64", "2001:db8:1:3::1", false),
        ("2001:db8::1:0:0:0/127", "2001:db8::1:0:0:1", true),
        ("2001:db8::1:0:0:0/128", "2001:db8::1:0:0:1", false),
        ("::/0", "2001:db8::1", true),
        ("::/0", "192.0.2.1", true),
        ("::ffff:10.0.0.0/104", "10.9.9.9", true),
        ("::ffff:10.0.0.0/104", "11.9.9.9", false),
        ("::ffff:10.0.0.0/104", "::ffff:10.9.9.9", true),
    ])
    func networkContains(network: String, address: String, expected: Bool) {
        #expect(Self.net(network).contains(Self.ip(address)) == expected)
    }

    @Test(arguments: 0...128)
    func everyIPv6PrefixLengthSplitsAtItsBit(length: Int) throws {
        let network = try #require(
            IPNetwork(containing: Self.ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), prefixLength: length))
        #expect(network.contains(Self.ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")))
        #expect(network.contains(Self.ip("::")) == (length == 0))
        #expect(IPNetwork(network.description) == network)
    }

    @Test(arguments: 0...32)
    func everyIPv4PrefixLengthSplitsAtItsBit(length: Int) throws {
        let network = try #require(IPNetwork(containing: Self.ip("255.255.255.255"), prefixLength: length))
        #expect(network.contains(Self.ip("255.255.255.255")))
        #expect(network.contains(Self.ip("0.0.0.0")) == (length == 0))
        #expect(IPNetwork(network.description) == network)
    }

    // MARK: - X-Forwarded-For resolution

    static let proxies = [net("10.0.0.0/8"), net("fd00::/8")]

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let peer: String?
        let forwardedFor: [String]
        let trusted: [IPNetwork]
        let expected: String?

        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "no peer", peer: nil, forwardedFor: ["203.0.113.9"], trusted: proxies, expected: nil),
        Case(
            name: "no trusted proxies: header ignored", peer: "10.0.0.1", forwardedFor: ["203.0.113.9"], trusted: [],
            expected: "10.0.0.1"),
        Case(
            name: "spoofed header from an untrusted peer", peer: "198.51.100.1", forwardedFor: ["203.0.113.9"],
            trusted: proxies, expected: "198.51.100.1"),
        Case(
            name: "spoofed trusted address from an untrusted peer", peer: "198.51.100.1", forwardedFor: ["10.0.0.5"],
            trusted: proxies, expected: "198.51.100.1"),
        Case(
            name: "trusted peer, no header", peer: "10.0.0.1", forwardedFor: [], trusted: proxies, expected: "10.0.0.1"),
        Case(
            name: "trusted peer, empty header", peer: "10.0.0.1", forwardedFor: [""], trusted: proxies,
            expected: "10.0.0.1"),
        Case(
            name: "trusted peer, blank entries", peer: "10.0.0.1", forwardedFor: [" , ,\t"], trusted: proxies,
            expected: "10.0.0.1"),
        Case(
            name: "one proxy", peer: "10.0.0.1", forwardedFor: ["203.0.113.9"], trusted: proxies,
            expected: "203.0.113.9"),
        Case(
            name: "client forged entries on the left are ignored", peer: "10.0.0.1",
            forwardedFor: ["1.1.1.1, 2.2.2.2, 203.0.113.9"], trusted: proxies, expected: "203.0.113.9"),
        Case(
            name: "multiple proxies in one header", peer: "10.0.0.1",
            forwardedFor: ["203.0.113.9, 10.0.0.3, 10.0.0.2"], trusted: proxies, expected: "203.0.113.9"),
        Case(
            name: "multiple header lines joined in order", peer: "10.0.0.1",
            forwardedFor: ["6.6.6.6, 203.0.113.9", "10.0.0.3", "10.0.0.2"], trusted: proxies,
            expected: "203.0.113.9"),
        Case(
            name: "untrusted hop between proxies stops the walk", peer: "10.0.0.1",
            forwardedFor: ["203.0.113.9, 198.51.100.1, 10.0.0.2"], trusted: proxies, expected: "198.51.100.1"),
        Case(
            name: "all trusted: leftmost", peer: "10.0.0.1", forwardedFor: ["10.0.0.9, 10.0.0.3, 10.0.0.2"],
            trusted: proxies, expected: "10.0.0.9"),
        Case(
            name: "garbage rightmost: the peer", peer: "10.0.0.1", forwardedFor: ["203.0.113.9, garbage"],
            trusted: proxies, expected: "10.0.0.1"),
        Case(
            name: "garbage after a trusted hop: that hop", peer: "10.0.0.1",
            forwardedFor: ["203.0.113.9, unknown, 10.0.0.2"], trusted: proxies, expected: "10.0.0.2"),
        Case(
            name: "garbage left of the client is never reached", peer: "10.0.0.1",
            forwardedFor: ["<script>, 203.0.113.9, 10.0.0.2"], trusted: proxies, expected: "203.0.113.9"),
        Case(
            name: "address with a port is garbage", peer: "10.0.0.1", forwardedFor: ["203.0.113.9:4711"],
            trusted: proxies, expected: "10.0.0.1"),
        Case(
            name: "bracketed IPv6 is garbage", peer: "10.0.0.1", forwardedFor: ["[2001:db8::1]"], trusted: proxies,
            expected: "10.0.0.1"),
        Case(
            name: "spaces and tabs are trimmed", peer: "10.0.0.1", forwardedFor: ["  203.0.113.9\t,\t10.0.0.2  "],
            trusted: proxies, expected: "203.0.113.9"),
        Case(
            name: "trailing comma ignored", peer: "10.0.0.1", forwardedFor: ["203.0.113.9,"], trusted: proxies,
            expected: "203.0.113.9"),
        Case(
            name: "IPv6 client through IPv6 proxies", peer: "fd00::1", forwardedFor: ["2001:db8::7, fd00::2"],
            trusted: proxies, expected: "2001:db8::7"),
        Case(
            name: "mapped IPv4 peer is a trusted IPv4 proxy", peer: "::ffff:10.0.0.1",
            forwardedFor: ["203.0.113.9"], trusted: proxies, expected: "203.0.113.9"),
        Case(
            name: "mapped IPv4 hop is a trusted IPv4 proxy", peer: "10.0.0.1",
            forwardedFor: ["203.0.113.9, ::ffff:10.0.0.2"], trusted: proxies, expected: "203.0.113.9"),
        Case(
            name: "mapped untrusted peer", peer: "::ffff:198.51.100.1", forwardedFor: ["203.0.113.9"],
            trusted: proxies, expected: "::ffff:198.51.100.1"),
        Case(
            name: "single trusted host", peer: "127.0.0.1", forwardedFor: ["203.0.113.9"],
            trusted: [net("127.0.0.1")], expected: "203.0.113.9"),
        Case(
            name: "host outside a single trusted host", peer: "127.0.0.2", forwardedFor: ["203.0.113.9"],
            trusted: [net("127.0.0.1")], expected: "127.0.0.2"),
    ]

    @Test(arguments: cases)
    func resolvesTheClient(_ testCase: Case) {
        let resolved = ClientAddress.resolve(
            peer: testCase.peer.map(Self.ip), forwardedFor: testCase.forwardedFor, trustedProxies: testCase.trusted)
        #expect(resolved == testCase.expected.map(Self.ip))
    }
}
