import Foundation
import Testing

@testable import LinkRelayCore

struct SecretsTests {
    static let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    @Test func defaultTokenIs32AlphanumericCharacters() {
        let token = Secrets.token()
        #expect(token.count == 32)
        #expect(token.utf8.count == 32)
        #expect(token.allSatisfy { Self.alphabet.contains($0) })
    }

    @Test(arguments: [0, 1, 22, 32, 64, 1000])
    func tokenLengthAndAlphabet(_ length: Int) {
        let token = Secrets.token(length: length)
        #expect(token.count == length)
        #expect(token.allSatisfy { Self.alphabet.contains($0) })
    }

    @Test func twoTokensDiffer() {
        #expect(Secrets.token() != Secrets.token())
        #expect(Secrets.token(length: 22) != Secrets.token(length: 22))
    }

    @Test func manyTokensAreDistinct() {
        let tokens = Set((0..<1000).map { _ in Secrets.token(length: 22) })
        #expect(tokens.count == 1000)
    }

    @Test func tokensUseTheWholeAlphabet() {
        // 62 symbols, 62 * 1000 draws: missing any one has probability about 62 * e^-1000.
        let seen = Set(Secrets.token(length: 62 * 1000))
        #expect(seen == Self.alphabet)
    }

    @Test func sessionIDFormat() {
        let id = Secrets.sessionID()
        #expect(id.hasPrefix("ses_"))
        #expect(id.count == 26)
        #expect(id.dropFirst(4).allSatisfy { Self.alphabet.contains($0) })
        #expect(Secrets.sessionID() != Secrets.sessionID())
    }

    @Test func uuidFormat() {
        for _ in 0..<200 {
            let uuid = Secrets.uuid()
            #expect(uuid.count == 36)
            #expect(LandingParameters.isUUID(Substring(uuid)))
            #expect(uuid == uuid.lowercased())
            let characters = Array(uuid)
            #expect(characters[14] == "4", "version nibble of \(uuid)")
            #expect("89ab".contains(characters[19]), "variant of \(uuid)")
            #expect(
                LandingParameters.parse(query: "asc=true&authId=\(uuid)")
                    == .success(LandingParameters(asc: true, authId: uuid)))
        }
    }

    @Test func uuidsDiffer() {
        let uuids = Set((0..<1000).map { _ in Secrets.uuid() })
        #expect(uuids.count == 1000)
    }

    @Test(arguments: [
        ("abc", "abc", true),
        ("", "", true),
        ("secret-token-123", "secret-token-123", true),
        ("abc", "abd", false),
        ("abc", "xbc", false),
        ("abc", "ABC", false),
        ("abc", "ab", false),
        ("ab", "abc", false),
        ("abc", "abc\u{0}", false),
        ("", "a", false),
        ("a", "", false),
        ("é", "e\u{301}", false),
    ])
    func constantTimeEquals(_ lhs: String, _ rhs: String, _ expected: Bool) {
        #expect(Secrets.constantTimeEquals(lhs, rhs) == expected)
        #expect(Secrets.constantTimeEquals(rhs, lhs) == expected)
    }

    @Test func constantTimeEqualsWithLengthsDifferingBy256() {
        // The length difference truncates to zero in a UInt8; the padding must still count as a difference.
        let short = String(repeating: "a", count: 10)
        let long = short + String(repeating: "\u{0}", count: 256)
        #expect(!Secrets.constantTimeEquals(short, long))
        #expect(!Secrets.constantTimeEquals(long, short))
        #expect(!Secrets.constantTimeEquals("", String(repeating: "\u{0}", count: 256)))
    }

    @Test func constantTimeEqualsOnRealTokens() {
        let token = Secrets.token()
        #expect(Secrets.constantTimeEquals(token, String(token)))
        var changed = Array(token.utf8)
        changed[31] = changed[31] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(!Secrets.constantTimeEquals(token, String(decoding: changed, as: UTF8.self)))
    }

    @Test(arguments: [
        ("+15551234567", "********4567"),
        ("2001004014", "******4014"),
        ("12345", "*2345"),
        ("1234", "****"),
        ("123", "***"),
        ("", ""),
    ])
    func maskedPhone(_ phone: String, _ expected: String) {
        let masked = Secrets.maskedPhone(phone)
        #expect(masked == expected)
        #expect(masked.count == phone.count)
    }

    @Test func maskedPhoneRevealsNothingButTheLastFour() {
        let phone = "+447700900123"
        let masked = Secrets.maskedPhone(phone)
        #expect(masked.hasSuffix("0123"))
        #expect(masked.dropLast(4).allSatisfy { $0 == "*" })
        #expect(!masked.contains("447700"))
    }
}

struct WebhookIDTests {
    @Test("A message id is msg_ and 22 letters and digits, and later messages' ids sort after earlier ones'")
    func sortsByCreation() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let ids = (0..<200).map { WebhookMessage.newID(at: start.addingTimeInterval(Double($0) * 0.0015)) }
        #expect(ids.allSatisfy { $0.hasPrefix("msg_") && $0.count == 26 })
        #expect(ids.allSatisfy { $0.dropFirst(4).allSatisfy { SecretsTests.alphabet.contains($0) } })
        #expect(ids.map { $0.prefix(12) } == ids.map { $0.prefix(12) }.sorted())
        #expect(ids[0].prefix(12) < ids[1].prefix(12))
        #expect(Set(ids).count == ids.count)
        // 8 time characters last until 8,900 years after 1970.
        #expect(WebhookMessage.newID(at: .distantFuture) > WebhookMessage.newID(at: Date()))
    }
}
