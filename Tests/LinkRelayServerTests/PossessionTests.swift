import Foundation
import LinkRelayCore
import Testing

/// `possessionType` `mobile` and `none`, and the bind (API.md v1.1), against the embedded sandbox.
@Suite("Possession types and the bind", .timeLimit(.minutes(1)))
struct PossessionTests {
    struct Binding: Decodable {
        var success: Bool
        var phoneNumber: String
        var deviceId: String?
    }

    func bind(_ relay: TestRelay, _ id: String, body: String? = nil) async throws -> HTTPAnswer {
        try await relay.api(.POST, "/v1/sessions/\(id)/bind", body: body)
    }

    @Test("none: no link is sent, Prove's possession_required comes as the result, and one bind keeps Prove's answer")
    func noneThenBind() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#)
            #expect(answer.status == 201)
            #expect(answer.body.contains(#""possessionType":"none""#))
            let created = try answer.json(Created.self)
            let outbox = try await relay.request(.GET, "/sandbox/outbox?phoneNumber=2001004014").body
            #expect(!outbox.contains("\"link\""), "no Instant Link for customer-supplied possession")
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "result"])
            #expect(events.last?.outcome == "possession_required")

            let bound = try await bind(relay, created.sessionId)
            #expect(bound.status == 200)
            let binding = try bound.json(Binding.self)
            #expect(binding.success)
            #expect(binding.deviceId?.isEmpty == false)
            let view = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)").body
            #expect(view.contains(#""binding":{"#))
            #expect(view.contains(#""possessionType":"none""#))
            #expect(try await bind(relay, created.sessionId).status == 409, "once")
            let after = try await relay.pollUntilDone(created)
            #expect(after.map(\.type) == ["waiting", "result"], "a bind sends no channel event")
        }
    }

    @Test("none without a phone number, as Prove's customer-supplied possession sends it: the bind names the number")
    func noneWithoutANumber() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: #"{"possessionType":"none"}"#)
            #expect(answer.status == 201)
            let created = try answer.json(Created.self)
            #expect(try await relay.pollUntilDone(created).last?.outcome == "possession_required")
            // Without a number of its own the session needs the bind's.
            let missing = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/bind", body: "{}")
            #expect(missing.status == 422 && missing.body.contains("phoneNumber"))
            let bound = try await bind(relay, created.sessionId, body: #"{"phoneNumber":"2001004014"}"#)
            #expect(bound.status == 200)
            let binding = try bound.json(Binding.self)
            #expect(binding.success && binding.phoneNumber == "2001004014")
        }
    }

    @Test("desktop needs a phone number, for the Instant Link's SMS")
    func desktopNeedsANumber() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: #"{"possessionType":"desktop"}"#)
            #expect(answer.status == 422 && answer.body.contains("phoneNumber"))
        }
    }

    @Test("A bind anywhere but on a possession_required session is refused, and bad bodies are 400")
    func bindRules() async throws {
        try await TestRelay.run { relay in
            let desktop = try await relay.createSession()
            #expect(try await bind(relay, desktop.sessionId).status == 409)
            #expect(try await bind(relay, "ses_unknown").status == 404)
            let none = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#
            ).json(Created.self)
            _ = try await relay.pollUntilDone(none)
            #expect(try await bind(relay, none.sessionId, body: #"{"phoneNumber":"12ab"}"#).status == 400)
            #expect(try await bind(relay, none.sessionId, body: #"{"other":1}"#).status == 400)
            let unauthenticated = try await relay.request(.POST, "/v1/sessions/\(none.sessionId)/bind")
            #expect(unauthenticated.status == 401)
            // Another number than the flow's: Prove says no, and that answer is the binding.
            let mismatch = try await bind(relay, none.sessionId, body: #"{"phoneNumber":"2001004018"}"#)
            #expect(mismatch.status == 200)
            #expect(try !mismatch.json(Binding.self).success)
            #expect(try await bind(relay, none.sessionId).status == 409)
        }
    }

    @Test("mobile: the Instant Link (the client SDK's fallback) lands on the relay, which is the app's link")
    func mobile() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"mobile"}"#
            ).json(Created.self)
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 200)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "tapped", "result"])
            #expect(try await relay.session(created.sessionId).state == "verified")
        }
    }

    @Test("possessionType is desktop, mobile or none")
    func badPossessionType() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"tablet"}"#)
            #expect(answer.status == 422)
            #expect(answer.body.contains("possessionType"))
        }
    }
}
