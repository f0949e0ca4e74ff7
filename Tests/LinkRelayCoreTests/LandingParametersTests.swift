import Testing

@testable import LinkRelayCore

struct LandingParametersTests {
    typealias Expected = Result<LandingParameters, LandingParameters.Rejection>

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let query: String?
        let expected: Expected

        var testDescription: String { name }
    }

    static let uuid = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    static let upperUUID = "3F2504E0-4F89-41D3-9A0C-0305E82C3301"
    static let big = String(repeating: "a", count: 8 * 1024)

    static func valid(_ asc: Bool, _ authId: String = uuid) -> Expected {
        .success(LandingParameters(asc: asc, authId: authId))
    }

    static func bad(_ rejection: LandingParameters.Rejection) -> Expected { .failure(rejection) }

    static let validCases: [Case] = [
        Case(name: "asc=true", query: "asc=true&authId=\(uuid)", expected: valid(true)),
        Case(name: "asc=false", query: "asc=false&authId=\(uuid)", expected: valid(false)),
        Case(name: "upper-case UUID is lowercased", query: "asc=true&authId=\(upperUUID)", expected: valid(true)),
        Case(
            name: "mixed-case UUID is lowercased", query: "asc=true&authId=3F2504e0-4f89-41D3-9a0c-0305E82c3301",
            expected: valid(true)),
        Case(name: "authId first", query: "authId=\(uuid)&asc=true", expected: valid(true)),
        Case(name: "authId first, asc=false", query: "authId=\(uuid)&asc=false", expected: valid(false)),
        Case(name: "extra next=", query: "asc=true&authId=\(uuid)&next=https://evil.example", expected: valid(true)),
        Case(name: "extra url=//", query: "url=//evil.example&asc=true&authId=\(uuid)", expected: valid(true)),
        Case(
            name: "extra in the middle", query: "asc=false&redirect=https%3A%2F%2Fevil.example&authId=\(uuid)",
            expected: valid(false)),
        Case(name: "8 KB extra parameter", query: "asc=true&authId=\(uuid)&x=\(big)", expected: valid(true)),
        Case(name: "8 KB extra parameter name", query: "\(big)=1&asc=true&authId=\(uuid)", expected: valid(true)),
        Case(name: "empty pairs are skipped", query: "&&asc=true&&authId=\(uuid)&", expected: valid(true)),
        Case(name: "extra asc-like name ASC", query: "ASC=false&asc=true&authId=\(uuid)", expected: valid(true)),
    ]

    static let ascCases: [Case] = [
        Case(name: "asc=TRUE", query: "asc=TRUE&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=True", query: "asc=True&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=FALSE", query: "asc=FALSE&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=1", query: "asc=1&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=0", query: "asc=0&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=yes", query: "asc=yes&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc= (empty)", query: "asc=&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=true%20", query: "asc=true%20&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=true+", query: "asc=true+&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=%20true", query: "asc=%20true&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=true (literal space)", query: "asc=true &authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=%74rue", query: "asc=%74rue&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=%66alse", query: "asc=%66alse&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=true%00", query: "asc=true%00&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=true\\0 (literal NUL)", query: "asc=true\u{0}&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc=true=true", query: "asc=true=true&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "asc without =", query: "asc&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(name: "8 KB asc value", query: "asc=\(big)&authId=\(uuid)", expected: bad(.invalidAsc)),
        Case(
            name: "8 KB asc value starting with true", query: "asc=true\(big)&authId=\(uuid)",
            expected: bad(.invalidAsc)),
    ]

    static let authIdCases: [Case] = [
        Case(name: "braces", query: "asc=true&authId={\(uuid)}", expected: bad(.invalidAuthId)),
        Case(name: "percent-encoded braces", query: "asc=true&authId=%7B\(uuid)%7D", expected: bad(.invalidAuthId)),
        Case(name: "urn:uuid: prefix", query: "asc=true&authId=urn:uuid:\(uuid)", expected: bad(.invalidAuthId)),
        Case(name: "35 characters", query: "asc=true&authId=\(uuid.dropLast())", expected: bad(.invalidAuthId)),
        Case(name: "37 characters", query: "asc=true&authId=\(uuid)0", expected: bad(.invalidAuthId)),
        Case(
            name: "non-hex g", query: "asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c330g",
            expected: bad(.invalidAuthId)),
        Case(
            name: "non-hex G first", query: "asc=true&authId=Gf2504e0-4f89-41d3-9a0c-0305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(
            name: "missing dashes (32 hex)", query: "asc=true&authId=3f2504e04f8941d39a0c0305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(
            name: "dashes removed, padded to 36", query: "asc=true&authId=3f2504e04f8941d39a0c0305e82c33010000",
            expected: bad(.invalidAuthId)),
        Case(
            name: "dashes misplaced", query: "asc=true&authId=3f2504e-04f89-41d3-9a0c-0305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(
            name: "dashes misplaced 8-4-4-5-11", query: "asc=true&authId=3f2504e0-4f89-41d3-9a0c0-305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(
            name: "underscore for dash", query: "asc=true&authId=3f2504e0_4f89-41d3-9a0c-0305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(
            name: "percent-encoded dash %2D", query: "asc=true&authId=3f2504e0%2D4f89-41d3-9a0c-0305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(
            name: "percent-encoded dash, 36 chars", query: "asc=true&authId=3f2504e0%2D4f89-41d3-9a0c-0305e82c",
            expected: bad(.invalidAuthId)),
        Case(name: "empty authId", query: "asc=true&authId=", expected: bad(.invalidAuthId)),
        Case(name: "authId without =", query: "asc=true&authId", expected: bad(.invalidAuthId)),
        Case(name: "trailing space", query: "asc=true&authId=\(uuid)%20", expected: bad(.invalidAuthId)),
        Case(
            name: "full-width digit", query: "asc=true&authId=\u{FF13}f2504e0-4f89-41d3-9a0c-0305e82c3301",
            expected: bad(.invalidAuthId)),
        Case(name: "8 KB authId value", query: "asc=true&authId=\(big)", expected: bad(.invalidAuthId)),
        Case(
            name: "8 KB authId starting with a UUID", query: "asc=true&authId=\(uuid)\(big)",
            expected: bad(.invalidAuthId)),
    ]

    static let presenceCases: [Case] = [
        Case(name: "asc twice, equal", query: "asc=true&asc=true&authId=\(uuid)", expected: bad(.duplicateAsc)),
        Case(name: "asc twice, different", query: "asc=true&authId=\(uuid)&asc=false", expected: bad(.duplicateAsc)),
        Case(name: "asc twice, one empty", query: "asc=&asc=true&authId=\(uuid)", expected: bad(.duplicateAsc)),
        Case(
            name: "authId twice, equal", query: "asc=true&authId=\(uuid)&authId=\(uuid)",
            expected: bad(.duplicateAuthId)),
        Case(
            name: "authId twice, different case", query: "authId=\(uuid)&asc=true&authId=\(upperUUID)",
            expected: bad(.duplicateAuthId)),
        Case(
            name: "authId twice, different", query: "asc=false&authId=\(uuid)&authId=\(Secrets.uuid())",
            expected: bad(.duplicateAuthId)),
        Case(name: "missing asc", query: "authId=\(uuid)", expected: bad(.missingAsc)),
        Case(name: "missing authId", query: "asc=true", expected: bad(.missingAuthId)),
        Case(name: "missing authId, asc=false", query: "asc=false&next=x", expected: bad(.missingAuthId)),
        Case(name: "empty query", query: "", expected: bad(.missingAsc)),
        Case(name: "nil query", query: nil, expected: bad(.missingAsc)),
        Case(name: "only ampersands", query: "&&&", expected: bad(.missingAsc)),
        Case(name: "ASC=true (wrong case)", query: "ASC=true&authId=\(uuid)", expected: bad(.missingAsc)),
        Case(name: "Asc=true (wrong case)", query: "Asc=true&authId=\(uuid)", expected: bad(.missingAsc)),
        Case(name: "authid (wrong case)", query: "asc=true&authid=\(uuid)", expected: bad(.missingAuthId)),
        Case(name: "AUTHID (wrong case)", query: "asc=true&AUTHID=\(uuid)", expected: bad(.missingAuthId)),
        Case(name: "percent-encoded name a%73c", query: "a%73c=true&authId=\(uuid)", expected: bad(.missingAsc)),
        Case(name: "asc name with trailing space", query: "asc%20=true&authId=\(uuid)", expected: bad(.missingAsc)),
        Case(name: "8 KB extra param, no asc", query: "x=\(big)&authId=\(uuid)", expected: bad(.missingAsc)),
    ]

    @Test("valid landings", arguments: validCases)
    func validLanding(_ testCase: Case) {
        #expect(LandingParameters.parse(query: testCase.query) == testCase.expected)
    }

    @Test("asc must be exactly true or false", arguments: ascCases)
    func invalidAsc(_ testCase: Case) {
        #expect(LandingParameters.parse(query: testCase.query) == testCase.expected)
    }

    @Test("authId must be a bare 8-4-4-4-12 UUID", arguments: authIdCases)
    func invalidAuthId(_ testCase: Case) {
        #expect(LandingParameters.parse(query: testCase.query) == testCase.expected)
    }

    @Test("asc and authId each exactly once", arguments: presenceCases)
    func presence(_ testCase: Case) {
        #expect(LandingParameters.parse(query: testCase.query) == testCase.expected)
    }

    @Test func upperCaseAuthIdIsLowercased() throws {
        let parameters = try LandingParameters.parse(query: "authId=\(Self.upperUUID)&asc=false").get()
        #expect(parameters.authId == Self.uuid)
        #expect(parameters.asc == false)
    }

    @Test(arguments: [
        "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "0123abcd-ABCD-4ef0-89ab-cdefABCDEF01",
    ])
    func isUUIDAccepts(_ text: String) {
        #expect(LandingParameters.isUUID(Substring(text)))
    }

    @Test(arguments: [
        "", "-", "00000000000000000000000000000000", "0000000-00000-0000-0000-000000000000",
        "00000000-0000-0000-0000-00000000000", "00000000-0000-0000-0000-0000000000000",
        "0000000g-0000-0000-0000-000000000000", "00000000 0000 0000 0000 000000000000",
        "{0000000-0000-0000-0000-00000000000}", "00000000-0000-0000-0000-00000000000\u{E9}",
        "------------------------------------",
    ])
    func isUUIDRejects(_ text: String) {
        #expect(!LandingParameters.isUUID(Substring(text)))
    }

    @Test func isUUIDWorksOnSubstringSlices() {
        let text = "x\(Self.uuid)y"
        let slice = text.dropFirst().dropLast()
        #expect(LandingParameters.isUUID(slice))
        #expect(!LandingParameters.isUUID(text.dropFirst()))
    }
}

