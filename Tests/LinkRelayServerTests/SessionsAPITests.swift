import AsyncHTTPClient
import Foundation
import LinkRelayCore
import Testing

@testable import LinkRelayServer

private struct SessionsOutbox: Decodable {
    struct Message: Decodable {
        var phoneNumber: String
        var text: String
        var link: String
    }

    var messages: [Message]
}

extension TestRelay {
    /// `linkrelay_sessions_created_total` of the default tenant as `/metrics` reads now.
    fileprivate func sessionsCreatedCount() async throws -> Int {
        let text = try await request(.GET, "/metrics").body
        let line = text.split(separator: "\n").first {
            $0.hasPrefix(#"linkrelay_sessions_created_total{tenant="default"} "#)
        }
        let value = try #require(line?.split(separator: " ").last)
        return try #require(Double(value).map { Int($0) })
    }

    /// The Instant Link messages the sandbox "sent" to `phone`.
    fileprivate func outboxMessages(phone: String = "2001004014") async throws -> [SessionsOutbox.Message] {
        try await request(.GET, "/sandbox/outbox?phoneNumber=\(phone)").json(SessionsOutbox.self).messages
    }

    /// Checks that a rejected request left no trace: no session counted, no SMS sent.
    fileprivate func expectNothingCreated(
        phone: String = "2001004014", sourceLocation: SourceLocation = #_sourceLocation
    )
        async throws
    {
        #expect(try await sessionsCreatedCount() == 0, sourceLocation: sourceLocation)
        #expect(try await outboxMessages(phone: phone).isEmpty, sourceLocation: sourceLocation)
    }
}

private func expectProblem(
    _ answer: HTTPAnswer, status: Int, sourceLocation: SourceLocation = #_sourceLocation
) throws -> ProblemBody {
    #expect(answer.status == status, "answered \(answer.status): \(answer.body)", sourceLocation: sourceLocation)
    #expect(answer.header("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
    let problem = try answer.json(ProblemBody.self)
    #expect(problem.status == status, sourceLocation: sourceLocation)
    #expect(!problem.title.isEmpty && !problem.detail.isEmpty, sourceLocation: sourceLocation)
    // Every problem names its kind, and its type is that kind's entry on the errors page.
    #expect(ErrorCode(rawValue: problem.code)?.status.code == UInt(status), sourceLocation: sourceLocation)
    #expect(problem.type.hasSuffix("/errors#" + problem.code), sourceLocation: sourceLocation)
    return problem
}

/// One invalid body and the field the 422 must name.
struct SessionsInvalidField: Sendable, CustomTestStringConvertible {
    var body: String
    var field: String
    var testDescription: String { "\(field): \(body.prefix(60))" }

    static func with(_ fragment: String, field: String) -> SessionsInvalidField {
        SessionsInvalidField(body: "{\"phoneNumber\":\"2001004014\",\(fragment)}", field: field)
    }
}

@Suite("Sessions API", .timeLimit(.minutes(1)))
struct SessionsAPITests {
    static let createBody = #"{"phoneNumber":"2001004014"}"#

    // MARK: - authorization

    @Test(
        "POST /v1/sessions without a valid API key is 401 with WWW-Authenticate",
        arguments: [nil, "Bearer wrong-key-0123456789abcdef", "Basic dGVzdC1hcGkta2V5OnNlY3JldA==", "Bearer "])
    func unauthorized(authorization: String?) async throws {
        try await TestRelay.run { relay in
            var headers = [("Content-Type", "application/json")]
            if let authorization { headers.append(("Authorization", authorization)) }
            let answer = try await relay.request(.POST, "/v1/sessions", headers: headers, body: Self.createBody)
            _ = try expectProblem(answer, status: 401)
            #expect(answer.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            if let authorization, authorization.count > 7 {
                #expect(!answer.body.contains(authorization.dropFirst(6)), "no echo of the credential")
            }
            try await relay.expectNothingCreated()
        }
    }

