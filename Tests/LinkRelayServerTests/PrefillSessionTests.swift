import Foundation
import LinkRelayCore
import Logging
import ProveSandbox
import Testing

@testable import LinkRelayServer

/// Pre-Fill through the relay on a live server, against the embedded sandbox: the desktop waits as for
/// Unify, the tap's `/v3/validate` decides the result, and the backend takes the challenge and complete
/// steps that Prove's `next` offers. Identity data reaches the backend only.
@Suite("Pre-Fill sessions", .timeLimit(.minutes(2)))
struct PrefillSessionTests {
    static let marcia = "2001001693"
    /// What must never reach a channel or a log line: Marcia Longo's sandbox identity.
    static let identity = ["Marcia", "Longo", "470806227", "1982-07-19", "Mallard", "New Orleans", marcia]

    /// The Pre-Fill parts of `GET /v1/sessions/{id}` and of the steps' answers.
    struct Individual: Codable, Equatable {
        struct Address: Codable, Equatable {
            var address: String?
            var city: String?
            var region: String?
            var postalCode: String?
        }
        var firstName: String?
        var lastName: String?
        var dob: String?
        var ssn: String?
        var addresses: [Address]?
    }

    struct Step: Decodable {
        var success: Bool
        var individual: Individual?
        var next: [String: String]
    }

    struct Prefill: Decodable {
        struct Progress: Decodable {
            var next: [String: String]
            var challengeMissing: Bool?
            var individual: Individual?
            var completed: Bool?
        }
        var flow: String
        var state: String
        var prefill: Progress?
    }

