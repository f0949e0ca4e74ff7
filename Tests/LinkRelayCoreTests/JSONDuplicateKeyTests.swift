import Foundation
import Testing

@testable import LinkRelayCore

@Suite("JSON duplicate keys")
struct JSONDuplicateKeyTests {
    /// A JSON text, and the duplicate it holds as `key@path` (nil: none).
    static let texts: [(json: String, duplicate: String?)] = [
        (#"{"a":1,"b":2}"#, nil),
        (#"{}"#, nil),
        (#"[]"#, nil),
        (#"{"a":1,"a":2}"#, "a@"),
        (#"{"a":1,"a":1}"#, "a@"),
        (#"{ "a" : 1 , "b" : 2 , "a" : null }"#, "a@"),
        // JSONDecoder takes a trailing comma.
        (#"{"a":1,"b":2,"a":3,}"#, "a@"),
        (#"{"o":{"a":1,},"a":2,}"#, nil),
        // Escapes are decoded before keys compare.
        (#"{"a":1,"\u0061":2}"#, "a@"),
        (#"{"\u0041":1,"\u0061":2}"#, nil),
        (#"{"\/":1,"/":2}"#, "/@"),
        (#"{"a\"b":1,"a\u0022b":2}"#, "a\"b@"),
        (#"{"tab\t":1,"tab\u0009":2}"#, "tab\t@"),
        // A surrogate pair is its one character, however each half is written.
        (#"{"😀":1,"\ud83d\ude00":2}"#, "😀@"),
        (#"{"\uD83D\uDE00":1,"\ud83d\ude00":2}"#, "😀@"),
        (#"{"\ud83d\ude00":1,"\ud83d\ude01":2}"#, nil),
        // Canonically equivalent spellings are one key to the decoded dictionary, so one key here.
        ("{\"\u{e9}\":1,\"e\u{301}\":2}", "\u{e9}@"),
        (#"{"\u00e9":1,"e\u0301":2}"#, "\u{e9}@"),
        // Nested objects, arrays of objects: the path names the object.
        (#"{"individual":{"firstName":"A","firstName":"B"}}"#, "firstName@individual"),
        (#"{"individual":{"addresses":[{"city":"X"},{"city":"Y","city":"Z"}]}}"#, "city@individual.addresses[1]"),
        (#"[{"a":1},[{"b":1,"b":2}]]"#, "b@[1][0]"),
        (#"{"a":{"b":{"c":{"d":1,"d":2}}}}"#, "d@a.b.c"),
        // The same key in sibling or nested objects is no duplicate; keys in values are not keys.
        (#"{"a":{"x":1},"b":{"x":2}}"#, nil),
        (#"[{"x":1},{"x":2}]"#, nil),
        (#"{"x":{"x":{"x":1}}}"#, nil),
        (#"{"a":"a","b":"a"}"#, nil),
        (#"{"a":["a","a"],"b":"{\"a\":1,\"a\":2}"}"#, nil),
        (#"{"a":[1,{"k":1}],"a2":[{"k":1}]}"#, nil),
        // A later object's keys start afresh, after an earlier one closed.
        (#"{"list":[{"k":1}],"k":2}"#, nil),
        (#"{"o":{"k":1},"k":2,"p":{"k":3}}"#, nil),
    ]

    @Test("Duplicate keys are found at any depth, after escapes are decoded", arguments: texts)
    func table(_ text: (json: String, duplicate: String?)) {
        let found = JSONDuplicateKey.first(in: Data(text.json.utf8))
        #expect(found.map { $0.key + "@" + $0.path } == text.duplicate, "\(text.json)")
        if text.duplicate == nil, !text.json.contains(",}") {
            #expect(
                (try? JSONSerialization.jsonObject(with: Data(text.json.utf8), options: .fragmentsAllowed)) != nil,
                "the table's texts are JSON")
        }
    }

    @Test("UTF-16 and UTF-32 bodies, which JSONDecoder reads too, are read as such")
    func otherEncodings() throws {
        let text = #"{"phoneNumber":"1","\u0070honeNumber":"2"}"#
        for encoding: String.Encoding in [
            .utf8, .utf16, .utf16LittleEndian, .utf16BigEndian, .utf32, .utf32LittleEndian, .utf32BigEndian,
        ] {
            let data = try #require(text.data(using: encoding))
            #expect(JSONDuplicateKey.first(in: data)?.key == "phoneNumber", "\(encoding)")
        }
        #expect(JSONDuplicateKey.first(in: Data([0xEF, 0xBB, 0xBF]) + Data(text.utf8))?.key == "phoneNumber")
    }

    @Test("Any bytes at all end the scan without a crash")
    func anyBytes() {
        for text in [#"{"a"#, #"{"a\"#, #"{"\u12"#, #"{"\ud800\u"#, "}}}]]]", #"{"a":1,"a""#, "\\", "\""] {
            _ = JSONDuplicateKey.first(in: Data(text.utf8))
        }
        #expect(JSONDuplicateKey.first(in: Data()) == nil)
    }

    @Test("The detail names the key and where it is")
    func detail() {
        let top = JSONDuplicateKey(key: "phoneNumber", path: "")
        #expect(top.detail == #"The body names the key "phoneNumber" more than once; give each key once."#)
        let nested = JSONDuplicateKey(key: "city", path: "individual.addresses[0]")
        #expect(nested.detail.contains(#""city""#) && nested.detail.contains("individual.addresses[0]"))
        #expect(JSONDuplicateKey(key: String(repeating: "k", count: 500), path: "").detail.count < 200)
    }

    /// Bodies the API reads, each with a key given twice: 400 (malformed), naming the key.
    static let duplicateBodies: [(body: String, key: String)] = [
        (#"{"phoneNumber":"2001004014","phoneNumber":"2001004018"}"#, "phoneNumber"),
        (#"{"phoneNumber":"2001004014","\u0070honeNumber":"2001004018"}"#, "phoneNumber"),
        (#"{"phoneNumber":"2001004014","holdSeconds":60,"holdSeconds":600}"#, "holdSeconds"),
        (#"{"phoneNumber":"2001004014","flow":"prefill","dob":"1982-07-19","dob":"1990-01-01"}"#, "dob"),
    ]

    @Test("A create body with a duplicate key is 400 naming the key", arguments: duplicateBodies)
    func createRefusesDuplicates(_ body: (body: String, key: String)) {
        let result = CreateSessionRequest.validate(Data(body.body.utf8), maximumHold: 600)
        guard case .failure(.malformed(let detail)) = result else {
            Issue.record("\(body.body) gave \(result)")
            return
        }
        #expect(detail.contains("\"\(body.key)\""), "\(detail)")
    }

    @Test("A Pre-Fill step body with a duplicate key, at any depth, is 400 naming the key")
    func prefillStepsRefuseDuplicates() {
        let challenge = PrefillStepBody.challenge(Data(#"{"ssn":"6227","ssn":"1234"}"#.utf8))
        #expect(challenge == .failure(.malformed(JSONDuplicateKey(key: "ssn", path: "").detail)))
        let complete = PrefillStepBody.complete(
            Data(
                #"{"individual":{"firstName":"Marcia","lastName":"Longo","addresses":[{"city":"A","\u0063ity":"B"}]}}"#
                    .utf8))
        #expect(
            complete == .failure(.malformed(JSONDuplicateKey(key: "city", path: "individual.addresses[0]").detail)))
        let siblings = PrefillStepBody.complete(
            Data(#"{"individual":{"firstName":"M","lastName":"L","addresses":[{"city":"A"},{"city":"B"}]}}"#.utf8))
        #expect((try? siblings.get())?.addresses?.count == 2, "the same key in sibling objects is fine")
    }
}
