import Testing

@testable import LinkRelayCore

struct FinalTargetURLTests {
    /// Pads `prefix` with `a` to exactly `length` characters.
    static func url(_ prefix: String, length: Int) -> String {
        prefix + String(repeating: "a", count: length - prefix.count)
    }

    @Test(arguments: [
        "http://x",
        "https://x",
        "https://example.com",
        "https://example.com/",
        "http://localhost:8080/l/abc",
        "https://relay.example.com/l/AbC-123_x.y+z=1/?q=2:3",
        "https://127.0.0.1/l/k",
        url("https://example.com/", length: 127),
        url("https://example.com/", length: 128),
        url("http://example.com/", length: 128),
        url("https://", length: 128),
    ])
    func validURLs(_ url: String) {
        #expect(url.count <= FinalTargetURL.maximumLength)
        #expect(FinalTargetURL.validate(url) == nil)
    }

    @Test func maximumLengthIs128() {
        #expect(FinalTargetURL.maximumLength == 128)
    }

    @Test(arguments: [129, 130, 200, 8 * 1024])
    func tooLong(_ length: Int) {
        let url = Self.url("https://example.com/", length: length)
        #expect(FinalTargetURL.validate(url) == .tooLong(length))
    }

    @Test func exactlyOneOverTheLimit() {
        let url = Self.url("http://example.com/", length: 129)
        #expect(FinalTargetURL.validate(url) == .tooLong(129))
    }

    @Test(arguments: [
        "&", "%", "#", " ", "é", "<", ">", "\"", "'", "\\", "@", ";", ",", "\n", "\t", "\u{0}",
        "e\u{301}", "🙂", "\u{FF0F}",
    ])
    func forbiddenCharacter(_ character: String) {
        let url = "https://example.com/l/a\(character)b"
        #expect(FinalTargetURL.validate(url) == .forbiddenCharacter(Character(character)))
    }

    @Test(arguments: ["&", "%", "#", " ", "é", "<", "\""])
    func forbiddenCharacterAtStartAndEnd(_ character: String) {
        let expected = FinalTargetURL.Violation.forbiddenCharacter(Character(character))
        #expect(FinalTargetURL.validate("\(character)https://example.com/") == expected)
        #expect(FinalTargetURL.validate("https://example.com/\(character)") == expected)
    }

    @Test func reportsTheFirstForbiddenCharacter() {
        #expect(FinalTargetURL.validate("https://example.com/?a=1&b=%20#f") == .forbiddenCharacter("&"))
    }

    @Test(arguments: Array("ABCXYZabcxyz0189-._+=/:?"))
    func allowedCharacters(_ character: Character) {
        #expect(FinalTargetURL.isAllowed(character.asciiValue!))
        #expect(FinalTargetURL.validate("https://example.com/\(character)") == nil)
    }

    @Test func isAllowedCoversExactlyTheDocumentedAlphabet() {
        let documented = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._+=/:?".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(FinalTargetURL.isAllowed(byte) == documented.contains(byte), "byte \(byte)")
        }
    }

    @Test(arguments: [
        ("ftp://x", FinalTargetURL.Violation.notAbsoluteHTTP),
        ("//host/x", .notAbsoluteHTTP),
        ("/l/abc", .notAbsoluteHTTP),
        ("example.com/l/abc", .notAbsoluteHTTP),
        ("HTTPS://example.com", .notAbsoluteHTTP),
        ("Http://example.com", .notAbsoluteHTTP),
        ("https:/example.com", .notAbsoluteHTTP),
        ("https:example.com", .notAbsoluteHTTP),
        ("javascript:alert", .notAbsoluteHTTP),
        ("httpss://example.com", .notAbsoluteHTTP),
        ("https:///path", .missingHost),
        ("http:///path", .missingHost),
        ("https://", .missingHost),
        ("http://", .missingHost),
        ("https://?q=1", .missingHost),
        ("https://:443/x", .missingHost),
    ])
    func notAbsoluteOrHostless(_ url: String, _ expected: FinalTargetURL.Violation) {
        #expect(FinalTargetURL.validate(url) == expected)
    }

    @Test func empty() {
        #expect(FinalTargetURL.validate("") == .empty)
    }

    @Test func descriptionsNameTheProblem() {
        #expect(FinalTargetURL.Violation.tooLong(129).description.contains("129"))
        #expect(FinalTargetURL.Violation.tooLong(129).description.contains("128"))
        #expect(FinalTargetURL.Violation.forbiddenCharacter("&").description.contains("\"&\""))
        #expect(!FinalTargetURL.Violation.empty.description.isEmpty)
        #expect(!FinalTargetURL.Violation.notAbsoluteHTTP.description.isEmpty)
        #expect(!FinalTargetURL.Violation.missingHost.description.isEmpty)
    }
}

/// Regressions found by fuzzing (Fuzz/, scripts/fuzz.sh): a port must be a number a phone can use.
extension FinalTargetURLTests {
    @Test(
        "fuzz regression: a port that is not a number from 1 to 65535",
        arguments: [
            // The FuzzFinalTargetURL crash: accepted, though Foundation cannot parse it as a URL at all.
            "http://localhost:8080-l/abc",
            "http://x:abc", "https://x:", "https://x:/l/abc", "http://x:?q=1", "http://x:0", "http://x:65536",
            "http://x:99999999999", "http://x:+80", "http://x:-80", "http://x:1:2", "http://x::", "https://x:443.0/l",
            "http://x:8_0", "http://x:8=0",
        ])
    func invalidPort(_ url: String) {
        #expect(FinalTargetURL.validate(url) == .invalidPort)
    }

    @Test(arguments: [
        "http://x:1", "http://x:65535", "https://x:443/l/abc", "http://x:8080?q=1", "http://x:08080/l",
        "https://x/l/a:b", "https://x?next=y:z", "http://x/:", url("http://example.com:8080/", length: 128),
    ])
    func validPortsAndLaterColons(_ url: String) {
        #expect(FinalTargetURL.validate(url) == nil)
    }

    @Test func invalidPortComesAfterTheEarlierRules() {
        #expect(FinalTargetURL.validate("http://x:8&0") == .forbiddenCharacter("&"))
        #expect(FinalTargetURL.validate(Self.url("http://x:abc/", length: 129)) == .tooLong(129))
        #expect(FinalTargetURL.validate("https://:abc") == .missingHost)
        #expect(FinalTargetURL.Violation.invalidPort.description.contains("65535"))
    }
}
