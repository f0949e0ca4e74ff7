import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import NIOHTTP1
import ProveAPI
import ProveSandbox
import Testing

@testable import LinkRelayServer

/// What the relay keeps, and for how long (`--identity-retention`, `--retention`): `SessionService` and
/// `RetentionSweeper` on each store, with the sandbox in process and a manual clock.
@Suite("Retention: identity data and ended sessions", .timeLimit(.minutes(2)))
struct RetentionTests {
    static let stores = ["memory", "sqlite"] + (TestPostgres.available ? ["postgres"] : [])
    static let milo = PrefillServiceTests.milo
    /// What the sandbox's challenge finds for Milo Pinson, and must not outlive the retention.
    static let identity = ["Pinson", "1981-01-17"]

    struct Harness {
        let clock: ManualClock
        let store: any RelayStore
        let parts: SessionParts
        var service: SessionService { parts.service }
        let sweeper: RetentionSweeper
        /// The SQLite file, when the store is one.
        let file: URL?
    }

    /// A service on `kind` with webhooks for `default` (so that messages are written), then closes the store.
    static func with(
        _ kind: String, identityRetention: TimeInterval = 900, retentionDays: Int = 7,
        _ body: (Harness) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-keep-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("relay.sqlite")
        let store: any RelayStore =
            switch kind {
            case "sqlite": try await SQLiteSessionStore.open(path: file.path, logger: quietLogger())
            case "postgres":
                try await PostgresSessionStore.open(
                    url: try PostgresURL(try await TestPostgres.createDatabase()), logger: quietLogger())
            default: MemorySessionStore()
            }
        let clock = ManualClock()
        let metrics = RelayMetrics()
        let parts = SessionParts(
            store: store, bus: SessionServiceTests.RecordingBus(),
            prove: SandboxProveClient(
                sandbox: ProveSandbox(publicBaseURL: "https://relay.example"), overHTTP: ScriptedProve(),
                observer: nil, logger: quietLogger()),
            clock: clock, metrics: metrics, logger: quietLogger(), publicURL: "https://relay.example",
            defaultHold: 180, webhooks: WebhookReporter(reports: { $0 == Tenant.defaultName }, committed: {}),
            identityRetention: identityRetention)
        let harness = Harness(
            clock: clock, store: store, parts: parts,
            sweeper: RetentionSweeper(
                service: parts.service, store: store, clock: clock, logger: quietLogger(), metrics: metrics,
                retentionDays: retentionDays, sessionBatch: 3, messageBatch: 3,
                pause: .zero),
            file: kind == "sqlite" ? file : nil)
        do {
            try await body(harness)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    /// Milo's Pre-Fill session, tapped and verified, with the challenge taken: the individual is kept.
    static func challenged(_ harness: Harness, idempotencyKey: String? = nil) async throws -> Session {
        var request = CreateSessionRequest(phoneNumber: milo)
        request.flow = .prefill
        request.ssn = "0596"
        let session = try await harness.service.create(request, idempotencyKey: idempotencyKey)
        _ = try await harness.service.land(
            linkKey: session.linkKey, parameters: LandingParameters(asc: true, authId: PrefillServiceTests.authId))
        await harness.parts.verifier.verify(sessionID: session.id)
        let found = try await harness.service.challenge(sessionID: session.id, tenant: Tenant.defaultName, .init())
        #expect(found.individual?.lastName == "Pinson")
        return try #require(try await harness.store.session(id: session.id))
    }

    /// What `GET /v1/sessions/{id}` answers now.
    static func view(_ harness: Harness, _ id: String) async throws -> String {
        let session = try #require(try await harness.store.session(id: id))
        return String(
            decoding: RelayJSON.encode(SessionView(session, events: nil, at: harness.clock.now())), as: UTF8.self)
    }

    @Test(
        "Without the complete step, the individual is erased the retention after Prove's 15 minutes; GET says when",
        arguments: stores)
    func erasedAfterProvesWindow(_ kind: String) async throws {
        try await Self.with(kind) { harness in
            let session = try await Self.challenged(harness)
            let deadline = session.createdAt.addingTimeInterval(SessionService.proveFlowLifetime + 900)
            #expect(session.prefill?.individualKeptUntil == deadline)
            #expect(try await Self.view(harness, session.id).contains("Pinson"))

            harness.clock.advance(by: deadline.timeIntervalSince(harness.clock.now()) - 1)
            #expect(await harness.sweeper.sweep().erased == 0)
            #expect(try await Self.view(harness, session.id).contains("Pinson"), "kept until its time")

            harness.clock.advance(by: 1)
            #expect(await harness.sweeper.sweep().erased == 1)
            let erased = try #require(try await harness.store.session(id: session.id))
            #expect(erased.prefill?.individual == nil)
            #expect(erased.prefill?.individualErasedAt == deadline)
            #expect(erased.prefill?.next == session.prefill?.next, "only the individual goes")
            let view = try await Self.view(harness, session.id)
            #expect(view.contains(#""individualErasedAt""#))
            for value in Self.identity { #expect(!view.contains(value)) }
            #expect(await harness.sweeper.sweep().erased == 0, "once")

        }
    }

    @Test("A deleted session leaves no trace of its identity data in the SQLite file")
    func deletedLeavesNoTrace() async throws {
        try await Self.with("sqlite", identityRetention: 86_400, retentionDays: 1) { harness in
            // Enough sessions to fill pages of their own, which the deletions then free whole.
            var sessions: [Session] = []
            for _ in 0..<12 { sessions.append(try await Self.challenged(harness)) }
            let sqlite = try #require(harness.store as? SQLiteSessionStore)
            let file = try #require(harness.file)
            try await sqlite.checkpoint()
            #expect(try Data(contentsOf: file).range(of: Data("Pinson".utf8)) != nil, "the individual is in the file")
            // Ended at their verification; deleted a day later, before their individuals' own time came.
            harness.clock.advance(by: 86_400 + 1)
            #expect(await harness.sweeper.sweep().sessions == 12)
            for session in sessions { #expect(try await harness.store.session(id: session.id) == nil) }
            try await sqlite.checkpoint()
            let bytes = try Data(contentsOf: file)
            for value in Self.identity { #expect(bytes.range(of: Data(value.utf8)) == nil, "\(value) in the file") }
        }
    }

    /// Milo's SSN as the sandbox's challenge finds it: in the individual only (the create's is never stored).
    static let ssn = "847350596"

    /// Which of the SQLite file and its WAL hold `value`'s bytes.
    static func onDisk(_ value: String, _ file: URL) -> [String] {
        [file.path, file.path + "-wal"].filter { path in
            (FileManager.default.contents(atPath: path) ?? Data()).range(of: Data(value.utf8)) != nil
        }.map { ($0 as NSString).lastPathComponent }
    }

    @Test("An erased individual's bytes leave the SQLite file and its WAL with the sweep that erases it")
    func erasedLeavesTheDisk() async throws {
        try await Self.with("sqlite") { harness in
            var sessions: [Session] = []
            for _ in 0..<3 { sessions.append(try await Self.challenged(harness)) }
            let file = try #require(harness.file)
            #expect(!Self.onDisk(Self.ssn, file).isEmpty, "the individual is on disk while it is kept")
            let deadline = try #require(sessions.last?.prefill?.individualKeptUntil)
            harness.clock.advance(by: deadline.timeIntervalSince(harness.clock.now()))
            #expect(await harness.sweeper.sweep().erased == 3)
            for session in sessions {
                #expect(try await harness.store.session(id: session.id)?.prefill?.individual == nil)
            }
            // No checkpoint of the test's own, and no other write: what the sweep left is what stays.
            for value in [Self.ssn, "Birchwood"] + Self.identity {
                #expect(Self.onDisk(value, file).isEmpty, "\(value) in \(Self.onDisk(value, file))")
            }
        }
    }

    @Test("GET hides an individual once its keep time has passed, before the sweep erases it")
    func hiddenPastItsTime() async throws {
        let clock = ManualClock()
        let relay = try await TestRelay.unstarted(clock: clock)
        let marcia = PrefillSessionTests.marcia
        let auth: HTTPHeaders = ["Authorization": "Bearer \(TestRelay.apiKey)", "Content-Type": "application/json"]
        func call(_ method: HTTPMethod, _ path: String, _ body: String? = nil) async throws -> (Int, String) {
            let answer = try #require(await relay.respond(to: RelayRequest(method, path, headers: auth, body: body)))
            return (Int(answer.status.code), String(buffer: answer.body))
        }
        let (created, body) = try await call(
            .POST, "/v1/sessions", #"{"phoneNumber":"\#(marcia)","flow":"prefill","ssn":"6227"}"#)
        #expect(created == 201)
        let id = try #require(body.firstMatch(of: /"sessionId":"([^"]+)"/)).output.1
        // The phone taps; the verifier's step, by hand (the relay is not started, so no sweep runs either).
        let link = try #require(await relay.sandbox?.outbox(phoneNumber: marcia).last?.link)
        let landing = try #require(await relay.respond(to: RelayRequest(.GET, link))?.headers.first(name: "Location"))
        #expect(await relay.respond(to: RelayRequest(.GET, landing))?.status == .ok)
        await relay.parts.verifier.verify(sessionID: String(id))
        #expect(try await call(.POST, "/v1/sessions/\(id)/challenge").0 == 200)

        let kept = try #require(try await relay.store.session(id: String(id))?.prefill?.individualKeptUntil)
        clock.advance(by: kept.timeIntervalSince(clock.now()) - 1)
        let before = try await call(.GET, "/v1/sessions/\(id)")
        #expect(before.0 == 200 && before.1.contains("470806227") && before.1.contains("Longo"), "kept until its time")
        #expect(!before.1.contains("individualErasedAt"))

        clock.advance(by: 1)
        #expect(try await relay.store.session(id: String(id))?.prefill?.individual != nil, "not yet swept")
        let after = try await call(.GET, "/v1/sessions/\(id)")
        #expect(after.0 == 200)
        for value in PrefillSessionTests.identity.filter({ $0 != marcia }) {
            #expect(!after.1.contains(value), "\(value)")
        }
        #expect(!after.1.contains("individualKeptUntil"))
        let erasedAt = ISO8601Milliseconds.string(kept)
        #expect(after.1.contains(#""individualErasedAt":"\#(erasedAt)""#), "\(after.1)")
        // The sweep then erases it with the same time, so GET says the same afterwards.
        let sweeper = RetentionSweeper(
            service: relay.parts.service, store: relay.store, clock: clock, logger: quietLogger(),
            metrics: relay.metrics, retentionDays: 7)
        #expect(await sweeper.sweep().erased == 1)
        #expect(try await call(.GET, "/v1/sessions/\(id)").1 == after.1)
    }

    @Test(
        "After the complete step, the individual is erased the retention after it; 0 erases it at once",
        arguments: stores)
    func erasedAfterComplete(_ kind: String) async throws {
        try await Self.with(kind, identityRetention: 60) { harness in
            let session = try await Self.challenged(harness)
            harness.clock.advance(by: 30)
            let person = try #require(session.prefill?.individual)
            _ = try await harness.service.complete(sessionID: session.id, tenant: Tenant.defaultName, person)
            let completed = try #require(try await harness.store.session(id: session.id))
            #expect(completed.prefill?.individualKeptUntil == harness.clock.now().addingTimeInterval(60))
            harness.clock.advance(by: 60)
            #expect(await harness.sweeper.sweep().erased == 1)
            #expect(try await harness.store.session(id: session.id)?.prefill?.individual == nil)
        }
        try await Self.with(kind, identityRetention: 0) { harness in
            let session = try await Self.challenged(harness)
            let person = try #require(session.prefill?.individual)
            _ = try await harness.service.complete(sessionID: session.id, tenant: Tenant.defaultName, person)
            let completed = try #require(try await harness.store.session(id: session.id))
            #expect(completed.prefill?.individual == nil)
            #expect(completed.prefill?.individualErasedAt == harness.clock.now())
            #expect(completed.prefill?.completed == true)
        }
    }

    @Test(
        "Ended sessions, their events, Idempotency-Keys and settled webhook messages go after the retention; live ones stay",
        arguments: stores)
    func endedSessionsDeleted(_ kind: String) async throws {
        try await Self.with(kind, retentionDays: 1) { harness in
            let service = harness.service
            // Seven ended sessions (more than a batch of 3), one live.
            var ended: [Session] = []
            for index in 0..<7 {
                let session = try await service.create(
                    CreateSessionRequest(phoneNumber: "2001004014"), idempotencyKey: "default/order-\(index)")
                _ = try await service.cancel(sessionID: session.id, tenant: Tenant.defaultName)
                ended.append(session)
            }
            let endedAt = harness.clock.now()
            harness.clock.advance(by: 3600)
            let live = try await service.create(CreateSessionRequest(phoneNumber: "2001004014"), idempotencyKey: nil)
            // Sent, as the sender sends them: claimed, then their outcomes stored.
            let messages = try await harness.store.claimWebhooks(
                tenant: Tenant.defaultName, dueBy: harness.clock.now(), leaseUntil: harness.clock.now() + 60, limit: 100
            )
            #expect(messages.count == 7, "one session.cancelled each")
            try await harness.store.recordWebhookAttempts(
                messages.map { message in
                    var delivered = message
                    delivered.state = .delivered
                    delivered.attempts = [.init(at: endedAt, status: 204, error: nil, durationMs: 3)]
                    return delivered
                })

            harness.clock.advance(by: endedAt.addingTimeInterval(86_400 - 1).timeIntervalSince(harness.clock.now()))
            #expect(await harness.sweeper.sweep().sessions == 0, "not before the retention")

            harness.clock.advance(by: 2)
            let swept = await harness.sweeper.sweep()
            #expect(swept.sessions == 7)
            #expect(swept.messages == 7)
            let counted = String(decoding: harness.sweeper.metrics.registry.emitToBuffer(), as: UTF8.self)
            #expect(counted.contains(#"linkrelay_retention_total{what="sessions"} 7"#))
            #expect(counted.contains(#"linkrelay_retention_total{what="webhook_messages"} 7"#))
            for session in ended {
                #expect(try await harness.store.session(id: session.id) == nil)
                #expect(try await harness.store.session(linkKey: session.linkKey) == nil)
                #expect(try await harness.store.events(sessionID: session.id, after: 0).isEmpty)
            }
            #expect(try await harness.store.session(idempotencyKey: "default/order-0") == nil)
            #expect(try await harness.store.webhookMessages(tenant: Tenant.defaultName, state: nil, limit: 100).isEmpty)
            #expect(try await harness.store.session(id: live.id)?.state == .waiting, "a live session stays")
            // The Idempotency-Key is free again: a new session, not the deleted one.
            let again = try await service.create(
                CreateSessionRequest(phoneNumber: "2001004014"), idempotencyKey: "default/order-0")
            #expect(again.id != ended[0].id)
        }
    }

    @Test("A failed webhook message is kept the retention after it was given up, not after it was made")
    func failedMessagesKeptFromGivingUp() async throws {
        try await Self.with("sqlite", retentionDays: 1) { harness in
            try await WebhookFixtures.enqueue(harness.store, at: harness.clock.now())
            let claimed = try await harness.store.claimWebhooks(
                tenant: Tenant.defaultName, dueBy: harness.clock.now(), leaseUntil: harness.clock.now() + 60, limit: 1)
            var failed = try #require(claimed.first)
            failed.state = .failed
            failed.attempts = [.init(at: harness.clock.now(), status: 503, error: "answered 503", durationMs: 3)]
            try await harness.store.recordWebhookAttempts([failed])
            harness.clock.advance(by: 86_400 + 1)
            #expect(await harness.sweeper.sweep().messages == 0)
            harness.clock.advance(by: WebhookSender.retryFor)
            #expect(await harness.sweeper.sweep().messages == 1)
        }
    }
}
