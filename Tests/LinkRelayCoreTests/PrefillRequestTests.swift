import Foundation
import Testing

@testable import LinkRelayCore

/// What the backend sends for Pre-Fill: the create's `flow`, `dob` and `ssn`, and the bodies of the
/// challenge and complete steps. Every invalid field is named; nothing malformed reaches Prove.
struct PrefillRequestTests {
    typealias FieldError = CreateSessionRequest.FieldError

    static func create(_ body: String) -> Result<CreateSessionRequest, CreateSessionRequest.Rejection> {
        CreateSessionRequest.validate(Data(body.utf8), maximumHold: 600)
    }

    static func invalid(_ errors: (String, String)...) -> CreateSessionRequest.Rejection {
        .invalid(errors.map { FieldError(field: $0.0, message: $0.1) })
    }

    @Test(
        "Prove's three forms of a date of birth, with real months and days",
        arguments: [
            ("1982-07-19", true), ("1982-07", true), ("07-19", true), ("1982-7-19", false), ("1982-13-01", false),
            ("1982-07-32", false), ("00-10", false), ("19820719", false), ("1982-07-19T00:00:00Z", false), ("", false),
            ("１９８２-07-19", false), ("-07-19", false), ("1982--19", false),
        ])
    func dateOfBirth(text: String, valid: Bool) {
        #expect(PrefillIndividual.isValidDob(text) == valid)
    }

    @Test(
        "An SSN is 9 digits or the last 4",
        arguments: [
            ("470806227", true), ("6227", true), ("47080622", false), ("470-80-6227", false), ("62a7", false),
            ("٦٢٢٧", false),
        ])
    func ssn(text: String, valid: Bool) {
        #expect(PrefillIndividual.isValidSSN(text) == valid)
    }

    @Test func prefillCreate() throws {
        let request = try Self.create(#"{"phoneNumber":"2001001693","flow":"prefill","dob":"1982-07","ssn":"6227"}"#)
            .get()
        #expect(request.flow == .prefill && request.dob == "1982-07" && request.ssn == "6227")
        #expect(try Self.create(#"{"phoneNumber":"2001004014","flow":"unify"}"#).get().flow == .unify)
    }

    @Test func prefillCreateRefusals() {
        #expect(
            Self.create(#"{"phoneNumber":"2001001693","flow":"prefil"}"#)
                == .failure(Self.invalid(("flow", "must be unify, prefill or nevis"))))
        #expect(
            Self.create(#"{"phoneNumber":"2001001693","flow":"prefill","dob":"19-07-1982","ssn":"12345"}"#)
                == .failure(
                    Self.invalid(
                        ("dob", "must be YYYY-MM-DD, YYYY-MM or MM-DD"), ("ssn", "must be 9 digits, or the last 4"))))
        // `/v3/start` takes none of Unify's own fields, and runs on the desktop only.
        #expect(
            Self.create(
                #"{"phoneNumber":"2001001693","flow":"prefill","proveId":"p","rebind":true,"possessionType":"none"}"#)
                == .failure(
                    Self.invalid(
                        ("proveId", "applies to flow unify only"), ("rebind", "applies to flow unify only"),
                        ("possessionType", "must be desktop for flow prefill"))))
        #expect(
            Self.create(#"{"phoneNumber":"2001004014","ssn":"6227"}"#)
                == .failure(Self.invalid(("ssn", "applies to flow prefill only"))))
    }

    @Test func challengeBody() {
        #expect(PrefillStepBody.challenge(Data()) == .success(.init()))
        #expect(PrefillStepBody.challenge(Data("{}".utf8)) == .success(.init()))
        #expect(PrefillStepBody.challenge(Data(#"{"ssn":"6227"}"#.utf8)) == .success(.init(ssn: "6227")))
        #expect(
            PrefillStepBody.challenge(Data(#"{"dob":"1982-07-19","ssn":"470806227"}"#.utf8))
                == .success(.init(dob: "1982-07-19", ssn: "470806227")))
        #expect(
            PrefillStepBody.challenge(Data(#"{"dob":"yesterday"}"#.utf8))
                == .failure(Self.invalid(("dob", "must be YYYY-MM-DD, YYYY-MM or MM-DD"))))
        #expect(
            PrefillStepBody.challenge(Data(#"{"dob":19820719}"#.utf8))
                == .failure(Self.invalid(("dob", "must be a string"))))
        #expect(
            PrefillStepBody.challenge(Data(#"{"name":"x"}"#.utf8)) == .failure(.malformed("Unknown field(s): name.")))
        #expect(PrefillStepBody.challenge(Data("[1]".utf8)) == .failure(.malformed("The body must be a JSON object.")))
        #expect(PrefillStepBody.challenge(Data(repeating: 32, count: 5000)) == .failure(.tooLarge))
    }

    @Test func completeBody() throws {
        let body = """
            {"individual":{"firstName":"Marcia","lastName":"Longo","dob":"1982-07-19","ssn":"470806227",
             "emailAddresses":["m@example.com"],
             "addresses":[{"address":"00 Mallard Park","city":"New Orleans","region":"LA","postalCode":"70165"}]}}
            """
        let person = try PrefillStepBody.complete(Data(body.utf8)).get()
        #expect(
            person
                == PrefillIndividual(
                    firstName: "Marcia", lastName: "Longo", dob: "1982-07-19", ssn: "470806227",
                    emailAddresses: ["m@example.com"],
                    addresses: [
                        .init(address: "00 Mallard Park", city: "New Orleans", region: "LA", postalCode: "70165")
                    ]
                ))
        #expect(
            PrefillStepBody.complete(Data("{}".utf8))
                == .failure(Self.invalid(("individual", "is required, as an object"))))
        #expect(
            PrefillStepBody.complete(Data(#"{"individual":{"lastName":"Longo","middle":"x"}}"#.utf8))
                == .failure(Self.invalid(("individual.middle", "is not a field of this object"))))
        let bad = """
            {"individual":{"lastName":"Lo\\nngo","dob":"1982-02-30x","emailAddresses":[],
             "addresses":[{"city":7},{"zip":"1"},"x"]}}
            """
        #expect(
            PrefillStepBody.complete(Data(bad.utf8))
                == .failure(
                    Self.invalid(
                        ("individual.firstName", "is required"),
                        ("individual.lastName", "must be 1 to 64 characters on one line"),
                        ("individual.dob", "must be 1 to 10 characters on one line"),
                        ("individual.emailAddresses", "must be an array of 1 to 3 items"),
                        ("individual.addresses[0].city", "must be a string"),
                        ("individual.addresses[1].zip", "is not a field of this object"),
                        ("individual.addresses[2]", "must be an object"))))
    }

    /// The individual never shows in a log line, whatever interpolates it.
    @Test func identityIsRedacted() {
        let person = PrefillIndividual(
            firstName: "Marcia", lastName: "Longo", dob: "1982-07-19", ssn: "470806227",
            addresses: [.init(address: "00 Mallard Park")])
        let progress = PrefillProgress(next: ["v3-complete": "/v3/complete"], individual: person)
        for text in [
            "\(person)", String(reflecting: person), "\(progress)", String(reflecting: progress), "\([person])",
        ] {
            for secret in ["Marcia", "Longo", "1982", "470806227", "Mallard"] {
                #expect(!text.contains(secret), "\(text)")
            }
        }
        var dumped = ""
        dump(progress, to: &dumped)
        #expect(!dumped.contains("Longo"))
        #expect(progress.offeredSteps == [.complete])
    }
}
