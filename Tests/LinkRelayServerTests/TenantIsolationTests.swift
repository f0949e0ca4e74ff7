import Foundation
import LinkRelayCore
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// Another tenant's key against every route that names a session or a webhook message: each answers
/// exactly as for an unknown id, and nothing of the owner's changes. On every store.
@Suite("Tenants: isolation on every route", .timeLimit(.minutes(3)))
struct TenantIsolationTests {
    /// The other integrator: tenant `acme`. The sessions belong to `default` (`TestRelay.apiKey`).
    static let acmeKey = "acme-key-0123456789abcdef"
    static let acmeSecret = "whsec_" + Data(repeating: 9, count: 32).base64EncodedString()
    static let stores = ["memory", "sqlite"] + (TestPostgres.available ? ["postgres"] : [])

    /// A relay on `kind` where both tenants have a webhook, each to its own receiver; `default`'s is
    /// `--webhook-url`, acme's comes from a `--tenants` file.
    static func run(
        _ kind: String, defaultURL: String, acmeURL: String, clock: any RelayClock = EventLoopClock(),
        _ body: (TestRelay) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-tenants-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tenants = directory.appendingPathComponent("tenants.json")
        try Data(
            #"""
            {"tenants":[{"name":"acme","apiKeys":["\#(acmeKey)"],
              "webhook":{"url":"\#(acmeURL)","secret":"\#(acmeSecret)"}}]}
            """#.utf8
        ).write(to: tenants)
        let store =
            switch kind {
            case "sqlite": "sqlite:" + directory.appendingPathComponent("relay.sqlite").path
            case "postgres": try await TestPostgres.createDatabase()
            default: "memory"
            }
        try await TestRelay.run(
            store: store, clock: clock,
            flags: [
                "tenants": [tenants.path], "webhook-url": [defaultURL], "webhook-secret": [WebhookFixtures.secret],
            ], body)
    }

    struct Messages: Decodable {
        struct Message: Decodable {
            var id: String
            var sessionId: String
            var state: String
        }
        var messages: [Message]
    }

    @Test("Another tenant's id is 404 exactly as an unknown one on every route, and changes nothing", arguments: stores)
    func everyRoute(_ kind: String) async throws {
        let defaultReceiver = WebhookReceiver()
        let acmeReceiver = WebhookReceiver()
        try await defaultReceiver.serve { defaultURL in
            try await acmeReceiver.serve { acmeURL in
                try await Self.run(kind, defaultURL: defaultURL, acmeURL: acmeURL) { relay in
                    try await Self.attack(relay, received: { await defaultReceiver.waitFor($0) })
                }
            }
        }
        #expect(await acmeReceiver.received.isEmpty, "acme made no session: its receiver heard nothing")
    }

    /// A page of `GET /v1/webhooks/messages`: its ids and the next page's cursor.
    struct Page: Decodable {
        struct Message: Decodable { var id: String }
        var messages: [Message]
        var next: String?
    }

    static func attack(_ relay: TestRelay, received: (Int) async -> Void) async throws {
        // The owner's sessions: one waiting, one possession_required (bind allowed), one Pre-Fill verified
        // (challenge allowed).
        let waiting = try await relay.createSession()
        let none = try await relay.api(
            .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#
        ).json(Created.self)
        #expect(try await relay.pollUntilDone(none).last?.outcome == "possession_required")
        let prefill = try await PrefillSessionTests.create(relay)
        _ = try await relay.tap(phone: PrefillSessionTests.marcia)
        #expect(try await relay.pollUntilDone(prefill).last?.outcome == "verified")
        await received(3)  // possession_required, tapped, verified: delivered to default's receiver
        // Their outcomes are stored a moment after the receiver answered. Bounded, without sleeping.
        var ownerMessages: [Messages.Message] = []
        for _ in 0..<500 {
            ownerMessages = try await relay.api(.GET, "/v1/webhooks/messages").json(Messages.self).messages
            if ownerMessages.count == 3, ownerMessages.allSatisfy({ $0.state == "delivered" }) { break }
            await Task.yield()
        }
        #expect(ownerMessages.map(\.state) == ["delivered", "delivered", "delivered"])
        let message = try #require(ownerMessages.first)

        let ids = [waiting.sessionId, none.sessionId, prefill.sessionId]
        var before: [String] = []
        for id in ids { before.append(try await relay.api(.GET, "/v1/sessions/\(id)").body) }

        // Each route, with acme's key on the owner's id and on an unknown one.
        let unknownSession = "ses_" + Secrets.token(length: 22)
        let unknownMessage = WebhookMessage.newID(at: Date())
        let routes: [(HTTPMethod, String, String?, String)] = [
            (.GET, "/v1/sessions/{id}", nil, waiting.sessionId),
            (.POST, "/v1/sessions/{id}/cancel", nil, waiting.sessionId),
            (.POST, "/v1/sessions/{id}/finish", nil, waiting.sessionId),
            (.POST, "/v1/sessions/{id}/bind", nil, none.sessionId),
            (.POST, "/v1/sessions/{id}/bind", #"{"phoneNumber":"2001004018"}"#, none.sessionId),
            (.POST, "/v1/sessions/{id}/challenge", nil, prefill.sessionId),
            (.POST, "/v1/sessions/{id}/challenge", #"{"ssn":"470806227"}"#, prefill.sessionId),
            (
                .POST, "/v1/sessions/{id}/complete", #"{"individual":{"firstName":"Eve","lastName":"Longo"}}"#,
                prefill.sessionId
            ),
            (.POST, "/v1/webhooks/messages/{id}/retry", nil, message.id),
        ]
        for (method, path, body, id) in routes {
            func ask(_ id: String) async throws -> HTTPAnswer {
                var headers = [("Authorization", "Bearer \(acmeKey)")]
                if body != nil { headers.append(("Content-Type", "application/json")) }
                return try await relay.request(
                    method, path.replacingOccurrences(of: "{id}", with: id), headers: headers, body: body)
            }
            let unknown = try await ask(path.hasPrefix("/v1/webhooks") ? unknownMessage : unknownSession)
            let other = try await ask(id)
            #expect(unknown.status == 404, "\(method) \(path): \(unknown.body)")
            #expect(other.status == unknown.status, "\(method) \(path)")
            #expect(other.body == unknown.body, "\(method) \(path)")
            #expect(other.header("Content-Type") == unknown.header("Content-Type"))
        }
        // The list shows acme none of the owner's messages.
        let listed = try await relay.request(
            .GET, "/v1/webhooks/messages", headers: [("Authorization", "Bearer \(acmeKey)")])
        #expect(listed.status == 200)
        #expect(try listed.json(Messages.self).messages.isEmpty)
        // Nor by the owner's session, nor after a cursor from the owner's own pages.
        let cursor = try #require(
            try await relay.api(.GET, "/v1/webhooks/messages?limit=1").json(Page.self).next)
        for query in ["session=\(none.sessionId)", "after=\(cursor)", "session=\(prefill.sessionId)&after=\(cursor)"] {
            let page = try await relay.request(
                .GET, "/v1/webhooks/messages?" + query, headers: [("Authorization", "Bearer \(acmeKey)")])
            #expect(page.status == 200, "\(query)")
            #expect(try page.json(Page.self).messages.isEmpty && page.json(Page.self).next == nil, "\(query)")
        }

        // Nothing changed: the sessions read as before, the messages are as they were, and the owner's
        // own bind and challenge go through.
        for (id, body) in zip(ids, before) { #expect(try await relay.api(.GET, "/v1/sessions/\(id)").body == body) }
        let after = try await relay.api(.GET, "/v1/webhooks/messages").json(Messages.self).messages
        #expect(after.map(\.id) == ownerMessages.map(\.id) && after.map(\.state) == ownerMessages.map(\.state))
        let bound = try await relay.api(.POST, "/v1/sessions/\(none.sessionId)/bind")
        #expect(bound.status == 200, "\(bound.body)")
        #expect(try await relay.api(.POST, "/v1/sessions/\(prefill.sessionId)/challenge").status == 200)
        #expect(try await relay.api(.POST, "/v1/sessions/\(waiting.sessionId)/cancel").status == 200)
    }

    @Test("Each tenant's sessions report to its own receiver, signed with its own secret")
    func ownReceivers() async throws {
        let defaultReceiver = WebhookReceiver()
        let acmeReceiver = WebhookReceiver()
        try await defaultReceiver.serve { defaultURL in
            try await acmeReceiver.serve { acmeURL in
                try await Self.run("sqlite", defaultURL: defaultURL, acmeURL: acmeURL) { relay in
                    let mine = try await relay.createSession()
                    #expect(try await relay.api(.POST, "/v1/sessions/\(mine.sessionId)/cancel").status == 200)
                    let theirs = try await relay.request(
                        .POST, "/v1/sessions",
                        headers: [("Authorization", "Bearer \(Self.acmeKey)"), ("Content-Type", "application/json")],
                        body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#
                    ).json(Created.self)
                    _ = try await relay.pollUntilDone(theirs)
                    await defaultReceiver.waitFor(1)
                    await acmeReceiver.waitFor(1)
                    let toDefault = await defaultReceiver.received
                    let toAcme = await acmeReceiver.received
                    #expect(try toDefault.map { try $0.json()["type"] as? String } == ["session.cancelled"])
                    #expect(try toAcme.map { try $0.json()["type"] as? String } == ["session.possession_required"])
                    #expect(toDefault.allSatisfy { $0.body.contains(mine.sessionId) })
                    #expect(toAcme.allSatisfy { $0.body.contains(theirs.sessionId) })
                    for request in toDefault {
                        #expect(request.headers["webhook-signature"] == (try WebhookFixtures.signature(request)))
                    }
                    for request in toAcme {
                        #expect(
                            request.headers["webhook-signature"]
                                == (try WebhookFixtures.signature(request, secret: Self.acmeSecret)))
                    }
                    // Each lists its own.
                    let listed = try await relay.request(
                        .GET, "/v1/webhooks/messages", headers: [("Authorization", "Bearer \(Self.acmeKey)")]
                    ).json(Messages.self).messages
                    #expect(listed.map(\.sessionId) == [theirs.sessionId])
                    // And the outcome counters say whose sessions they were.
                    let metrics = try await relay.request(.GET, "/metrics").body
                    #expect(metrics.contains(#"linkrelay_sessions_created_total{tenant="acme"} 1"#))
                    #expect(metrics.contains(#"linkrelay_outcomes_total{outcome="cancelled",tenant="default"} 1"#))
                    #expect(
                        metrics.contains(#"linkrelay_outcomes_total{outcome="possession_required",tenant="acme"} 1"#))
                }
            }
        }
    }

    @Test("A tenant's origins gate its sessions' channels and finish hook; /ops takes default's keys only")
    func origins() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-origins-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tenants = directory.appendingPathComponent("tenants.json")
        try Data(
            #"{"tenants":[{"name":"acme","apiKeys":["\#(Self.acmeKey)"],"allowedOrigins":["https://acme.example"]}]}"#
                .utf8
        ).write(to: tenants)
        try await TestRelay.run(
            flags: ["tenants": [tenants.path], "allowed-origin": ["https://shop.example"]]
        ) { relay in
            let mine = try await relay.createSession()
            let theirs = try await relay.request(
                .POST, "/v1/sessions",
                headers: [("Authorization", "Bearer \(Self.acmeKey)"), ("Content-Type", "application/json")],
                body: #"{"phoneNumber":"2001004014"}"#
            ).json(Created.self)
            func poll(_ created: Created, origin: String) async throws -> HTTPAnswer {
                try await relay.request(
                    .GET, created.channel.poll + "?timeout=0&token=\(created.channel.token)",
                    headers: [("Origin", origin)])
            }
            func finish(_ created: Created, origin: String) async throws -> HTTPAnswer {
                try await relay.request(
                    .POST, "/v1/sessions/\(created.sessionId)/finish",
                    headers: [("Origin", origin), ("Authorization", "Bearer \(created.channel.token)")])
            }
            #expect(try await poll(theirs, origin: "https://acme.example").status == 200)
            #expect(
                try await poll(theirs, origin: "https://acme.example").header("Access-Control-Allow-Origin")
                    == "https://acme.example")
            #expect(
                try await poll(theirs, origin: "https://shop.example").status == 403, "default's origin, acme's session"
            )
            #expect(try await poll(mine, origin: "https://shop.example").status == 200)
            #expect(
                try await poll(mine, origin: "https://acme.example").status == 403, "acme's origin, default's session")
            #expect(try await poll(mine, origin: "https://evil.example").status == 403)
            #expect(try await finish(mine, origin: "https://acme.example").status == 403)
            #expect(try await finish(theirs, origin: "https://shop.example").status == 403)
            #expect(try await finish(theirs, origin: "https://acme.example").status == 202)
            let basic = { (key: String) in "Basic " + Data("ops:\(key)".utf8).base64EncodedString() }
            #expect(
                try await relay.request(.GET, "/ops", headers: [("Authorization", basic(TestRelay.apiKey))]).status
                    == 200)
            #expect(
                try await relay.request(.GET, "/ops", headers: [("Authorization", basic(Self.acmeKey))]).status == 401)
        }
    }
}