    @Test("GET and cancel also need the API key")
    func unauthorizedReadAndCancel() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let show = try await relay.request(.GET, "/v1/sessions/\(created.sessionId)")
            _ = try expectProblem(show, status: 401)
            let cancel = try await relay.request(
                .POST, "/v1/sessions/\(created.sessionId)/cancel",
                headers: [("Authorization", "Bearer \(created.channel.token)")])
            _ = try expectProblem(cancel, status: 401)
            #expect(!cancel.body.contains(created.channel.token))
            #expect(
                try await relay.session(created.sessionId).state == "waiting", "cancel without a key changed nothing")
        }
    }

    // MARK: - malformed bodies

    @Test("An unknown field is 400 and named")
    func unknownField() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","favouriteColour":"red"}"#)
            let problem = try expectProblem(answer, status: 400)
            #expect(problem.detail.contains("favouriteColour"))
            try await relay.expectNothingCreated()
        }
    }

    @Test(
        "A body that is not a JSON object is 400",
        arguments: [
            #"{"phoneNumber":"#, #"[{"phoneNumber":"2001004014"}]"#, #""2001004014""#, "", "phoneNumber=2001004014",
        ])
    func notAnObject(body: String) async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: body)
            _ = try expectProblem(answer, status: 400)
            try await relay.expectNothingCreated()
        }
    }

    @Test("A body over 4096 bytes is 413")
    func tooLarge() async throws {
        try await TestRelay.run { relay in
            let padding = String(repeating: "x", count: 4096)
            let body = #"{"phoneNumber":"2001004014","clientCustomerId":"\#(padding)"}"#
            #expect(body.utf8.count > CreateSessionRequest.maximumBodySize)
            let answer = try await relay.api(.POST, "/v1/sessions", body: body)
            _ = try expectProblem(answer, status: 413)
            try await relay.expectNothingCreated()
        }
    }

    // MARK: - validation

    static let invalidFields: [SessionsInvalidField] = [
        SessionsInvalidField(body: "{}", field: "phoneNumber"),
        SessionsInvalidField(body: #"{"clientRequestId":"abc"}"#, field: "phoneNumber"),
        SessionsInvalidField(body: #"{"phoneNumber":"200 1004014"}"#, field: "phoneNumber"),
        SessionsInvalidField(body: #"{"phoneNumber":"200-100-4014"}"#, field: "phoneNumber"),
        SessionsInvalidField(body: #"{"phoneNumber":"200100401420010040142"}"#, field: "phoneNumber"),
        SessionsInvalidField(body: #"{"phoneNumber":""}"#, field: "phoneNumber"),
        SessionsInvalidField(body: #"{"phoneNumber":2001004014}"#, field: "phoneNumber"),
        .with("\"smsMessage\":\"#### " + String(repeating: "a", count: 156) + "\"", field: "smsMessage"),
        .with(#""smsMessage":"Tap this link to continue""#, field: "smsMessage"),
        .with(#""emailAddress":"someone!@example.com""#, field: "emailAddress"),
        .with(#""ipAddress":"10.0.0.1/24""#, field: "ipAddress"),
        .with(#""holdSeconds":0"#, field: "holdSeconds"),
        .with(#""holdSeconds":601"#, field: "holdSeconds"),
        .with(#""holdSeconds":1.5"#, field: "holdSeconds"),
        .with(#""holdSeconds":"10""#, field: "holdSeconds"),
        .with(#""holdSeconds":-5"#, field: "holdSeconds"),
        .with(#""checkReputation":"yes""#, field: "checkReputation"),
        .with(#""allowOTPRetry":1"#, field: "allowOTPRetry"),
    ]

    @Test("An invalid field is 422 and named in errors", arguments: invalidFields)
    func invalidField(_ invalid: SessionsInvalidField) async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: invalid.body)
            let problem = try expectProblem(answer, status: 422)
            let errors = try #require(problem.errors)
            #expect(errors.map(\.field) == [invalid.field])
            #expect(errors.allSatisfy { !$0.message.isEmpty })
            #expect(problem.detail.contains(invalid.field))
            try await relay.expectNothingCreated()
        }
    }

    @Test("smsMessage of exactly 160 characters with #### is accepted")
    func smsMessageAtLimit() async throws {
        try await TestRelay.run { relay in
            let message = "Verify: #### " + String(repeating: "a", count: 147)
            #expect(message.count == 160)
            let created = try await relay.createSession(extra: #","smsMessage":"\#(message)","holdSeconds":600"#)
            #expect(created.state == "waiting")
            #expect(try await relay.sessionsCreatedCount() == 1)
        }
    }

    @Test("Several invalid fields are all named")
    func severalInvalid() async throws {
        try await TestRelay.run { relay in
            let body = """
                {"phoneNumber":"200 100","emailAddress":"a!b","ipAddress":"1.2.3.4/8","holdSeconds":0,\
                "checkReputation":"yes","smsMessage":"no placeholder"}
                """
            let answer = try await relay.api(.POST, "/v1/sessions", body: body)
            let problem = try expectProblem(answer, status: 422)
            let fields = Set(try #require(problem.errors).map(\.field))
            #expect(
                fields == ["phoneNumber", "emailAddress", "ipAddress", "holdSeconds", "checkReputation", "smsMessage"])
            try await relay.expectNothingCreated(phone: "200100")
        }
    }

    // MARK: - Prove failures

    @Test("A number Prove does not know is the caller's: 422 phone_number_not_supported with Prove's code in detail")
    func proveRejects() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001009999"}"#)
            let problem = try expectProblem(answer, status: 422)
            #expect(problem.code == "phone_number_not_supported")
            #expect(problem.detail.contains("8007"))
            #expect(!answer.body.contains(TestRelay.apiKey))
            try await relay.expectNothingCreated(phone: "2001009999")
        }
    }

    @Test("Another Prove product's test user is Prove's 8009: the operator's credentials, 502, nothing created")
    func anotherProductsUser() async throws {
        try await TestRelay.run { relay in
            // 2001001695 is a Pre-Fill test user; a Unify session asks /v3/unify for it.
            let answer = try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001001695"}"#)
            let problem = try expectProblem(answer, status: 502)
            #expect(problem.code == "prove_credentials")
            #expect(problem.detail.contains("8009"))
            try await relay.expectNothingCreated(phone: "2001001695")
        }
    }

    // MARK: - Idempotency-Key

    @Test("The same Idempotency-Key and body twice give the same session and one SMS")
    func idempotentRepeat() async throws {
        try await TestRelay.run { relay in
            let key = [("Idempotency-Key", "order-42-attempt-1")]
            let first = try await relay.createSession(headers: key)
            let second = try await relay.createSession(headers: key)
            #expect(second.sessionId == first.sessionId)
            #expect(second.finalTargetUrl == first.finalTargetUrl)
            #expect(second.channel.token == first.channel.token)
            #expect(try await relay.outboxMessages().count == 1)
            #expect(try await relay.sessionsCreatedCount() == 1)
            let other = try await relay.createSession(headers: [("Idempotency-Key", "order-42-attempt-2")])
            #expect(other.sessionId != first.sessionId, "another key is another session")
            #expect(try await relay.outboxMessages().count == 2)
        }
    }

    static let stores = ["memory", "sqlite"] + (TestPostgres.available ? ["postgres"] : [])

    @Test(
        "An Idempotency-Key belongs to the tenant that sent it: its keys share it, another's is its own",
        arguments: stores)
    func idempotencyKeyScopedToTenant(_ kind: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-idem-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store =
            switch kind {
            case "sqlite": "sqlite:" + directory.appendingPathComponent("relay.sqlite").path
            case "postgres": try await TestPostgres.createDatabase()
            default: "memory"
            }
        let rotatedKey = "test-api-key-rotated-0123456789"
        let otherTenantKey = "test-api-key-of-another-integrator"
        try await TestRelay.run(
            store: store, flags: ["api-key": [TestRelay.apiKey, rotatedKey, "acme:" + otherTenantKey]]
        ) { relay in
            let key = ("Idempotency-Key", "order-44")
            let first = try await relay.createSession(headers: [key])
            func create(with apiKey: String) async throws -> HTTPAnswer {
                try await relay.request(
                    .POST, "/v1/sessions",
                    headers: [("Authorization", "Bearer \(apiKey)"), ("Content-Type", "application/json"), key],
                    body: #"{"phoneNumber":"2001004014"}"#)
            }
            // The tenant's other key (a rotation under a retried create): the same session, no second SMS.
            let rotated = try await create(with: rotatedKey)
            #expect(rotated.status == 201)
            #expect(try rotated.json(Created.self).sessionId == first.sessionId)
            #expect(try await relay.outboxMessages().count == 1)
            // Another tenant: a session of its own, never the first one's channel token.
            let answer = try await create(with: otherTenantKey)
            #expect(answer.status == 201)
            let second = try answer.json(Created.self)
            #expect(second.sessionId != first.sessionId)
            #expect(second.channel.token != first.channel.token)
            #expect(try await relay.outboxMessages().count == 2)
            // Each tenant still gets its own session back on a repeat.
            #expect(try await relay.createSession(headers: [key]).sessionId == first.sessionId)
            #expect(try await create(with: otherTenantKey).json(Created.self).sessionId == second.sessionId)
        }
    }

    @Test("The same Idempotency-Key with a different body is 422 and starts nothing")
    func idempotencyKeyReused() async throws {
        try await TestRelay.run { relay in
            let key = [("Idempotency-Key", "order-43")]
            let first = try await relay.createSession(headers: key)
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","holdSeconds":60}"#, headers: key)
            let problem = try expectProblem(answer, status: 422)
            #expect(!problem.detail.contains(first.sessionId))
            #expect(try await relay.outboxMessages().count == 1)
            #expect(try await relay.sessionsCreatedCount() == 1)
        }
    }

    // MARK: - reading

    @Test("GET of an unknown id is 404 problem+json")
    func unknownSession() async throws {
        try await TestRelay.run { relay in
            _ = try expectProblem(try await relay.api(.GET, "/v1/sessions/ses_doesnotexist"), status: 404)
            _ = try expectProblem(try await relay.api(.GET, "/v1/sessions/not-even-an-id"), status: 404)
        }
    }

    @Test("GET shows state, times and events, and no authToken or channel token")
    func showSession() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let answer = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)")
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type")?.hasPrefix("application/json") == true)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
            #expect(object["sessionId"] as? String == created.sessionId)
            #expect(object["state"] as? String == "waiting")
            #expect(object["createdAt"] is String)
            #expect(object["expiresAt"] as? String == created.expiresAt)
            let events = try #require(object["events"] as? [[String: Any]])
            #expect(events.count == 1)
            #expect(events.first?["type"] as? String == "waiting")
            #expect(events.first?["seq"] as? Int == 1)
            #expect(object["authToken"] == nil)
            #expect(object["channel"] == nil)
            #expect(object["token"] == nil)
            #expect(!answer.body.contains(created.channel.token))
            if let authToken = created.authToken { #expect(!answer.body.contains(authToken)) }
        }
    }

    @Test("The 201 body has every field of the contract, with usable URLs")
    func createdBody() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: Self.createBody)
            #expect(answer.status == 201)
            #expect(answer.header("Content-Type")?.hasPrefix("application/json") == true)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
            for field in [
                "sessionId", "state", "createdAt", "expiresAt", "finalTargetUrl", "authToken", "correlationId",
            ] {
                #expect((object[field] as? String)?.isEmpty == false, "\(field) is a non-empty string")
            }
            let channel = try #require(object["channel"] as? [String: Any])
            for field in ["token", "websocket", "events", "poll"] {
                #expect((channel[field] as? String)?.isEmpty == false, "channel.\(field) is a non-empty string")
            }

            let created = try answer.json(Created.self)
            #expect(created.sessionId.hasPrefix("ses_"))
            #expect(created.state == "waiting")
            let target = created.finalTargetUrl
            #expect(target.utf8.count <= 128)
            let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._+=/:?")
            #expect(target.allSatisfy { allowed.contains($0) })
            #expect(FinalTargetURL.validate(target) == nil)
            #expect(target.hasPrefix(relay.base + "/l/"))

            let base = "/v1/sessions/" + created.sessionId
            #expect(created.channel.websocket.hasPrefix("ws://"))
            #expect(created.channel.websocket == "ws://" + relay.base.dropFirst("http://".count) + base + "/ws")
            #expect(created.channel.events == relay.base + base + "/events")
            #expect(created.channel.poll == relay.base + base + "/poll")
            #expect(created.channel.token.count >= 16)

            let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
            let start = try style.parse(try #require(object["createdAt"] as? String))
            let end = try style.parse(created.expiresAt)
            #expect(end.timeIntervalSince(start) == 180, "the default hold")
            #expect(try await relay.sessionsCreatedCount() == 1)
        }
    }

    @Test("holdSeconds sets expiresAt")
    func holdSecondsApplied() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","holdSeconds":30}"#)
            #expect(answer.status == 201)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
            let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
            let start = try style.parse(try #require(object["createdAt"] as? String))
            let end = try style.parse(try #require(object["expiresAt"] as? String))
            #expect(end.timeIntervalSince(start) == 30)
        }
    }

    // MARK: - no echo of secrets

    @Test("No problem body ever contains the Authorization token")
    func noSecretEcho() async throws {
        try await TestRelay.run { relay in
            let secret = "sk_live_TOPSECRET_0123456789abcdef"
            let wrong = [("Authorization", "Bearer \(secret)"), ("Content-Type", "application/json")]
            var answers: [HTTPAnswer] = []
            answers.append(try await relay.request(.POST, "/v1/sessions", headers: wrong, body: Self.createBody))
            answers.append(try await relay.request(.GET, "/v1/sessions/ses_x", headers: wrong))
            answers.append(try await relay.request(.POST, "/v1/sessions/ses_x/cancel", headers: wrong))
            answers.append(try await relay.request(.GET, "/v1/sessions/ses_x/poll", headers: wrong))
            answers.append(try await relay.request(.GET, "/v1/nothing-here", headers: wrong))
            // With the right key, the failures after authorization must not echo it either.
            answers.append(try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","x":1}"#))
            answers.append(try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"x y"}"#))
            answers.append(try await relay.api(.POST, "/v1/sessions", body: "not json"))
            answers.append(try await relay.api(.GET, "/v1/sessions/ses_missing"))
            answers.append(try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001009999"}"#))
            for answer in answers {
                #expect(answer.status >= 400)
                #expect(answer.header("Content-Type") == "application/problem+json", "\(answer.status): \(answer.body)")
                #expect(!answer.body.contains(secret))
                #expect(!answer.body.contains("TOPSECRET"))
                #expect(!answer.body.contains(TestRelay.apiKey))
            }
            #expect(!relay.logs.all.contains { $0.contains(secret) }, "nor any log line")
        }
    }
}
