import AsyncHTTPClient
import Crypto
import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import LinkRelayServer

/// An outbox that says when an attempt has been stored: the tests' way to await the sender.
final class ObservedOutbox: WebhookOutbox {
    let store: any RelayStore
    let recorded: AsyncStream<WebhookMessage>
    private let continuation: AsyncStream<WebhookMessage>.Continuation

    init(_ store: any RelayStore) {
        self.store = store
        (recorded, continuation) = AsyncStream.makeStream()
    }

    func claimWebhooks(tenant: String, dueBy now: Date, leaseUntil: Date, limit: Int) async throws
        -> [WebhookMessage]
    {
        try await store.claimWebhooks(tenant: tenant, dueBy: now, leaseUntil: leaseUntil, limit: limit)
    }
    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
        try await store.recordWebhookAttempts(messages)
        for message in messages { continuation.yield(message) }
    }
    func webhookMessages(tenant: String, _ listing: WebhookListing) async throws -> [WebhookMessage] {
        try await store.webhookMessages(tenant: tenant, listing)
    }
    func makeRetriesDue(tenant: String, now: Date) async throws -> Int {
        try await store.makeRetriesDue(tenant: tenant, now: now)
    }
    func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage? {
        try await store.retryWebhook(id: id, tenant: tenant, now: now)
    }
    func webhookBacklog() async throws -> WebhookBacklog { try await store.webhookBacklog() }
    func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int {
        try await store.pruneWebhooks(deliveredBefore: deliveredBefore, failedBefore: failedBefore, limit: limit)
    }
}

enum WebhookFixtures {
    static let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()

