import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import ProveAPI
import Testing

@testable import LinkRelayServer

/// `SessionService` without sockets: the memory store, a manual clock and a scripted Prove.
@Suite("SessionService", .timeLimit(.minutes(1)))
struct SessionServiceTests {
    static let authId = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    static let otherAuthId = "9c5b94b1-35ad-49bb-b118-8e8fc24abf80"
    static let request = CreateSessionRequest(phoneNumber: "2001004014")

    /// The events each publish carried, in order.
    final class RecordingBus: EventBus {
        private let published = Locked<[String]>([])
        var types: [String] { published.value }

        func publish(sessionID: String, events: [SessionEvent]) {
            published.withLock { $0 += events.map(\.kind.type) }
        }
    }

    /// The memory store, with writes that fail on demand as a broken disk's would.
    final class FailingStore: SessionStore, ClusterClaims {
        let memory = MemorySessionStore()
        let failInserts = Locked(false)
        let failUpdates = Locked(false)

        func insert(_ session: Session, event: SessionEvent) async throws {
            if failInserts.value { throw StoreError.unavailable }
            try await memory.insert(session, event: event)
        }
        func update(
            _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
            reporting messages: [WebhookMessage], committed: @escaping @Sendable () -> Void
        ) async throws -> Bool {
            if failUpdates.value { throw StoreError.unavailable }
            return try await memory.update(
                session, expectedVersion: expectedVersion, appending: events, reporting: messages,
                committed: committed)
        }
        func discard(sessionID: String) async throws { try await memory.discard(sessionID: sessionID) }
        func session(id: String) async throws -> Session? { try await memory.session(id: id) }
        func session(linkKey: String) async throws -> Session? { try await memory.session(linkKey: linkKey) }
        func session(idempotencyKey: String) async throws -> Session? {
            try await memory.session(idempotencyKey: idempotencyKey)
        }
        func events(sessionID: String, after: Int) async throws -> [SessionEvent] {
            try await memory.events(sessionID: sessionID, after: after)
        }
        func activeSessions() async throws -> [Session] { try await memory.activeSessions() }
        func ping() async throws {}
        func close() async throws {}
        func sessionsWithIndividual(keptUntil date: Date, limit: Int) async throws -> [String] {
            try await memory.sessionsWithIndividual(keptUntil: date, limit: limit)
        }
        func deleteSessions(endedBefore date: Date, limit: Int) async throws -> Int {
            try await memory.deleteSessions(endedBefore: date, limit: limit)
        }
        func claimWebhooks(tenant: String, dueBy now: Date, leaseUntil: Date, limit: Int) async throws
            -> [WebhookMessage]
        {
            try await memory.claimWebhooks(tenant: tenant, dueBy: now, leaseUntil: leaseUntil, limit: limit)
        }
        func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
            try await memory.recordWebhookAttempts(messages)
        }
        func webhookMessages(tenant: String, _ listing: WebhookListing) async throws -> [WebhookMessage] {
            try await memory.webhookMessages(tenant: tenant, listing)
        }
        func makeRetriesDue(tenant: String, now: Date) async throws -> Int {
            try await memory.makeRetriesDue(tenant: tenant, now: now)
        }
        func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage? {
            try await memory.retryWebhook(id: id, tenant: tenant, now: now)
        }
        func webhookBacklog() async throws -> WebhookBacklog { try await memory.webhookBacklog() }
        func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int {
            try await memory.pruneWebhooks(deliveredBefore: deliveredBefore, failedBefore: failedBefore, limit: limit)
        }
    }

    let clock = ManualClock()
    let store = FailingStore()
    let bus = RecordingBus()
    let prove = ScriptedProve()
    let parts: SessionParts
    var service: SessionService { parts.service }

    init() {
        parts = SessionParts(
            store: store, bus: bus, prove: prove, clock: clock, metrics: RelayMetrics(), logger: quietLogger(),
            publicURL: "https://relay.example", defaultHold: 180)
    }

    func stored(_ id: String) async throws -> (Session, [String]) {
        let session = try #require(try await store.session(id: id))
        return (session, try await store.events(sessionID: id, after: 0).map(\.kind.type))
    }

    func landing(_ session: Session, asc: Bool = true, authId: String = authId) async throws
        -> SessionService.LandingResult
    {
        try await service.land(linkKey: session.linkKey, parameters: LandingParameters(asc: asc, authId: authId))
    }

    /// Asks Prove as the verifier does, until the session is settled or its hold ends.
    func verify(_ session: Session) async {
        await parts.verifier.verify(sessionID: session.id)
    }

    // MARK: - create

    @Test("A create starts Prove's desktop flow with the relay's own link, stores `waiting` and schedules the expiry")
    func create() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        let unify = try #require(prove.unifyCalls.first)
        #expect(unify.possessionType == "desktop")
        #expect(unify.phoneNumber == "2001004014")
        #expect(unify.finalTargetUrl == "https://relay.example/l/" + session.linkKey)
        #expect(session.linkKey.count == LandingRedirect.linkKeyLength)
        #expect(session.expiresAt == clock.now().addingTimeInterval(180))
        let (_, events) = try await stored(session.id)
        #expect(events == ["waiting"])
        #expect(bus.types == ["waiting"])
        #expect(parts.expiries.next == session.expiresAt)
    }

    @Test("A store that cannot take the session answers before Prove is asked: no SMS goes")
    func createWithStoreDown() async throws {
        store.failInserts.withLock { $0 = true }
        await #expect(throws: StoreError.unavailable) { try await service.create(Self.request, idempotencyKey: "k") }
        #expect(prove.unifyCalls.isEmpty)
        #expect(bus.types.isEmpty)
    }

    @Test("A flow whose last write fails is answered as made, and stored once the store takes writes again")
    func createWithLastWriteFailing() async throws {
        store.failUpdates.withLock { $0 = true }
        let session = try await service.create(Self.request, idempotencyKey: "k")
        #expect(prove.unifyCalls.count == 1)
        #expect(!session.correlationId.isEmpty, "the integrator gets the session as Prove started it")
        // Its row, with its link key, is there: the link lands. A repeat of the create waits for it.
        #expect(try await store.session(linkKey: session.linkKey)?.correlationId == "")
        await #expect(throws: SessionError.idempotencyKeyInProgress) {
            try await service.create(Self.request, idempotencyKey: "k")
        }
        await clock.waitForSleepers(1)
        store.failUpdates.withLock { $0 = false }
        clock.advance(by: 0.5)
        for _ in 0..<10_000 where try await store.session(id: session.id)?.correlationId == "" { await Task.yield() }
        #expect(try await store.session(id: session.id)?.correlationId == session.correlationId)
        #expect(try await service.create(Self.request, idempotencyKey: "k").id == session.id)
        #expect(prove.unifyCalls.count == 1, "one SMS in all")
    }

    @Test("Prove's refusal of a create is thrown as it is, and nothing is stored")
    func createRefused() async throws {
        let refusal = ProveClientError.rejected(status: 400, body: ProveErrorBody(code: 8007, message: "no test user"))
        prove.answerUnify(.failure(refusal))
        await #expect(throws: refusal) { try await service.create(Self.request, idempotencyKey: "k") }
        #expect(try await store.activeSessions().isEmpty)
        #expect(bus.types.isEmpty)
        // The key is free again: a retry asks Prove again.
        _ = try await service.create(Self.request, idempotencyKey: "k")
        #expect(prove.unifyCalls.count == 2)
    }

    @Test("The same Idempotency-Key and body give the same session and one Prove flow; another body is refused")
    func idempotency() async throws {
        let first = try await service.create(Self.request, idempotencyKey: "order-42")
        let again = try await service.create(Self.request, idempotencyKey: "order-42")
        #expect(again.id == first.id)
        #expect(prove.unifyCalls.count == 1)
        await #expect(throws: SessionError.idempotencyKeyReused) {
            try await service.create(CreateSessionRequest(phoneNumber: "2001004018"), idempotencyKey: "order-42")
        }
        #expect(prove.unifyCalls.count == 1)
    }

    @Test("Repeats of an Idempotency-Key sent while the first is with Prove wait for it: one flow, one session")
    func concurrentIdempotency() async throws {
        prove.holdUnify()
        async let first = service.create(Self.request, idempotencyKey: "order-43")
        await prove.waitForCalls(1)
        async let second = service.create(Self.request, idempotencyKey: "order-43")
        prove.releaseUnify()
        let (a, b) = try await (first, second)
        #expect(a.id == b.id)
        #expect(prove.unifyCalls.count == 1)
    }

    // MARK: - landing

    @Test("The first landing emits `tapped` with its asc and asks for verification; a second adds its authId only")
    func land() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        #expect(try await landing(session, asc: false).name == "accepted")
        #expect(try await landing(session, authId: Self.otherAuthId).name == "accepted")
        let (stored, events) = try await stored(session.id)
        #expect(events == ["waiting", "tapped"])
        #expect(stored.state == .tapped)
        #expect(stored.verificationPending)
        #expect(stored.seenAuthIds == [Self.authId, Self.otherAuthId])
        let tapped = try await store.events(sessionID: session.id, after: 1)
        #expect(tapped.first?.kind == .tapped(asc: false), "asc is recorded, never trusted")
    }

    @Test("A landing on an unknown key or past the hold changes nothing")
    func closedLandings() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        var unknown = session
        unknown.linkKey = String(repeating: "A", count: LandingRedirect.linkKeyLength)
        #expect(try await landing(unknown).name == "unknown")
        clock.advance(by: 180)
        #expect(try await landing(session).name == "expired")
        #expect(try await stored(session.id).1 == ["waiting"])
    }

    // MARK: - verification

    @Test("While Prove says pending, the verifier asks again a second later; `true` ends the session verified")
    func verifyAfterPending() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        _ = try await landing(session)
        prove.answerStatus(
            .success(.init(success: "pending")),
            .success(.init(success: "true", phoneNumber: "2001004014", proveId: "p-1", clientRequestId: "r-1")))
        async let verified: Void = verify(session)
        await clock.waitForSleepers(1)
        #expect(prove.statusCalls.count == 1)
        clock.advance(by: 1)
        await verified
        let (stored, events) = try await stored(session.id)
        #expect(events == ["waiting", "tapped", "result"])
        #expect(stored.state == .verified)
        #expect(stored.result?.proveId == "p-1")
        #expect(!stored.verificationPending)
        #expect(prove.statusCalls.map(\.correlationId) == [session.correlationId, session.correlationId])
    }

    @Test("Prove refusing the question ends the session failed, with the reason")
    func verifyRefused() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        _ = try await landing(session)
        prove.answerStatus(.failure(.rejected(status: 400, body: ProveErrorBody(code: 8008, message: "gone"))))
        await verify(session)
        let (stored, _) = try await stored(session.id)
        #expect(stored.state == .failed)
        #expect(stored.result?.reason == "Prove rejected unify-status with 400 (code 8008)")
    }

    // MARK: - expiry and cancel

    @Test("A session nobody tapped expires at its hold's end, not before")
    func expire() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        clock.advance(by: 179)
        try await parts.verifier.expire(sessionID: session.id)
        #expect(try await stored(session.id).1 == ["waiting"])
        clock.advance(by: 1)
        try await parts.verifier.expire(sessionID: session.id)
        #expect(try await stored(session.id).1 == ["waiting", "expired"])
        #expect(parts.expiries.due(at: clock.now()).isEmpty, "an ended session needs no expiry")
    }

    @Test("A session that never landed is asked about once as its hold ends: Prove's `true` ends it verified")
    func lastQuestionVerifies() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        prove.answerStatus(.success(.init(success: "true", phoneNumber: "2001004014")))
        clock.advance(by: 180)
        try await parts.verifier.expire(sessionID: session.id)
        let (stored, events) = try await stored(session.id)
        #expect(events == ["waiting", "result"], "a result without a tapped: the redirect was lost")
        #expect(stored.state == .verified)
        #expect(prove.statusCalls.map(\.correlationId) == [session.correlationId])
    }

    @Test(
        "A last question Prove answers otherwise, or not at all, leaves the session expired, and is asked once",
        arguments: [
            Result<UnifyStatusResponse, ProveClientError>.success(.init(success: "pending")),
            .success(.init(success: "false")), .failure(.unavailable(reason: "timeout")),
        ])
    func lastQuestionExpires(_ answer: Result<UnifyStatusResponse, ProveClientError>) async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        prove.answerStatus(answer)
        clock.advance(by: 180)
        store.failUpdates.withLock { $0 = true }
        await #expect(throws: StoreError.unavailable) { try await parts.verifier.expire(sessionID: session.id) }
        store.failUpdates.withLock { $0 = false }
        // The sweeper comes back: the session expires without a second question.
        try await parts.verifier.expire(sessionID: session.id)
        #expect(try await stored(session.id).1 == ["waiting", "expired"])
        #expect(prove.statusCalls.count == 1)
    }

    @Test("A finish racing a landing and two verifications ends the session once, with one result")
    func finishRacesLanding() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        async let landed = landing(session)
        async let finished = service.finished(sessionID: session.id, authId: Self.otherAuthId)
        _ = try await (landed, finished)
        prove.answerStatus(.success(.init(success: "true")), .success(.init(success: "true")))
        async let first: Void = verify(session)
        async let second: Void = verify(session)
        _ = await (first, second)
        let (stored, events) = try await stored(session.id)
        #expect(events == ["waiting", "tapped", "result"])
        #expect(Set(stored.seenAuthIds) == [Self.authId, Self.otherAuthId])
    }

    @Test("A bind is refused before possession_required and after Prove's 15 minutes; Prove is asked in between")
    func bindWindow() async throws {
        var request = Self.request
        request.possessionType = PossessionType.none
        let session = try await service.create(request, idempotencyKey: nil)
        #expect(prove.unifyCalls.first?.possessionType == "none")
        await #expect(throws: SessionError.bindNotAllowed) {
            _ = try await service.bind(sessionID: session.id, tenant: Tenant.defaultName, phoneNumber: nil)
        }
        prove.answerStatus(.success(.init(success: "possession_required")))
        await verify(session)
        #expect(try await stored(session.id).0.result?.outcome == .possessionRequired)
        // Within the window Prove is asked (the scripted Prove refuses the bind: 502, and nothing is kept).
        await #expect(throws: ProveClientError.self) {
            _ = try await service.bind(sessionID: session.id, tenant: Tenant.defaultName, phoneNumber: nil)
        }
        #expect(try await stored(session.id).0.result?.binding == nil)
        clock.advance(by: SessionService.proveFlowLifetime)
        await #expect(throws: SessionError.bindNotAllowed) {
            _ = try await service.bind(sessionID: session.id, tenant: Tenant.defaultName, phoneNumber: nil)
        }
    }

    @Test("A tapped session whose result never came fails at the hold's end, saying why")
    func expireTapped() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        _ = try await landing(session)
        clock.advance(by: 180)
        try await parts.verifier.expire(sessionID: session.id)
        let (stored, events) = try await stored(session.id)
        #expect(events == ["waiting", "tapped", "result"])
        #expect(stored.state == .failed)
        #expect(stored.result?.reason == "No result from Prove before the hold ended: Prove still said pending")
    }

    @Test("Cancel ends a live session once; an ended or unknown one is refused; its authIds see the final page")
    func cancel() async throws {
        let session = try await service.create(Self.request, idempotencyKey: nil)
        _ = try await landing(session)
        let cancelled = try await service.cancel(sessionID: session.id, tenant: Tenant.defaultName)
        #expect(cancelled.state == .cancelled)
        await #expect(throws: SessionError.alreadyEnded) {
            try await service.cancel(sessionID: session.id, tenant: Tenant.defaultName)
        }
        await #expect(throws: SessionError.notFound) {
            try await service.cancel(sessionID: "ses_nope", tenant: Tenant.defaultName)
        }
        #expect(try await landing(session).name == "finalPage", "a seen authId")
        #expect(try await landing(session, authId: Self.otherAuthId).name == "alreadyUsed", "an unseen authId")
        #expect(try await stored(session.id).1 == ["waiting", "tapped", "cancelled"])
        #expect(bus.types == ["waiting", "tapped", "cancelled"])
    }
}

extension SessionService.LandingResult {
    /// The case, for a test's expectation.
    var name: String {
        switch self {
        case .accepted: "accepted"
        case .awaitingConfirmation: "awaitingConfirmation"
        case .finalPage: "finalPage"
        case .unknown: "unknown"
        case .expired: "expired"
        case .alreadyUsed: "alreadyUsed"
        }
    }
}