/// Regressions found by fuzzing (Fuzz/, scripts/fuzz.sh): the query must be read as bytes, never as grapheme
/// clusters, so that a combining mark after `&` or `=` cannot glue two parameters together.
extension LandingParametersTests {
    static let secondUUID = "00000000-0000-0000-0000-000000000000"

    static let byteLevelCases: [Case] = [
        // The first FuzzLanding crash: "&\u{59E}" was one Character, so `asc&...` was not a pair named asc.
        Case(
            name: "fuzz: combining mark after & (asc&\\u{59E}sauthId...)",
            query: String(
                decoding: [
                    0x61, 0x73, 0x63, 0x26, 0xD6, 0x9E, 0x73, 0x61, 0x75, 0x74, 0x68, 0x49, 0x64, 0x26, 0x0A, 0x3D,
                    0xF7,
                    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xD4,
                ], as: UTF8.self), expected: bad(.invalidAsc)),
        // Another: two bare `asc` pairs, one of them followed by "&\u{64C}".
        Case(
            name: "fuzz: combining mark after & hides a second asc",
            query: "c*sc)==&\u{FFFD}&asc&\u{64C}\u{FFFD}C&&&&&&/&awc&&&&&&&&&&&&&&asc&&&&&&&&&",
            expected: bad(.duplicateAsc)),
        // What that allowed: a second asc or authId that every other reader sees, while the relay accepted.
        Case(
            name: "combining mark after = hides a second asc",
            query: "asc=true&authId=\(uuid)&asc=\u{301}false", expected: bad(.duplicateAsc)),
        Case(
            name: "combining mark after = hides a second authId",
            query: "authId=\(uuid)&asc=true&authId=\u{301}\(secondUUID)", expected: bad(.duplicateAuthId)),
        Case(
            name: "combining mark after & glues a second asc to the authId",
            query: "asc=true&authId=\(uuid)&\u{301}asc=false", expected: valid(true)),
        Case(
            name: "combining mark after the authId value", query: "asc=true&authId=\(uuid)\u{301}",
            expected: bad(.invalidAuthId)),
        Case(
            name: "combining mark after the asc value", query: "asc=true\u{301}&authId=\(uuid)",
            expected: bad(.invalidAsc)),
        Case(
            name: "combining mark after the asc name", query: "asc\u{301}=true&authId=\(uuid)",
            expected: bad(.missingAsc)),
        Case(
            name: "zero-width joiner after &", query: "asc=true&authId=\(uuid)&\u{200D}asc=false",
            expected: valid(true)),
    ]

    @Test("fuzz regressions: the query is read as bytes", arguments: byteLevelCases)
    func byteLevel(_ testCase: Case) {
        #expect(LandingParameters.parse(query: testCase.query) == testCase.expected)
    }
}
