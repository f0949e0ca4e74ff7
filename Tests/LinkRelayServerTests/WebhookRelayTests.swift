import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// Webhooks from a running relay, on the embedded sandbox, to a receiver on loopback.
@Suite("Webhooks: from a running relay", .timeLimit(.minutes(2)))
struct WebhookRelayTests {
    static func flags(_ url: String) -> [String: [String]] {
        ["webhook-url": [url], "webhook-secret": [WebhookFixtures.secret]]
    }

    @Test("A tap and its result reach the receiver signed, each as GET /v1/sessions/{id} shows it then, without events")
    func tappedThenVerified() async throws {
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            try await TestRelay.run(flags: Self.flags(url)) { relay in
                let created = try await relay.createSession()
                _ = try await relay.tap()
                _ = try await relay.pollUntilDone(created)
                await receiver.waitFor(2)
                let received = await receiver.received
                var types: [String] = []
                for request in received {
                    #expect(request.headers["webhook-signature"] == (try WebhookFixtures.signature(request)))
                    #expect(request.headers["webhook-id"]?.hasPrefix("msg_") == true)
                    #expect(Int(request.headers["webhook-timestamp"] ?? "") != nil)
                    #expect(request.headers["content-type"] == "application/json")
                    let body = try request.json()
                    let data = try #require(body["data"] as? [String: Any])
                    #expect(data["sessionId"] as? String == created.sessionId)
                    #expect(data["events"] == nil)
                    #expect((body["timestamp"] as? String)?.hasSuffix("Z") == true)
                    types.append(try #require(body["type"] as? String))
                    if body["type"] as? String == "session.verified" {
                        #expect(data["state"] as? String == "verified")
                        let result = try #require(data["result"] as? [String: Any])
                        #expect(result["outcome"] as? String == "verified")
                        #expect(result["phoneNumber"] as? String == "2001004014")
                    } else {
                        #expect(data["state"] as? String == "tapped")
                        #expect(data["tappedAt"] != nil)
                    }
                }
                #expect(Set(types) == ["session.tapped", "session.verified"])
                // The receiver's URL nowhere in the relay's log; its scheme and host in start-up's line that
                // says where webhooks go; nothing of the secret or the body.
                #expect(relay.logs.all.allSatisfy { !$0.contains(url) })
                let origin = try #require(
                    URL(string: url).map { "\($0.scheme ?? "")://\($0.host ?? ""):\($0.port ?? 0)" })
                let mentions = relay.logs.all.filter { $0.contains(origin) }
                #expect(mentions.count == 1 && mentions.first?.contains("Webhooks on") == true, "\(mentions)")
                let log = relay.logs.all.joined(separator: "\n")
                #expect(!log.contains(String(WebhookFixtures.secret.dropFirst(6))))
                #expect(!log.contains("2001004014"))
            }
        }
    }

    @Test("cancelled, possession_required and bound are reported too")
    func otherEvents() async throws {
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            try await TestRelay.run(flags: Self.flags(url)) { relay in
                let cancelled = try await relay.createSession()
                #expect(try await relay.api(.POST, "/v1/sessions/\(cancelled.sessionId)/cancel").status == 200)
                let none = try await relay.api(
                    .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#
                ).json(Created.self)
                _ = try await relay.pollUntilDone(none)
                #expect(try await relay.api(.POST, "/v1/sessions/\(none.sessionId)/bind").status == 200)
                await receiver.waitFor(3)
                let types = try await receiver.received.map { try #require($0.json()["type"] as? String) }
                #expect(Set(types) == ["session.cancelled", "session.possession_required", "session.bound"])
            }
        }
    }

    @Test("The messages list by state, with their attempts; a retry sends one again with the same webhook-id")
    func listAndRetry() async throws {
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            try await TestRelay.run(flags: Self.flags(url)) { relay in
                let created = try await relay.createSession()
                #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
                await receiver.waitFor(1)
                struct List: Decodable {
                    struct Message: Decodable {
                        struct Attempt: Decodable {
                            var status: Int?
                            var durationMs: Int
                        }
                        var id: String
                        var type: String
                        var sessionId: String
                        var state: String
                        var nextAttemptAt: String?
                        var attempts: [Attempt]
                    }
                    var messages: [Message]
                }
                // The attempt is stored just after the receiver answered.
                var delivered: [List.Message] = []
                while delivered.isEmpty {
                    delivered = try await relay.api(.GET, "/v1/webhooks/messages?state=delivered").json(List.self)
                        .messages
                    await Task.yield()
                }
                let message = try #require(delivered.first)
                #expect(message.type == "session.cancelled" && message.sessionId == created.sessionId)
                #expect(message.attempts.map(\.status) == [204] && message.nextAttemptAt == nil)
                #expect(
                    try await relay.api(.GET, "/v1/webhooks/messages?state=pending").json(List.self).messages.isEmpty)
                #expect(try await relay.api(.GET, "/v1/webhooks/messages?limit=1").json(List.self).messages.count == 1)

                let retried = try await relay.api(.POST, "/v1/webhooks/messages/\(message.id)/retry")
                #expect(retried.status == 202)
                #expect(try retried.json(List.Message.self).state == "pending")
                await receiver.waitFor(2)
                #expect(await receiver.received.map { $0.headers["webhook-id"] } == [message.id, message.id])

                #expect(try await relay.api(.POST, "/v1/webhooks/messages/msg_nope/retry").status == 404)
                for query in [
                    "state=sent", "limit=0", "limit=1001", "limit=ten", "after=", "after=%25%25", "after=bm9jb2xvbg",
                    "after=OmlkLXdpdGhvdXQtdGltZQ", "session=",
                ] {
                    let answer = try await relay.api(.GET, "/v1/webhooks/messages?" + query)
                    #expect(answer.status == 400, "\(query)")
                    #expect(answer.header("Content-Type") == "application/problem+json")
                }
                #expect(try await relay.request(.GET, "/v1/webhooks/messages").status == 401)
                #expect(try await relay.request(.POST, "/v1/webhooks/messages/\(message.id)/retry").status == 401)
            }
        }
    }

    @Test("The list goes page by page with its cursor to a null next, and shows one session's messages")
    func pages() async throws {
        struct Page: Decodable {
            struct Message: Decodable {
                var id: String
                var sessionId: String
            }
            var messages: [Message]
            var next: String?
        }
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            try await TestRelay.run(flags: Self.flags(url)) { relay in
                var sessions: [String] = []
                for _ in 0..<3 {
                    let created = try await relay.createSession()
                    #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
                    sessions.append(created.sessionId)
                }
                await receiver.waitFor(3)
                let all = try await relay.api(.GET, "/v1/webhooks/messages").json(Page.self)
                #expect(all.messages.count == 3 && all.next == nil)
                #expect(all.messages.map(\.sessionId) == sessions.reversed(), "newest first")

                var paged: [String] = []
                var query = "limit=2"
                while true {
                    let answer = try await relay.api(.GET, "/v1/webhooks/messages?" + query)
                    #expect(answer.status == 200)
                    #expect(answer.body.contains(#""next":"#), "next is there, null on the last page")
                    let page = try answer.json(Page.self)
                    paged += page.messages.map(\.id)
                    guard let next = page.next else { break }
                    #expect(page.messages.count == 2)
                    query = "limit=2&after=" + next
                }
                #expect(paged == all.messages.map(\.id))

                let one = try await relay.api(.GET, "/v1/webhooks/messages?session=\(sessions[1])").json(Page.self)
                #expect(one.messages.map(\.sessionId) == [sessions[1]] && one.next == nil)
                let failed = try await relay.api(
                    .GET, "/v1/webhooks/messages?state=failed&session=\(sessions[1])"
                ).json(Page.self)
                #expect(failed.messages.isEmpty && failed.next == nil, "both filters hold")
                let unknown = try await relay.api(
                    .GET, "/v1/webhooks/messages?session=ses_\(Secrets.token(length: 22))"
                ).json(Page.self)
                #expect(unknown.messages.isEmpty && unknown.next == nil)
            }
        }
    }

    @Test("Without --webhook-url the routes answer 404, and no message is kept")
    func notConfigured() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
            let list = try await relay.api(.GET, "/v1/webhooks/messages")
            #expect(list.status == 404)
            #expect(list.header("Content-Type") == "application/problem+json")
            #expect(try await relay.api(.POST, "/v1/webhooks/messages/msg_x/retry").status == 404)
            #expect(
                try await relay.relay.store.webhookMessages(tenant: Tenant.defaultName, state: nil, limit: 10).isEmpty)
        }
    }

    @Test("A receiver that never answers holds up no tap: every session verifies while messages queue")
    func hangingReceiverHoldsUpNothing() async throws {
        let receiver = WebhookReceiver(Array(repeating: .hang, count: 100))
        try await receiver.serve { url in
            try await TestRelay.run(flags: Self.flags(url)) { relay in
                for _ in 0..<20 {
                    let created = try await relay.createSession()
                    _ = try await relay.tap()
                    let events = try await relay.pollUntilDone(created)
                    #expect(events.last?.outcome == "verified")
                }
                // 40 messages: 16 in flight, hanging, and the rest waiting their turn. An attempt frees its
                // place only when it times out (15 s; a slow run, under a sanitizer, gets there), so the
                // requests received are at most 16 more than the attempts ended, counted after them.
                await receiver.waitFor(WebhookSender.concurrency)
                let backlog = try await relay.relay.store.webhookBacklog()
                #expect(backlog.pending == 40)
                let received = await receiver.received.count
                let metrics = OpsMetricsText(text: try await relay.request(.GET, "/metrics").body)
                let ended = ["retry", "failed", "delivered"].reduce(0.0) {
                    $0 + (metrics.value(#"linkrelay_webhook_deliveries_total{outcome="\#($1)"}"#) ?? 0)
                }
                #expect(received - Int(ended) <= WebhookSender.concurrency)
            }
        }
    }
}
