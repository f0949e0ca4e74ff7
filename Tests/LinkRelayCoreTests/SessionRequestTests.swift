import Foundation
import Testing

@testable import LinkRelayCore

struct SessionRequestTests {
    typealias Expected = Result<CreateSessionRequest, CreateSessionRequest.Rejection>

    static func validate(_ body: String, maximumHold: Int = 600) -> Expected {
        CreateSessionRequest.validate(Data(body.utf8), maximumHold: maximumHold)
    }

    static func invalid(_ errors: (String, String)...) -> Expected {
        .failure(.invalid(errors.map { CreateSessionRequest.FieldError(field: $0.0, message: $0.1) }))
    }

    @Test func minimalBody() {
        #expect(Self.validate(#"{"phoneNumber":"2001004014"}"#) == .success(.init(phoneNumber: "2001004014")))
    }

    @Test func everyFieldValid() throws {
        let body = """
            {"phoneNumber":"+12001004014","clientRequestId":"order-42!~","clientCustomerId":"c 1",
             "clientHumanId":"h","emailAddress":"a.b+c@example.com","ipAddress":"2001:db8::1","proveId":"p",
             "deviceId":"d","checkReputation":true,"allowOTPRetry":false,"smsMessage":"Tap #### to sign in",
             "rebind":null,"holdSeconds":120}
            """
        let request = try Self.validate(body).get()
        #expect(
            request
                == CreateSessionRequest(
                    phoneNumber: "+12001004014", clientRequestId: "order-42!~", clientCustomerId: "c 1",
                    clientHumanId: "h", emailAddress: "a.b+c@example.com", ipAddress: "2001:db8::1", proveId: "p",
                    deviceId: "d", checkReputation: true, allowOTPRetry: false, smsMessage: "Tap #### to sign in",
                    holdSeconds: 120))
        let encoded = try JSONEncoder().encode(request)
        #expect(CreateSessionRequest.validate(encoded, maximumHold: 600) == .success(request))
        #expect(Self.validate(request.fingerprint) == .success(request))
    }

    /// The fingerprint is stored with each session to recognise a repeated Idempotency-Key: its form must not change.
    @Test func fingerprintIsSortedCompactJSON() {
        let request = CreateSessionRequest(
            phoneNumber: "2001004014", clientRequestId: "r/1", checkReputation: false, smsMessage: "Go ####",
            holdSeconds: 60)
        #expect(
            request.fingerprint
                == #"{"checkReputation":false,"clientRequestId":"r\/1","holdSeconds":60,"phoneNumber":"2001004014","smsMessage":"Go ####"}"#
        )
    }

    @Test func bodySizeLimit() {
        let head = "{\"phoneNumber\":\"2001004014\",\"smsMessage\":\"####\""
        let atLimit =
            head + String(repeating: " ", count: CreateSessionRequest.maximumBodySize - head.utf8.count - 1) + "}"
        #expect(atLimit.utf8.count == 4096)
        #expect(Self.validate(atLimit) == .success(.init(phoneNumber: "2001004014", smsMessage: "####")))
        #expect(Self.validate(" " + atLimit) == .failure(.tooLarge))
        #expect(Self.validate(String(repeating: "x", count: 64 * 1024)) == .failure(.tooLarge))
    }

    @Test(arguments: ["[]", "null", "\"phoneNumber\"", "42"])
    func notAJSONObject(_ body: String) {
        #expect(Self.validate(body) == .failure(.malformed("The body must be a JSON object.")))
    }

    /// What Foundation's decoder takes beyond RFC 8259 is refused too, with where it breaks.
    @Test(arguments: [
        ("", "the end of the body at line 1, column 1"),
        ("{", "the end of the body where a key belongs at line 1, column 2"),
        ("{\"phoneNumber\":}", "\"}\" at line 1, column 16"),
        ("{} {}", "text after the JSON value at line 1, column 4"),
        ("\u{FEFF}{}", "the byte 0xEF at line 1, column 1"),
        ("{\"phoneNumber\":\"2001004014\",}", "a trailing comma at line 1, column 29"),
        ("{\n  \"phoneNumber\": \"2001004014\",\n}", "a trailing comma at line 3, column 1"),
        ("{\"holdSeconds\":[60,]}", "a trailing comma at line 1, column 20"),
        ("{/* c */\"phoneNumber\":\"2001004014\"}", "a comment where a key belongs at line 1, column 2"),
        ("{\"holdSeconds\":NaN}", "NaN or Infinity at line 1, column 16"),
        ("{\"holdSeconds\":-Infinity}", "NaN or Infinity at line 1, column 17"),
        ("{'phoneNumber':'2001004014'}", "a single quote where a key belongs at line 1, column 2"),
        ("{\"holdSeconds\":060}", "a number with a leading zero at line 1, column 16"),
        ("{\"smsMessage\":\"\\ud800 ####\"}", "a lone surrogate at line 1, column 16"),
        ("{\"smsMessage\":\"\\udc00 ####\"}", "a lone surrogate at line 1, column 16"),
        ("{\"smsMessage\":\"é\t####\"}", "a control character in a string at line 1, column 17"),
        ("{\"smsMessage\":\"\\x41\"}", "the escape \\x at line 1, column 17"),
        ("{\"rebind\":tru}", "a word other than true, false or null at line 1, column 11"),
    ])
    func notStrictJSON(_ body: String, _ found: String) {
        #expect(
            Self.validate(body)
                == .failure(.malformedJSON("The body is not valid JSON (RFC 8259): \(found).")))
    }

    @Test func strictJSONTakesWhatRFC8259Allows() {
        let body =
            #" { "phoneNumber" : "2001004014" , "smsMessage": "\ud83d\ude00 \u00e9\/ ####", "holdSeconds": 6e1 } "#
        #expect(StrictJSON.check(Data(body.utf8)) == nil)
        for value in ["0", "-0.5", "1E+2", "[]", "{}", "[[[]]]", "\"\"", "true", "null", "[1,2,{\"a\":[false]}]"] {
            #expect(StrictJSON.check(Data(value.utf8)) == nil, "\(value)")
        }
    }

    @Test func unknownFieldsAreNamedSorted() {
        #expect(
            Self.validate(#"{"zeta":1,"phoneNumber":"2001004014","alpha":null,"PhoneNumber":"x"}"#)
                == .failure(.malformed("Unknown field(s): PhoneNumber, alpha, zeta.")))
    }

    @Test func everyInvalidFieldIsNamedInOrder() {
        let body = """
            {"phoneNumber":"","clientRequestId":"a b","emailAddress":"\\u00e9@x","ipAddress":"1.2.3.4/8",
             "smsMessage":"no link","checkReputation":"yes","holdSeconds":1.5,"proveId":7}
            """
        #expect(
            Self.validate(body)
                == Self.invalid(
                    ("phoneNumber", "must be 1 to 20 characters"),
                    ("clientRequestId", "may contain only printable ASCII without spaces"),
                    ("emailAddress", "may contain only letters, digits and @ . +"),
                    ("ipAddress", "may contain only letters, digits and . :"),
                    ("proveId", "must be a string"),
                    ("smsMessage", "must contain #### where the link goes"),
                    ("checkReputation", "must be true or false"),
                    ("holdSeconds", "must be whole seconds from 1 to 600")))
    }

    @Test func nullIsAbsentButPhoneNumberIsRequired() {
        let required = CreateSessionRequest.phoneNumberRule
        #expect(Self.validate(#"{"phoneNumber":null,"rebind":null}"#) == Self.invalid(("phoneNumber", required)))
        #expect(Self.validate("{}") == Self.invalid(("phoneNumber", required)))
        #expect(Self.validate(#"{"flow":"prefill"}"#) == Self.invalid(("phoneNumber", required)))
        #expect(Self.validate(#"{"possessionType":"desktop"}"#) == Self.invalid(("phoneNumber", required)))
        #expect(
            Self.validate(#"{"phoneNumber":"1","smsMessage":null,"holdSeconds":null}"#)
                == .success(.init(phoneNumber: "1")))
    }

    @Test(
        "Unify needs no phone number where Prove finds it: Mobile Auth, customer-supplied possession, a proveId",
        arguments: [#"{"possessionType":"mobile"}"#, #"{"possessionType":"none"}"#, #"{"proveId":"p-1"}"#])
    func phoneNumberProveFinds(_ body: String) throws {
        let request = try Self.validate(body).get()
        #expect(request.phoneNumber == nil)
    }

    @Test(arguments: [("1", 1), ("600", 600), ("600.0", 600), ("1e2", 100), ("6E+2", 600)])
    func holdSecondsWhole(_ text: String, _ seconds: Int) {
        #expect(
            Self.validate(#"{"phoneNumber":"1","holdSeconds":\#(text)}"#)
                == .success(.init(phoneNumber: "1", holdSeconds: seconds)))
    }

    @Test(arguments: ["0", "-0", "601", "1.5", "-1", "1e300", "\"60\"", "true", "[60]"])
    func holdSecondsRefused(_ text: String) {
        #expect(
            Self.validate(#"{"phoneNumber":"1","holdSeconds":\#(text)}"#)
                == Self.invalid(("holdSeconds", "must be whole seconds from 1 to 600")))
    }

    @Test func lengthsCountCharactersNotBytes() {
        let sms = String(repeating: "é", count: 156) + "####"
        #expect(
            Self.validate(#"{"phoneNumber":"1","smsMessage":"\#(sms)"}"#)
                == .success(.init(phoneNumber: "1", smsMessage: sms)))
        #expect(
            Self.validate(#"{"phoneNumber":"1","smsMessage":"\#(sms)x"}"#)
                == Self.invalid(("smsMessage", "must be 1 to 160 characters")))
    }

    @Test func emptySmsMessageIsNamedTwice() {
        #expect(
            Self.validate(#"{"phoneNumber":"1","smsMessage":""}"#)
                == Self.invalid(
                    ("smsMessage", "must be 1 to 160 characters"),
                    ("smsMessage", "must contain #### where the link goes")))
    }
}
