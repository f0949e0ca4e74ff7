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