    /// A stored session whose change put one message (`session.verified`) in the outbox.
    @discardableResult
    static func enqueue(_ store: any RelayStore, at now: Date) async throws -> WebhookMessage {
        let session = Session(
            id: Secrets.sessionID(), linkKey: Secrets.token(length: 22), channelToken: "t", createdAt: now,
            expiresAt: now.addingTimeInterval(180), correlationId: "c", authToken: nil, clientRequestId: "r",
            phoneNumber: "2001004014", finalTargetUrl: "https://relay.example/l/x", idempotencyKey: nil,
            requestFingerprint: "f", desktopIPAddress: nil)
        var changed = session
        let first = changed.record(.waiting(expiresAt: session.expiresAt), at: now)
        try await store.insert(changed, event: first)
        let version = changed.version
        let event = changed.record(.result(.verified), at: now)
        changed.version = version + 1
        let message = WebhookMessage(
            type: "session.verified", sessionId: session.id, createdAt: now,
            payload: Array(#"{"type":"session.verified"}"#.utf8))
        #expect(
            try await store.update(
                changed, expectedVersion: version, appending: [event], reporting: [message], committed: {}))
        return message
    }

    static func signature(_ received: WebhookReceiver.Received, secret: String = secret) throws -> String {
        let key = SymmetricKey(data: try #require(Data(base64Encoded: String(secret.dropFirst(6)))))
        let id = try #require(received.headers["webhook-id"])
        let timestamp = try #require(received.headers["webhook-timestamp"])
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(id).\(timestamp).\(received.body)".utf8), using: key)
        return "v1," + Data(mac).base64EncodedString()
    }
}

@Suite("Webhooks: settings and signatures")
struct WebhookSettingsTests {
    @Test("The signature is the one of the Standard Webhooks specification's example")
    func specificationExample() throws {
        let settings = try WebhookSettings(
            url: "https://example.com/hook", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let signature = settings.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test(
        "Start-up refuses a webhook URL that is not http(s), or a secret that is not whsec_ and base64, with one line",
        arguments: [
            (["webhook-url": ["ftp://example.com/hook"], "webhook-secret": [WebhookFixtures.secret]], "--webhook-url"),
            (["webhook-url": ["https:///hook"], "webhook-secret": [WebhookFixtures.secret]], "--webhook-url"),
            (
                ["webhook-url": ["https://example.com/hook"], "webhook-secret": ["s3cr3t-not-whsec"]],
                "--webhook-secret"
            ),
            (
                ["webhook-url": ["https://example.com/hook"], "webhook-secret": ["whsec_%%%notbase64"]],
                "--webhook-secret"
            ),
            (["webhook-url": ["https://example.com/hook"], "webhook-secret": ["whsec_c2hvcnQ="]], "--webhook-secret"),
            (["webhook-url": ["https://example.com/hook"]], "--webhook-url"),
            (["webhook-secret": [WebhookFixtures.secret]], "--webhook-secret"),
        ])
    func refusals(flags: [String: [String]], flag: String) throws {
        do {
            _ = try RelayConfiguration.resolve(flags: flags, environment: [:])
            Issue.record("accepted \(flags)")
        } catch {
            #expect(error.description.hasPrefix(flag))
            #expect(!error.description.contains("\n"))
            // The secret is never echoed.
            for secret in flags["webhook-secret"] ?? [] { #expect(!error.description.contains(secret.dropFirst(6))) }
        }
    }

    @Test("The settings come from the environment too")
    func environment() throws {
        let configuration = try RelayConfiguration.resolve(
            flags: [:],
            environment: [
                "LINKRELAY_WEBHOOK_URL": "http://127.0.0.1:9/hook", "LINKRELAY_WEBHOOK_SECRET": WebhookFixtures.secret,
            ])
        #expect(configuration.webhooks?.url.absoluteString == "http://127.0.0.1:9/hook")
    }
}

@Suite("Webhooks: the sender")
struct WebhookSenderTests {
    let clock = ManualClock()
    let store = MemorySessionStore()
    let outbox: ObservedOutbox
    let metrics = RelayMetrics()

    init() { outbox = ObservedOutbox(store) }

    /// Runs a sender to `url` for the duration of `body`.
    func sending(
        to url: String, attemptTimeout: TimeInterval = 15, _ body: (WebhookSender) async throws -> Void
    ) async throws {
        let sender = WebhookSender(
            webhooks: [(Tenant.defaultName, try WebhookSettings(url: url, secret: WebhookFixtures.secret))],
            outbox: outbox, clock: clock, metrics: metrics, logger: quietLogger(), attemptTimeout: attemptTimeout)
        let running = Task { try await sender.run() }
        defer { running.cancel() }
        try await body(sender)
    }

    func nextRecorded() async throws -> WebhookMessage {
        var iterator = outbox.recorded.makeAsyncIterator()
        return try #require(await iterator.next())
    }

    func deliveries(_ outcome: String) -> Int {
        let text = String(decoding: metrics.registry.emitToBuffer(), as: UTF8.self)
        let line = text.split(separator: "\n").first {
            $0.hasPrefix("linkrelay_webhook_deliveries_total{outcome=\"\(outcome)\"}")
        }
        return Int(line?.split(separator: " ").last ?? "") ?? -1
    }

    @Test(
        "A receiver that answers 500 gets the message again 4 to 6 s later, with the same webhook-id, and then takes it"
    )
    func retriedThenDelivered() async throws {
        let receiver = WebhookReceiver([.status(500)])
        try await receiver.serve { url in
            try await sending(to: url) { sender in
                let message = try await WebhookFixtures.enqueue(store, at: clock.now())
                sender.wake()
                let failed = try await nextRecorded()
                #expect(failed.state == .pending)
                #expect(failed.attempts.map(\.status) == [500])
                let pause = failed.nextAttemptAt.timeIntervalSince(clock.now())
                #expect((4...6).contains(pause))
                clock.advance(by: 6)
                let delivered = try await nextRecorded()
                #expect(delivered.state == .delivered)
                #expect(delivered.attempts.map(\.status) == [500, 204])
                let received = await receiver.received
                #expect(received.map { $0.headers["webhook-id"] } == [message.id, message.id])
                for request in received {
                    #expect(request.headers["webhook-signature"] == (try WebhookFixtures.signature(request)))
                    #expect(request.body == #"{"type":"session.verified"}"#)
                }
                #expect(deliveries("retry") == 1 && deliveries("delivered") == 1)
            }
        }
    }

    @Test("A redirect is not followed and a 410 is retried like any other failure")
    func redirectAndGone() async throws {
        let receiver = WebhookReceiver([.status(302, location: "/elsewhere"), .status(410)])
        try await receiver.serve { url in
            try await sending(to: url) { sender in
                try await WebhookFixtures.enqueue(store, at: clock.now())
                sender.wake()
                #expect(try await nextRecorded().attempts.last?.status == 302)
                clock.advance(by: 6)
                #expect(try await nextRecorded().attempts.last?.status == 410)
                clock.advance(by: 36)
                #expect(try await nextRecorded().state == .delivered)
                #expect(await receiver.received.count == 3)
            }
        }
    }

    @Test("A receiver that never answers is given up on at the attempt timeout, and retried")
    func hangingReceiver() async throws {
        let receiver = WebhookReceiver([.hang])
        try await receiver.serve { url in
            try await sending(to: url, attemptTimeout: 0.5) { sender in
                try await WebhookFixtures.enqueue(store, at: clock.now())
                sender.wake()
                let attempt = try await nextRecorded()
                #expect(attempt.state == .pending)
                #expect(attempt.attempts.last?.status == nil)
                #expect(attempt.attempts.last?.error == "timeout")
            }
        }
    }

    @Test("A receiver that resets every connection is retried, and counted")
    func resettingReceiver() async throws {
        // Accepts, then closes at once with a reset (SO_LINGER 0), before any answer.
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.socketOption(.so_linger), value: 0)
            .childChannelInitializer { channel in channel.close() }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let port = try #require(server.localAddress?.port)
        try await sending(to: "http://127.0.0.1:\(port)/hook") { sender in
            try await WebhookFixtures.enqueue(store, at: clock.now())
            sender.wake()
            let attempt = try await nextRecorded()
            #expect(attempt.state == .pending)
            #expect(attempt.attempts.last?.status == nil)
            #expect(attempt.attempts.last?.error?.isEmpty == false)
            #expect(deliveries("retry") == 1)
        }
    }

    @Test("A refused connection ends the attempt at once, and its duration is what the clock says, not a timeout")
    func refusedConnection() async throws {
        // A port that was just listened on, and no longer is.
        let closed = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(closed.localAddress?.port)
        try await closed.close()
        try await sending(to: "http://127.0.0.1:\(port)/hook") { sender in
            try await WebhookFixtures.enqueue(store, at: clock.now())
            sender.wake()
            let attempt = try #require(try await nextRecorded().attempts.last)
            #expect(attempt.status == nil)
            #expect(attempt.error == "connection refused")
            // The clock did not move while it ran: 0 ms, where the connect timeout (5 s) was recorded before.
            #expect(attempt.durationMs == 0)
            #expect(attempt.at == clock.now())
        }
    }

    @Test("An answer that drips or is huge is not read to its end: the 2xx counts, and the attempt ends")
    func boundedAnswers() async throws {
        let receiver = WebhookReceiver([.drip, .huge(megabytes: 64)])
        try await receiver.serve { url in
            // The default 15 s: far less than the minute the drip would take, and room for a loaded machine
            // (a ThreadSanitizer build beside the other suites) to answer the heads.
            try await sending(to: url) { sender in
                try await WebhookFixtures.enqueue(store, at: clock.now())
                try await WebhookFixtures.enqueue(store, at: clock.now())
                sender.wake()
                let first = try await nextRecorded()
                let second = try await nextRecorded()
                #expect(first.state == .delivered && second.state == .delivered)
                #expect(Set([first.attempts[0].status, second.attempts[0].status]) == [200])
            }
        }
    }

    @Test("After 24 hours of failures a message is given up, counted and listed as failed")
    func givenUp() async throws {
        let receiver = WebhookReceiver(Array(repeating: .status(503), count: 10))
        try await receiver.serve { url in
            try await sending(to: url) { sender in
                try await WebhookFixtures.enqueue(store, at: clock.now())
                sender.wake()
                var last = try await nextRecorded()
                while last.state == .pending {
                    clock.advance(by: 10 * 3600)
                    last = try await nextRecorded()
                }
                #expect(last.state == .failed)
                #expect(last.attempts.count == 4)
                #expect(deliveries("failed") == 1)
                #expect(
                    try await store.webhookMessages(tenant: Tenant.defaultName, state: .failed, limit: 10).map(\.id)
                        == [last.id])
            }
        }
    }

    @Test("A receiver that is down gets one message every 5 s, not one per message; back, it gets the backlog at once")
    func downReceiver() async throws {
        let receiver = WebhookReceiver(Array(repeating: .status(503), count: 100))
        try await receiver.serve { url in
            try await sending(to: url) { sender in
                for _ in 0..<100 { try await WebhookFixtures.enqueue(store, at: clock.now()) }
                sender.wake()
                // The first batch fails, and the breaker opens after 5 failures in a row.
                for _ in 0..<WebhookSender.concurrency { _ = try await nextRecorded() }
                #expect(sender.lanes[0].receiver.state == .open)
                // Then one message per interval: 10 intervals, 10 attempts (and those claimed before it opened).
                for _ in 1...10 {
                    clock.advance(by: WebhookSender.probeInterval)
                    _ = try await nextRecorded()
                }
                let attempts = await receiver.received.count
                #expect(attempts >= WebhookSender.concurrency + 10)
                #expect(attempts <= WebhookSender.concurrency + WebhookSender.receiverFailures - 1 + 10)
                // Back: the next probe is taken, then the whole backlog goes at once: the never-tried messages
                // and those that failed meanwhile, whose retries are not due yet (the clock stays).
                await receiver.recover()
                clock.advance(by: WebhookSender.probeInterval)
                var delivered: Set<String> = []
                while delivered.count < 100 {
                    let attempt = try await nextRecorded()
                    if attempt.state == .delivered { delivered.insert(attempt.id) }
                }
                #expect(try await store.webhookBacklog().pending == 0)
                #expect(sender.lanes[0].receiver.state == .closed)
            }
        }
    }

    @Test("Retries come later each time, within 0.8 to 1.2 times the schedule, and the last at 24 hours")
    func schedule() {
        let start = Date(timeIntervalSince1970: 0)
        #expect(WebhookSender.nextAttempt(after: 1, now: start, createdAt: start, jitter: 1) == start + 5)
        #expect(WebhookSender.nextAttempt(after: 2, now: start, createdAt: start, jitter: 1.2) == start + 36)
        #expect(WebhookSender.nextAttempt(after: 30, now: start, createdAt: start, jitter: 1) == start + 28800)
        let late = start + 23 * 3600
        #expect(WebhookSender.nextAttempt(after: 9, now: late, createdAt: start, jitter: 1) == start + 24 * 3600)
        #expect(WebhookSender.nextAttempt(after: 10, now: start + 24 * 3600, createdAt: start) == nil)
    }
}

/// The backlog after an outage, on each store: the messages that failed while the receiver was away go
/// when it is back, without waiting for their retries.
@Suite("Webhooks: the backlog after an outage, in each store", .timeLimit(.minutes(2)))
struct WebhookBacklogTests {
    let clock = ManualClock()

    /// Runs a sender on a new store of `kind`, observed, to `url`.
    func sending(
        _ kind: String, to url: String, _ body: (WebhookSender, ObservedOutbox, any RelayStore) async throws -> Void
    ) async throws {
        try await WebhookOutboxTests.withStore(kind) { store in
            let outbox = ObservedOutbox(store)
            let sender = WebhookSender(
                webhooks: [(Tenant.defaultName, try WebhookSettings(url: url, secret: WebhookFixtures.secret))],
                outbox: outbox, clock: clock, metrics: RelayMetrics(), logger: quietLogger())
            let running = Task { try await sender.run() }
            defer { running.cancel() }
            try await body(sender, outbox, store)
            running.cancel()
            _ = try? await running.value
        }
    }

    /// Each message's outcomes as they are stored, until `done` says so.
    static func outcomes(
        _ outbox: ObservedOutbox, until done: ([String: WebhookMessage]) -> Bool
    ) async throws -> [String: WebhookMessage] {
        var latest: [String: WebhookMessage] = [:]
        for await message in outbox.recorded {
            latest[message.id] = message
            if done(latest) { break }
        }
        return latest
    }

    @Test(
        "A receiver away for 4 messages: once a new one is taken, the 4 go too, before their retries are due",
        arguments: WebhookOutboxTests.stores)
    func shortOutage(kind: String) async throws {
        let receiver = WebhookReceiver(Array(repeating: .status(503), count: 4))
        try await receiver.serve { url in
            try await sending(kind, to: url) { sender, outbox, store in
                var waiting: [String] = []
                for _ in 0..<4 { waiting.append(try await WebhookFixtures.enqueue(store, at: clock.now()).id) }
                sender.wake()
                let failed = try await Self.outcomes(outbox) { $0.count == 4 }
                #expect(failed.values.allSatisfy { $0.state == .pending && $0.nextAttemptAt > clock.now() })
                #expect(sender.lanes[0].receiver.state == .closed, "4 failures: the breaker stays closed")

                await receiver.recover()
                let fresh = try await WebhookFixtures.enqueue(store, at: clock.now())
                sender.wake()
                let delivered = try await Self.outcomes(outbox) { latest in
                    latest.count == 5 && latest.values.allSatisfy { $0.state == .delivered }
                }
                #expect(Set(delivered.keys) == Set(waiting + [fresh.id]))
                #expect(await receiver.received.count == 9)
                #expect(try await store.webhookBacklog().pending == 0)
            }
        }
    }

    @Test(
        "A receiver down for 6 messages: when the probe is taken, the 6 go at once, not on their retry timers",
        arguments: WebhookOutboxTests.stores)
    func outageWithBreaker(kind: String) async throws {
        let receiver = WebhookReceiver(Array(repeating: .status(503), count: 6))
        try await receiver.serve { url in
            try await sending(kind, to: url) { sender, outbox, store in
                var waiting: [String] = []
                for _ in 0..<6 { waiting.append(try await WebhookFixtures.enqueue(store, at: clock.now()).id) }
                sender.wake()
                let failed = try await Self.outcomes(outbox) { $0.count == 6 }
                #expect(failed.values.allSatisfy { $0.state == .pending && $0.nextAttemptAt > clock.now() })
                #expect(sender.lanes[0].receiver.state == .open)

                // Back. A new message is due at once, so the probe has one to take whatever the jitter. The
                // clock moves by the probe's interval only: a retry due after it (4 to 6 s) waits for no timer.
                await receiver.recover()
                let fresh = try await WebhookFixtures.enqueue(store, at: clock.now())
                clock.advance(by: WebhookSender.probeInterval)
                let delivered = try await Self.outcomes(outbox) { latest in
                    latest.count == 7 && latest.values.allSatisfy { $0.state == .delivered }
                }
                #expect(Set(delivered.keys) == Set(waiting + [fresh.id]))
                #expect(sender.lanes[0].receiver.state == .closed)
            }
        }
    }
}

@Suite("Webhooks: message types")
struct WebhookTypeTests {
    @Test("Every event but waiting has its message type")
    func types() {
        let now = Date()
        #expect(WebhookMessage.type(reporting: .waiting(expiresAt: now)) == nil)
        #expect(WebhookMessage.type(reporting: .tapped(asc: true)) == "session.tapped")
        #expect(WebhookMessage.type(reporting: .result(.verified)) == "session.verified")
        #expect(WebhookMessage.type(reporting: .result(.failed)) == "session.failed")
        #expect(WebhookMessage.type(reporting: .result(.possessionRequired)) == "session.possession_required")
        #expect(WebhookMessage.type(reporting: .expired) == "session.expired")
        #expect(WebhookMessage.type(reporting: .cancelled(reason: .rejected)) == "session.cancelled")
    }
}

@Suite("Webhooks: message bodies")
struct WebhookBodyTests {
    private struct CodableBody: Encodable {
        var type: String
        var timestamp: Date
        var data: DataView
    }

    /// `SessionView` without events, and Pre-Fill's progress without the individual.
    private struct DataView: Encodable {
        struct Prefill: Encodable {
            var next: [String: String]
            var challengeMissing: Bool?
            var completed: Bool?
            var individualAvailable: Bool
            var individualErasedAt: Date?
        }
        var sessionId: String
        var state: SessionState
        var createdAt: Date
        var expiresAt: Date
        var tappedAt: Date?
        var possessionType: PossessionType
        var flow: Flow
        var result: SessionResult?
        var prefill: Prefill?

        init(_ session: Session) {
            let view = SessionView(session, events: nil, at: session.createdAt)
            (sessionId, state, createdAt, expiresAt, tappedAt) =
                (view.sessionId, view.state, view.createdAt, view.expiresAt, view.tappedAt)
            (possessionType, flow, result) = (view.possessionType, view.flow, view.result)
            prefill = session.prefill.map {
                Prefill(
                    next: $0.next, challengeMissing: $0.challengeMissing, completed: $0.completed,
                    individualAvailable: $0.individual != nil, individualErasedAt: $0.individualErasedAt)
            }
        }
    }

    @Test(
        "A body is byte for byte what RelayJSON writes for the session's view: waiting, tapped, with a result, Pre-Fill without the individual"
    )
    func sameAsCodable() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000.123)
        var session = Session(
            id: Secrets.sessionID(), linkKey: Secrets.token(length: 22), channelToken: "t", createdAt: now,
            expiresAt: now.addingTimeInterval(180), correlationId: "c", authToken: nil, clientRequestId: "r",
            phoneNumber: "2001004014", finalTargetUrl: "https://relay.example/l/x", idempotencyKey: nil,
            requestFingerprint: "f", desktopIPAddress: nil)
        var sessions = [session]
        session.tappedAt = now.addingTimeInterval(12.5)
        session.state = .tapped
        sessions.append(session)
        session.state = .possessionRequired
        session.possessionType = PossessionType.none
        session.result = SessionResult(
            outcome: .possessionRequired, proveSuccess: "false", phoneNumber: "2001004014", proveId: "p/1\"é",
            clientRequestId: "r", evaluation: ["authentication": .init(result: "fail", failureReasons: ["9100": "x"])])
        session.result?.binding = .init(success: true, phoneNumber: "2001004014", deviceId: "d", at: now)
        sessions.append(session)
        // Every field of a result, and strings that need escapes.
        session.result = SessionResult(
            outcome: .failed, proveSuccess: "false", phoneNumber: "2001004014", proveId: "p", deviceId: "d\\e",
            clientHumanId: "h\u{1}", clientRequestId: "r\n\t\r\u{8}\u{c}\u{1f}",
            evaluation: [
                "risk": .init(result: "pass"),
                "authentication": .init(result: "fail", failureReasons: ["9177": "b/c", "9100": "a \"q\""]),
            ], reason: "upstream_error")
        session.result?.binding = .init(
            success: false, phoneNumber: "2001004014", evaluation: ["authentication": .init(result: "pass")],
            at: now.addingTimeInterval(0.0005))
        sessions.append(session)
        session.prefill = PrefillProgress(next: ["v3-challenge": "/v3/challenge"], challengeMissing: true)
        sessions.append(session)
        session.prefill?.individual = PrefillIndividual(firstName: "Marcia", lastName: "Longo", ssn: "470806227")
        session.prefill?.keepIndividual(until: now.addingTimeInterval(1800))
        session.prefill?.completed = true
        sessions.append(session)
        session.prefill?.eraseIndividual(at: now.addingTimeInterval(60))
        sessions.append(session)
        for session in sessions {
            let expected = RelayJSON.encode(
                CodableBody(type: "session.tapped", timestamp: now, data: DataView(session)))
            let written = WebhookReporter.body(type: "session.tapped", session, at: now)
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
            for value in ["Marcia", "Longo", "470806227"] {
                #expect(
                    !String(decoding: written, as: UTF8.self).contains(value), "a webhook body carries identity data")
            }
        }
    }
}
