import Foundation
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// A parameter or a key given twice is refused (400, naming it) wherever the relay reads one: a reader
/// that takes the first and another that takes the last (a proxy, a log, a WAF, the relay) would act on
/// different values. API.md v1.2 "Results say what they mean".
@Suite("Duplicate parameters and keys", .timeLimit(.minutes(1)))
struct DuplicateInputTests {
    private struct Problem: Decodable {
        var status: Int
        var detail: String
    }

    private static func expectBadRequest(
        _ answer: HTTPAnswer, naming name: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(answer.status == 400, "answered \(answer.status): \(answer.body)", sourceLocation: sourceLocation)
        #expect(answer.header("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
        let problem = try answer.json(Problem.self)
        #expect(problem.detail.contains(name), "\(problem.detail)", sourceLocation: sourceLocation)
        #expect(!answer.body.contains("\"seq\""), "no event", sourceLocation: sourceLocation)
    }

    private static func answer(_ relay: LinkRelay, _ request: RelayRequest) async throws -> HTTPAnswer {
        let answer = try #require(await relay.respond(to: request))
        return HTTPAnswer(
            status: Int(answer.status.code), headers: answer.headers.map { ($0.name, $0.value) },
            body: String(buffer: answer.body))
    }

    private static let apiKey: HTTPHeaders = ["Authorization": "Bearer \(TestRelay.apiKey)"]
    /// The API key, and a JSON body's type.
    private static let apiJSON: HTTPHeaders = [
        "Authorization": "Bearer \(TestRelay.apiKey)", "Content-Type": "application/json",
    ]

    /// Queries with `token`, `after` or `timeout` twice, each as its route reads it; `%6B` is `k`. The
    /// WebSocket's are `ChannelAuthTests.duplicateParameters`, on a socket.
    static let channelQueries: [(route: String, query: String, name: String)] = [
        ("poll", "token=T&token=T&timeout=0", "token"),
        ("poll", "token=T&to%6Ben=T&timeout=0", "token"),
        ("poll", "token=T&after=0&after=1&timeout=0", "after"),
        ("poll", "token=T&timeout=0&timeout=55", "timeout"),
        ("events", "token=T&token=wrong", "token"),
        ("events", "token=T&after=1&after=0", "after"),
    ]

    @Test("A channel whose token, after or timeout is given twice is 400 and does not open", arguments: channelQueries)
    func channelParameters(_ channel: (route: String, query: String, name: String)) async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let query = channel.query.replacingOccurrences(of: "=T", with: "=" + created.channel.token)
            let path = "/v1/sessions/\(created.sessionId)/\(channel.route)?\(query)"
            try Self.expectBadRequest(try await relay.request(.GET, path), naming: channel.name)
            // The same channel with the parameter once opens.
            let once = try await relay.request(
                .GET, created.channel.poll + "?to%6Ben=\(created.channel.token)&timeout=0")
            #expect(once.status == 200)
            #expect(try once.json(PollAnswer.self).events.map(\.type) == ["waiting"])
        }
    }

    @Test("A long-poll's timeout twice on SSE is not read there, so it is no refusal")
    func unreadParameter() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
            let answer = try await relay.request(
                .GET, created.channel.events + "?token=\(created.channel.token)&timeout=1&timeout=2")
            #expect(answer.status == 200 && answer.body.contains("cancelled"))
        }
    }

    @Test("The finish hook with its token twice is 400 and asks Prove nothing")
    func finishToken() async throws {
        let relay = try await TestRelay.unstarted()
        let created = try await Self.answer(
            relay,
            RelayRequest(.POST, "/v1/sessions", headers: Self.apiJSON, body: #"{"phoneNumber":"2001004014"}"#))
        let session = try created.json(Created.self)
        let token = session.channel.token
        for query in ["token=\(token)&token=\(token)", "token=\(token)&to%6Ben=other"] {
            let answer = try await Self.answer(
                relay, RelayRequest(.POST, "/v1/sessions/\(session.sessionId)/finish?\(query)"))
            try Self.expectBadRequest(answer, naming: "token")
        }
        let stored = try #require(try await relay.store.session(id: session.sessionId))
        #expect(stored.state == .waiting && stored.lastSeq == 1 && !stored.verificationPending, "nothing changed")
        let once = try await Self.answer(
            relay, RelayRequest(.POST, "/v1/sessions/\(session.sessionId)/finish?token=\(token)"))
        #expect(once.status == 202)
    }

    @Test(
        "The webhook list with state or limit twice is 400",
        arguments: ["state=pending&state=failed", "state=pending&st%61te=pending", "limit=1&limit=1000"])
    func webhookList(query: String) async throws {
        // Started, so that its webhook sender's HTTP client is shut down with it.
        let flags = ["webhook-url": ["http://127.0.0.1:9/hook"], "webhook-secret": [WebhookFixtures.secret]]
        try await TestRelay.run(flags: flags) { relay in
            let answer = try await relay.api(.GET, "/v1/webhooks/messages?\(query)")
            try Self.expectBadRequest(answer, naming: query.hasPrefix("state") ? "state" : "limit")
            #expect(try await relay.api(.GET, "/v1/webhooks/messages?state=pending&limit=5").status == 200)
        }
    }

    /// JSON bodies of the API with a key twice, and the key.
    static let bodies: [(path: String, body: String, key: String)] = [
        ("/v1/sessions", #"{"phoneNumber":"2001004014","phoneNumber":"2001004018"}"#, "phoneNumber"),
        ("/v1/sessions", #"{"phoneNumber":"2001004014","\u0070honeNumber":"2001004014"}"#, "phoneNumber"),
        ("/v1/sessions/{id}/bind", #"{"phoneNumber":"2001004014","phoneNumber":"2001004018"}"#, "phoneNumber"),
        ("/v1/sessions/{id}/finish", #"{"redirectUrl":"https://a.example/l/x","redirectUrl":"x"}"#, "redirectUrl"),
        ("/v1/sessions/{id}/challenge", #"{"dob":"1982-07-19","d\u006Fb":"1990-01-01"}"#, "dob"),
        ("/v1/sessions/{id}/complete", #"{"individual":{"firstName":"A","lastName":"B","lastName":"C"}}"#, "lastName"),
    ]

    @Test("A JSON body with a key twice is 400 naming the key, and changes nothing", arguments: bodies)
    func jsonBodies(_ request: (path: String, body: String, key: String)) async throws {
        let relay = try await TestRelay.unstarted()
        let created = try await Self.answer(
            relay,
            RelayRequest(
                .POST, "/v1/sessions", headers: Self.apiJSON,
                body: #"{"phoneNumber":"2001001693","flow":"prefill"}"#))
        let session = try created.json(Created.self)
        var headers = Self.apiKey
        headers.add(name: "Content-Type", value: "application/json")
        let answer = try await Self.answer(
            relay,
            RelayRequest(
                .POST, request.path.replacingOccurrences(of: "{id}", with: session.sessionId), headers: headers,
                body: request.body))
        try Self.expectBadRequest(answer, naming: "\"\(request.key)\"")
        let stored = try #require(try await relay.store.session(id: session.sessionId))
        #expect(stored.state == .waiting && stored.lastSeq == 1 && stored.prefill?.individual == nil)
        #expect(await relay.sandbox?.outbox(phoneNumber: "2001004014").isEmpty == true, "no session started")
    }
}