    static func create(_ relay: TestRelay, _ fields: String = #","ssn":"6227""#, phone: String = marcia)
        async throws -> Created
    {
        try await relay.createSession(phone: phone, extra: #","flow":"prefill""# + fields)
    }

    static func prefill(_ relay: TestRelay, _ id: String) async throws -> Prefill {
        try await relay.api(.GET, "/v1/sessions/\(id)").json(Prefill.self)
    }

    static func step(_ relay: TestRelay, _ id: String, _ name: String, _ body: String? = nil) async throws
        -> HTTPAnswer
    {
        try await relay.api(.POST, "/v1/sessions/\(id)/\(name)", body: body)
    }

    /// The channel's events from the first to the result, on `transport`, with the tap in between; also
    /// the raw text each carried.
    static func waitAndTap(_ relay: TestRelay, _ created: Created, transport: String) async throws
        -> (types: [String], raw: [String])
    {
        switch transport {
        case "websocket":
            var events = ChannelClient.webSocket(created.channel.websocket + "?token=\(created.channel.token)")
                .makeAsyncIterator()
            var received = [try #require(try await events.next())]
            _ = try await relay.tap(phone: marcia)
            while let event = try await events.next() { received.append(event) }
            return (received.map(\.type), received.map { "\($0)" })
        case "sse":
            var messages = ChannelClient.serverSentEvents(
                relay.http, url: created.channel.events, headers: [("Authorization", "Bearer \(created.channel.token)")]
            ).makeAsyncIterator()
            var received = [try #require(try await messages.next())]
            _ = try await relay.tap(phone: marcia)
            while let message = try await messages.next() { received.append(message) }
            return (received.map { $0.event ?? "" }, received.map(\.data))
        default:
            let first = try await relay.poll(created)
            async let rest = relay.pollUntilDone(created, after: 1)
            _ = try await relay.tap(phone: marcia)
            let events = first.events + (try await rest)
            return (events.map(\.type), events.map { "\($0)" })
        }
    }

    static let cases: [(String, String)] = UnifyPathsTests.stores.flatMap { store in
        ["websocket", "sse", "longpoll"].map { (store, $0) }
    }

    @Test("The whole flow on each store and transport: wait, tap, verified, challenge, complete", arguments: cases)
    func wholeFlow(store: String, transport: String) async throws {
        try await UnifyPathsTests.run(store, socket: true) { relay, _ in
            let created = try await Self.create(relay)
            #expect(try await Self.prefill(relay, created.sessionId).flow == "prefill")
            let (types, raw) = try await Self.waitAndTap(relay, created, transport: transport)
            #expect(types == ["waiting", "tapped", "result"])
            #expect(raw.last?.contains("verified") == true)
            for text in raw {
                for secret in Self.identity { #expect(!text.contains(secret), "a channel event carries identity data") }
            }

            let verified = try await Self.prefill(relay, created.sessionId)
            #expect(verified.state == "verified")
            #expect(verified.prefill?.next == ["v3-challenge": "/v3/challenge"])
            #expect(verified.prefill?.challengeMissing == nil, "the create gave the SSN's last 4")

            let challenge = try await Self.step(relay, created.sessionId, "challenge")
            #expect(challenge.status == 200, "\(challenge.body)")
            let found = try challenge.json(Step.self)
            #expect(found.success && found.next == ["v3-complete": "/v3/complete"])
            let person = try #require(found.individual)
            #expect(person.firstName == "Marcia" && person.lastName == "Longo" && person.dob == "1982-07-19")
            #expect(person.addresses?.first?.city == "New Orleans")

            let confirmed = String(decoding: try JSONEncoder().encode(["individual": person]), as: UTF8.self)
            let complete = try await Self.step(relay, created.sessionId, "complete", confirmed)
            #expect(complete.status == 200, "\(complete.body)")
            let done = try complete.json(Step.self)
            #expect(done.success && done.next == ["done": "done"])

            let ended = try #require(try await Self.prefill(relay, created.sessionId).prefill)
            #expect(ended.individual == person)
            #expect(ended.completed == true && ended.next == ["done": "done"])
            #expect(try await Self.step(relay, created.sessionId, "complete", confirmed).status == 409)

            let metrics = try await relay.request(.GET, "/metrics").body
            for step in ["start", "validate", "challenge", "complete"] {
                #expect(metrics.contains(#"linkrelay_prefill_steps_total{step="\#(step)",outcome="success"} 1"#))
            }
        }
    }

    @Test("Steps follow Prove's next: out of order and repeated are 409 naming what is allowed; Unify's are 404")
    func stepsFollowNext() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await Self.create(relay)
            let early = try await Self.step(relay, created.sessionId, "challenge")
            #expect(early.status == 409)
            #expect(early.body.contains("allowed now: none"))
            _ = try await relay.tap(phone: Self.marcia)
            _ = try await relay.pollUntilDone(created)

            let outOfOrder = try await Self.step(
                relay, created.sessionId, "complete", #"{"individual":{"firstName":"Marcia","lastName":"Longo"}}"#)
            #expect(outOfOrder.status == 409)
            #expect(outOfOrder.body.contains("allowed now: challenge"))
            #expect(try await Self.step(relay, created.sessionId, "challenge").status == 200)
            let repeated = try await Self.step(relay, created.sessionId, "challenge")
            #expect(repeated.status == 409)
            #expect(repeated.body.contains("allowed now: complete"))

            // A Unify session exists: its flow has no such step (409 step_not_offered, naming the flow).
            let unify = try await relay.createSession()
            let challenge = try await Self.step(relay, unify.sessionId, "challenge")
            #expect(challenge.status == 409)
            #expect(try challenge.problem().code == "step_not_offered")
            #expect(
                try challenge.problem().detail
                    == "This session is a unify flow; challenge is a Pre-Fill step.")
            let complete = try await Self.step(
                relay, unify.sessionId, "complete", #"{"individual":{"firstName":"A","lastName":"B"}}"#)
            #expect(complete.status == 409)
            #expect(
                try complete.problem().detail == "This session is a unify flow; complete is a Pre-Fill step.")
            // And the other way round: a bind is a Unify step.
            let bind = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/bind")
            #expect(bind.status == 409)
            #expect(try bind.problem().code == "step_not_offered")
            #expect(try bind.problem().detail == "This session is a prefill flow; bind is a Unify step.")
            let unknown = try await Self.step(relay, "ses_unknown", "challenge")
            #expect(unknown.status == 404)
            #expect(try unknown.problem().code == "session_not_found")
            #expect(try await relay.request(.POST, "/v1/sessions/\(created.sessionId)/challenge").status == 401)
        }
    }

    @Test("A declined tap fails the result, and no step follows; a wrong challenge ends the flow")
    func failures() async throws {
        try await TestRelay.run(socket: true) { relay in
            let declined = try await Self.create(relay)
            _ = try await relay.tap(phone: Self.marcia, decline: true)
            #expect(try await relay.pollUntilDone(declined).last?.outcome == "failed")
            let after = try await Self.step(relay, declined.sessionId, "challenge")
            #expect(after.status == 409 && after.body.contains("allowed now: none"))

            // No challenge at create: validate says so, and an empty challenge is refused before Prove.
            let bare = try await Self.create(relay, "")
            _ = try await relay.tap(phone: Self.marcia)
            _ = try await relay.pollUntilDone(bare)
            #expect(try await Self.prefill(relay, bare.sessionId).prefill?.challengeMissing == true)
            let empty = try await Self.step(relay, bare.sessionId, "challenge")
            #expect(empty.status == 422)
            let wrong = try await Self.step(relay, bare.sessionId, "challenge", #"{"ssn":"0000"}"#)
            #expect(wrong.status == 200)
            #expect(try wrong.json(Step.self).next == ["done": "done"])
            #expect(try await Self.step(relay, bare.sessionId, "challenge", #"{"ssn":"6227"}"#).status == 409)
        }
    }

    @Test("Malformed bodies are refused before Prove, and the session is unchanged")
    func malformedBodies() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await Self.create(relay)
            _ = try await relay.tap(phone: Self.marcia)
            _ = try await relay.pollUntilDone(created)
            for (body, status) in [
                (#"{"dob":"1982-13-01"}"#, 422), (#"{"ssn":"12345"}"#, 422), (#"{"name":"x"}"#, 400), ("[", 400),
            ] {
                #expect(try await Self.step(relay, created.sessionId, "challenge", body).status == status, "\(body)")
            }
            #expect(try await Self.prefill(relay, created.sessionId).prefill?.next == ["v3-challenge": "/v3/challenge"])
            let create = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001001693","flow":"prefill","dob":"82-07-19"}"#)
            #expect(create.status == 422 && create.body.contains("YYYY-MM-DD"))
        }
    }

    @Test("With Prove Identity's credentials validate offers complete at once: the customer's own details complete it")
    func identityCompletesWithoutAChallenge() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://sandbox.test")
        let server = SandboxServer(
            sandbox: sandbox, host: "127.0.0.1", port: 0,
            logger: Logger(label: "sandbox", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await server.serving { port in
            let identity = ProveSandbox.Project.identity
            try await TestRelay.run(
                flags: ["prove": ["http://127.0.0.1:\(port)/sandbox/prove"]],
                environment: ["PROVE_CLIENT_ID": identity.clientID, "PROVE_CLIENT_SECRET": identity.clientSecret]
            ) { relay in
                // Milo, the short-term user: possession passes without a tap; the finish hook asks validate.
                let created = try await Self.create(relay, "", phone: "2001001695")
                #expect(
                    [200, 202].contains(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/finish").status))
                _ = try await relay.pollUntilDone(created)
                let validated = try await Self.prefill(relay, created.sessionId)
                #expect(validated.state == "verified")
                #expect(validated.prefill?.next == ["v3-complete": "/v3/complete"])
                #expect(try await Self.step(relay, created.sessionId, "challenge").status == 409)
                let person = #"{"individual":{"firstName":"Milo","lastName":"Pinson","dob":"1981-01-17"}}"#
                #expect(try await Self.step(relay, created.sessionId, "complete", person).status == 200)
                #expect(try await Self.prefill(relay, created.sessionId).prefill?.completed == true)
            }
        }
    }

    @Test("Prove's refusal of a step is 502 with its code, its outage 503; the step is still offered after")
    func proveFaults() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await Self.create(relay)
            _ = try await relay.tap(phone: Self.marcia)
            _ = try await relay.pollUntilDone(created)
            #expect(try await relay.request(.PUT, "/sandbox/faults/challenge", body: "status=400").status == 204)
            let refused = try await Self.step(relay, created.sessionId, "challenge")
            #expect(refused.status == 502 && refused.body.contains("Prove answered 400"))
            #expect(try await relay.request(.PUT, "/sandbox/faults/challenge", body: "status=500").status == 204)
            #expect(try await Self.step(relay, created.sessionId, "challenge").status == 503)
            #expect(try await relay.request(.DELETE, "/sandbox/faults/challenge").status == 204)
            #expect(try await Self.prefill(relay, created.sessionId).prefill?.next == ["v3-challenge": "/v3/challenge"])
            #expect(try await Self.step(relay, created.sessionId, "challenge").status == 200)

            // complete: the same; the confirmed person can be sent again once Prove answers.
            let person = #"{"individual":{"firstName":"Marcia","lastName":"Longo"}}"#
            #expect(try await relay.request(.PUT, "/sandbox/faults/complete", body: "status=400").status == 204)
            #expect(try await Self.step(relay, created.sessionId, "complete", person).status == 502)
            #expect(try await relay.request(.DELETE, "/sandbox/faults/complete").status == 204)
            #expect(try await Self.step(relay, created.sessionId, "complete", person).status == 200)
        }
    }

    @Test("Prove's refusal of the start leaves no session; of the validate, the result failed with why")
    func startAndValidateFaults() async throws {
        try await TestRelay.run(socket: true) { relay in
            #expect(try await relay.request(.PUT, "/sandbox/faults/start", body: "status=400").status == 204)
            let refused = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001001693","flow":"prefill"}"#)
            #expect(refused.status == 502)
            #expect(try await relay.request(.DELETE, "/sandbox/faults/start").status == 204)
            let outbox = try await relay.request(.GET, "/sandbox/outbox?phoneNumber=\(Self.marcia)").body
            #expect(!outbox.contains("\"link\""), "no SMS went")

            let created = try await Self.create(relay)
            #expect(try await relay.request(.PUT, "/sandbox/faults/validate", body: "status=400").status == 204)
            _ = try await relay.tap(phone: Self.marcia)
            #expect(try await relay.pollUntilDone(created).last?.outcome == "failed")
            let failed = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)").body
            #expect(failed.contains("Prove rejected validate with 400"))
            #expect(try await Self.step(relay, created.sessionId, "challenge").status == 409)
        }
    }
}
