import Crypto
import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NevisAPI
import ProveAPI

/// The sessions' state machine, and the one place that changes sessions: it writes the store, then wakes
/// channels through the bus. What differs between providers is in the flows (`SessionFlow`); asking the
/// provider for a result is the verifier's (`Verifier`), which records what it learns here.
final class SessionService: Sendable {
    private let store: any SessionStore & ClusterClaims
    private let bus: any EventBus
    private let flows: Flows
    private let clock: any RelayClock
    private let metrics: RelayMetrics
    private let logger: Logger
    private let publicURL: String
    private let defaultHold: Int
    /// The verifier's queue: a landing, a finish or a start without a link asks it to ask the provider.
    private let verifications: VerificationQueue
    /// The expiry sweeper's queue: each session is scheduled at its hold's end.
    private let expiries: ExpiryQueue
    /// Makes the webhook messages written with each change; nil without `--webhook-url`.
    private let webhooks: WebhookReporter?
    private let inFlightCreates = Locked<[String: Task<Session, any Error>]>([:])
    /// Binds and Pre-Fill steps under way on this instance: one at a time per session.
    private let steps = Locked<Set<String>>([])

    init(
        store: any SessionStore & ClusterClaims, bus: any EventBus, flows: Flows, verifications: VerificationQueue,
        expiries: ExpiryQueue, clock: any RelayClock, metrics: RelayMetrics, logger: Logger, publicURL: String,
        defaultHold: Int, webhooks: WebhookReporter?
    ) {
        self.store = store
        self.bus = bus
        self.flows = flows
        self.verifications = verifications
        self.expiries = expiries
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        self.publicURL = publicURL
        self.defaultHold = defaultHold
        self.webhooks = webhooks
    }

    // MARK: - create

    /// Starts the request's flow for `tenant` and stores the session with its `waiting` event. A repeat
    /// under the same Idempotency-Key (scoped to the tenant) returns the session it made.
    ///
    /// `legacyKey`: the key as sessions stored before tenants scoped it (per API key), looked up too, once.
    func create(
        _ request: CreateSessionRequest, tenant: String = Tenant.defaultName, idempotencyKey: String?,
        legacyKey: String? = nil
    ) async throws -> Session {
        if request.flow == .nevis, flows.nevis.client == nil {
            throw Problem.invalid([.init(field: "flow", message: "nevis needs the relay to run with --nevis")])
        }
        guard let key = idempotencyKey else {
            return try await startSession(request, tenant: tenant, idempotencyKey: nil)
        }
        // A session still being made is waited for below, when it is being made here.
        var existing = try await store.session(idempotencyKey: key)
        if existing == nil, let legacyKey { existing = try await store.session(idempotencyKey: legacyKey) }
        if let existing, existing.isStarted {
            return try sameRequest(existing, request)
        }
        // Concurrent repeats on this instance wait for the first one instead of starting a second flow.
        let (task, isNew) = inFlightCreates.withLock { tasks -> (Task<Session, any Error>, Bool) in
            if let running = tasks[key] { return (running, false) }
            let task = Task { try await self.startReserved(request, tenant: tenant, idempotencyKey: key) }
            tasks[key] = task
            return (task, true)
        }
        defer { if isNew { _ = inFlightCreates.withLock { $0.removeValue(forKey: key) } } }
        do {
            return try sameRequest(try await task.value, request)
        } catch StoreError.duplicateIdempotencyKey {
            guard let existing = try await store.session(idempotencyKey: key) else {
                throw SessionError.idempotencyKeyInProgress
            }
            return try sameRequest(existing, request)
        }
    }

    /// Starts the session under `key` once the store has reserved the key for this instance. While
    /// another instance holds it, throws `duplicateIdempotencyKey` (the caller then answers with that
    /// instance's session, or 409 while it is still being made).
    private func startReserved(_ request: CreateSessionRequest, tenant: String, idempotencyKey key: String)
        async throws -> Session
    {
        guard try await store.reserveIdempotencyKey(key) else { throw StoreError.duplicateIdempotencyKey }
        let outcome: Result<Session, any Error>
        do {
            // Another instance may have made the session between the first look and the reservation.
            if let existing = try await store.session(idempotencyKey: key) {
                outcome = .success(existing)
            } else {
                outcome = .success(try await startSession(request, tenant: tenant, idempotencyKey: key))
            }
        } catch {
            outcome = .failure(error)
        }
        try? await store.releaseIdempotencyKey(key)
        return try outcome.get()
    }

    private func sameRequest(_ session: Session, _ request: CreateSessionRequest) throws -> Session {
        // Sessions stored before the digest kept the canonical request itself.
        guard
            session.requestFingerprint == Self.fingerprint(request) || session.requestFingerprint == request.fingerprint
        else { throw SessionError.idempotencyKeyReused }
        guard session.isStarted else { throw SessionError.idempotencyKeyInProgress }
        return session
    }

    /// What a session keeps of its create request, to know a repeat: a digest, since the request may
    /// hold a date of birth or an SSN.
    static func fingerprint(_ request: CreateSessionRequest) -> String {
        "sha256:" + SHA256.hash(data: Data(request.fingerprint.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Stores the session first, with its link key and its `waiting` event, then asks Prove to start the
    /// flow (which sends the SMS), then stores what Prove answered. So a store that cannot take the
    /// session answers 503 before any SMS goes; a flow Prove refuses leaves no session behind; and a
    /// flow whose last write fails still has a session its link lands on, finished by `keepStarted`.
    private func startSession(_ request: CreateSessionRequest, tenant: String, idempotencyKey: String?)
        async throws -> Session
    {
        let now = clock.now()
        let hold = request.holdSeconds ?? defaultHold
        let expiresAt = now.addingTimeInterval(TimeInterval(hold))
        let id = Secrets.sessionID()
        let linkKey = Secrets.token(length: LandingRedirect.linkKeyLength)
        let finalTargetUrl = publicURL + "/l/" + linkKey
        let clientRequestId = request.clientRequestId ?? Secrets.uuid()
        var log = logger
        log[metadataKey: "session"] = .string(id)

        // No correlationId until Prove answers: the session is handed out only after that.
        var session = Session(
            id: id, linkKey: linkKey, channelToken: Secrets.token(length: 32), createdAt: now, expiresAt: expiresAt,
            correlationId: "", authToken: nil, clientRequestId: clientRequestId,
            phoneNumber: request.phoneNumber, finalTargetUrl: finalTargetUrl, idempotencyKey: idempotencyKey,
            requestFingerprint: Self.fingerprint(request), desktopIPAddress: request.ipAddress)
        session.possessionType = request.possessionType
        session.tenant = tenant == Tenant.defaultName ? nil : tenant
        if request.flow == .prefill { session.prefill = PrefillProgress(next: [:]) }
        if request.flow == .nevis {
            session.nevis = NevisOperation(
                channel: request.channel ?? "app", username: request.username, userId: request.userId)
        }
        let event = session.record(.waiting(expiresAt: expiresAt), at: now)
        try await store.insert(session, event: event)

        let flow: FlowStart
        do {
            flow = try await flows.serving(request.flow ?? .unify).start(
                request, for: session, deadline: clock.deadline(for: expiresAt))
        } catch {
            // Nothing was sent: the session goes. Should the store refuse even that, the session, never
            // handed out and with no flow to ask about, ends `expired` at the end of its hold.
            try? await store.discard(sessionID: id)
            if error is ProveClientError {
                log.warning(
                    "Prove refused to start the flow",
                    metadata: [
                        "phone": .string(request.phoneNumber.map(Secrets.maskedPhone) ?? "none"), "error": "\(error)",
                    ])
            } else if error is NevisClientError {
                log.warning("Nevis refused to start the operation", metadata: ["error": "\(error)"])
            }
            throw error
        }

        let started = session.version
        flow.apply(to: &session)
        session.version = started + 1
        do {
            guard try await store.update(session, expectedVersion: started, appending: []) else {
                throw StoreError.unavailable
            }
        } catch {
            // The SMS has gone: the session is answered as made, and stored as soon as the store takes it.
            log.warning("Storing a started flow failed; retrying until the store takes it")
            keepStarted(id, flow, until: expiresAt)
        }
        bus.publish(sessionID: id, events: [event])
        expiries.schedule(sessionID: id, at: expiresAt)
        if session.verificationPending { verifications.kick(id) }
        metrics.sessionCreated(tenant: tenant)
        var metadata: Logger.Metadata = [
            "flow": .string(session.flow.rawValue), "hold": "\(hold)", "tenant": .string(tenant),
        ]
        // Nevis's operation has no id a log may carry: its handle is a bearer secret.
        if !flow.correlationId.isEmpty { metadata["correlation"] = .string(flow.correlationId) }
        log.info("Session created", metadata: metadata)
        return session
    }

    /// Stores Prove's answer on a session whose last create write failed, retrying with growing pauses
    /// until the store takes it or the hold ends. Until then a landing is asked about again later (the
    /// verifier waits for the correlationId).
    private func keepStarted(_ id: String, _ flow: FlowStart, until expiresAt: Date) {
        Task {
            var pause: TimeInterval = 0.5
            while clock.now() < expiresAt {
                do {
                    _ = try await mutate(.id(id)) { session, _ in
                        flow.apply(to: &session)
                        return []
                    }
                    logger.notice("A started flow is stored after all", metadata: ["session": .string(id)])
                    verifications.kick(id)
                    return
                } catch {
                    try? await clock.sleep(until: clock.now().addingTimeInterval(pause))
                    pause = min(pause * 2, 5)
                }
            }
        }
    }

    // MARK: - landing

    enum LandingResult: Sendable {
        /// A valid landing on a live session: `tapped` was emitted the first time, the verifier asked.
        case accepted(Session)
        /// Confirm mode: the page asks the person on the phone; nothing has changed.
        case awaitingConfirmation(Session)
        /// The session is terminal and this authId was seen before: show the final page again.
        case finalPage(Session)
        case unknown
        case expired
        case alreadyUsed
    }

    /// A landing that counts as the tap: the GET without `--confirm-on-phone`, else the confirm POST.
    ///
    /// Without confirm mode every valid landing asks Prove again (API.md); a confirm POST counts once:
    /// on a session already tapped it changes nothing.
    func land(linkKey: String, parameters: LandingParameters, confirming: Bool = false) async throws
        -> LandingResult
    {
        var result = LandingResult.unknown
        var tapped = false
        let changed = try await mutate(.linkKey(linkKey)) { session, now in
            if let ended = Self.closedLanding(session, parameters, now) {
                result = ended
                return nil
            }
            tapped = session.state == .waiting
            if confirming, session.state == .tapped {
                result = session.seenAuthIds.contains(parameters.authId) ? .accepted(session) : .alreadyUsed
                return nil
            }
            var events: [SessionEvent.Kind] = []
            if session.state == .waiting { events.append(.tapped(asc: parameters.asc)) }
            if !session.seenAuthIds.contains(parameters.authId) { session.seenAuthIds.append(parameters.authId) }
            session.verificationPending = true
            return events
        }
        if let session = changed {
            result = .accepted(session)
            if tapped { metrics.tapped() }
            verifications.kick(session.id)
        }
        return result
    }

    /// What a landing would show, changing nothing: the confirm page's GET (and every HEAD). Without
    /// `confirming`, a landing that a GET would accept is `accepted`.
    func inspectLanding(linkKey: String, parameters: LandingParameters, confirming: Bool) async throws
        -> LandingResult
    {
        guard let session = try await store.session(linkKey: linkKey) else { return .unknown }
        if let ended = Self.closedLanding(session, parameters, clock.now()) { return ended }
        if !confirming || session.seenAuthIds.contains(parameters.authId) { return .accepted(session) }
        return session.state == .waiting ? .awaitingConfirmation(session) : .alreadyUsed
    }

    /// "Not me" on the confirm page: ends the session with `cancelled` (reason `rejected`).
    func reject(linkKey: String, parameters: LandingParameters) async throws -> LandingResult {
        var result = LandingResult.unknown
        let changed = try await mutate(.linkKey(linkKey)) { session, now in
            if let ended = Self.closedLanding(session, parameters, now) {
                result = ended
                return nil
            }
            if !session.seenAuthIds.contains(parameters.authId) { session.seenAuthIds.append(parameters.authId) }
            return [.cancelled(reason: .rejected)]
        }
        if let session = changed {
            result = .finalPage(session)
            verifications.forget(session.id)
            metrics.sessionEnded("cancelled", tenant: session.owner)
            logger.info("Session rejected on the phone", metadata: ["session": .string(session.id)])
        }
        return result
    }

    /// The answer to a landing on a session that can no longer change; nil while it can.
    private static func closedLanding(_ session: Session, _ parameters: LandingParameters, _ now: Date)
        -> LandingResult?
    {
        if session.state == .expired || (!session.state.isTerminal && session.isPastHold(at: now)) {
            return .expired
        }
        if session.state.isTerminal {
            return session.seenAuthIds.contains(parameters.authId) ? .finalPage(session) : .alreadyUsed
        }
        return nil
    }

    /// The provider says the phone's app has the operation (Nevis's redeemed token): the tap of a flow
    /// whose phone never lands here, once.
    func phoneHasOperation(_ session: Session) async throws {
        let tapped = try await mutate(.read(session)) { session, _ in
            session.state == .waiting ? [.tapped(asc: true)] : nil
        }
        if tapped != nil { metrics.tapped() }
    }

    // MARK: - the finish hook

    /// `POST /v1/sessions/{id}/finish`: the client SDK (or the app, or the backend) says the customer
    /// finished. Records the redirect's `authId` when one came, and has the verifier ask Prove as after
    /// a landing, without a `tapped`. Throws `notFound`; returns the session as it now is.
    func finished(sessionID: String, authId: String?) async throws -> Session {
        var found: Session?
        let changed = try await mutate(.id(sessionID)) { session, now in
            found = session
            guard !session.state.isTerminal, !session.isPastHold(at: now) else { return nil }
            let newAuthId = authId.map { !session.seenAuthIds.contains($0) } ?? false
            // Already being asked about, with nothing new: nothing to write.
            guard newAuthId || !session.verificationPending else { return nil }
            if newAuthId, let authId { session.seenAuthIds.append(authId) }
            session.verificationPending = true
            return []
        }
        guard let session = changed ?? found else { throw SessionError.notFound }
        if changed != nil {
            metrics.finishTaken()
            verifications.kick(session.id)
        }
        return session
    }

    // MARK: - a flow's own steps

    /// Prove's flow lifetime: a bind or a Pre-Fill step after it is refused (API.md v1.1).
    static let proveFlowLifetime: TimeInterval = 15 * 60

    /// One of a flow's own steps on one of `tenant`'s sessions (else `notFound`), one at a time per session
    /// (else `busy`): `take` checks the session and asks the provider; its change is stored, and nothing
    /// is when the provider fails. A change the session no longer takes is `busy` too.
    func step<Answer: Sendable>(
        sessionID: String, tenant: String, busy: any Error, _ take: (Session) async throws -> FlowStep<Answer>
    ) async throws -> Answer {
        let session = try await self.session(sessionID, of: tenant)
        guard steps.withLock({ $0.insert(sessionID).inserted }) else { throw busy }
        defer { _ = steps.withLock { $0.remove(sessionID) } }
        let step = try await take(session)
        var kept = false
        _ = try await mutate(.id(sessionID)) { session, now in
            kept = step.change(&session, now)
            return kept ? [] : nil
        }
        guard kept else { throw busy }
        return step.answer
    }

    // MARK: - endings

    /// Records the provider's answer for `session` (as the verifier read it), and the flow's progress.
    /// Does nothing if the session already ended.
    func finish(_ session: Session, result: SessionResult, prefill: PrefillProgress? = nil) async throws {
        let sessionID = session.id
        let session = try await mutate(.read(session)) { session, _ in
            guard !session.state.isTerminal else { return nil }
            session.result = result
            if let prefill { session.prefill = prefill }
            return [.result(result.outcome)]
        }
        if let session {
            metrics.sessionEnded(result.outcome.rawValue, tenant: session.owner)
            logger.info(
                "Session finished",
                metadata: ["session": .string(sessionID), "outcome": .string(result.outcome.rawValue)])
        }
    }

    /// Ends a session whose hold has passed; does nothing before that or once it has ended. A tapped
    /// session whose result Prove did not deliver in time (Prove unreachable, or still `pending`) ends
    /// `failed`, with the last reason the verifier saw; an untapped one `expired`, as does a Nevis session
    /// without a final answer. (A session that never landed, and a Nevis session, is asked about once
    /// first: `Verifier.expire`.)
    func expire(sessionID: String) async throws {
        let problem = verifications.lastProblem(sessionID)
        let session = try await mutate(.id(sessionID)) { session, now in
            guard !session.state.isTerminal, session.isPastHold(at: now) else { return nil }
            let flow = flows.serving(session.flow)
            guard session.verificationPending, !flow.asksFromStart else { return [.expired] }
            session.result = SessionResult(
                outcome: .failed, proveSuccess: nil,
                reason: "No result from \(flow.provider) before the hold ended: "
                    + (problem ?? "\(flow.provider) still said pending"))
            return [.result(.failed)]
        }
        guard let session else { return }
        verifications.forget(sessionID)
        if let result = session.result {
            metrics.sessionEnded(result.outcome.rawValue, tenant: session.owner)
            logger.warning(
                "Session failed at the end of its hold",
                metadata: ["session": .string(sessionID), "reason": .string(result.reason ?? "")])
        } else {
            metrics.expirations.increment()
            metrics.sessionEnded("expired", tenant: session.owner)
            logger.info("Session expired", metadata: ["session": .string(sessionID)])
        }
    }

    /// Ends one of `tenant`'s live sessions on its request. Throws `notFound` (also for another
    /// tenant's) or `alreadyEnded`.
    func cancel(sessionID: String, tenant: String) async throws -> Session {
        var found = false
        let session = try await mutate(.id(sessionID)) { session, _ in
            found = session.owner == tenant
            guard found, !session.state.isTerminal else { return nil }
            return [.cancelled()]
        }
        guard found else { throw SessionError.notFound }
        guard let session else { throw SessionError.alreadyEnded }
        verifications.forget(sessionID)
        metrics.sessionEnded("cancelled", tenant: tenant)
        logger.info("Session cancelled", metadata: ["session": .string(sessionID)])
        return session
    }

    /// The session's events, in order: for an answer about a session its caller may see.
    func events(of sessionID: String) async throws -> [SessionEvent] {
        try await store.events(sessionID: sessionID, after: 0)
    }

    /// The session, whichever tenant's: for a caller that proves itself with the session's own channel
    /// token (which it then checks), never with an API key.
    func anyTenantsSession(_ id: String) async throws -> Session? {
        try await store.session(id: id)
    }

    /// Now, by the service's clock: what a session is shown as of (`SessionView`).
    func now() -> Date { clock.now() }

    /// The session when it is `tenant`'s; another tenant's is `notFound`, exactly as an unknown id, after
    /// the same read.
    func session(_ id: String, of tenant: String) async throws -> Session {
        guard let session = try await store.session(id: id), session.owner == tenant else {
            throw SessionError.notFound
        }
        return session
    }

    /// Erases a Pre-Fill individual once its time is up (`--identity-retention`): `prefill.individualErasedAt`
    /// then says when it was due, as GET has shown it since (`SessionView`). No event and no webhook go with it.
    func eraseIndividual(sessionID: String) async throws {
        let erased = try await mutate(.id(sessionID)) { session, now in
            guard let until = session.prefill?.individualKeptUntil, until <= now else { return nil }
            session.prefill?.eraseIndividual(at: until)
            return []
        }
        if erased != nil { logger.info("Pre-Fill individual erased", metadata: ["session": .string(sessionID)]) }
    }

    /// Loads a session, lets `change` edit it and name the events to record, and stores the result
    /// only if nobody changed the session in between (else starts again). Returns the stored session,
    /// or nil when there was no session or `change` returned nil.
    private enum Lookup {
        case id(String)
        case linkKey(String)
        /// As just read: tried first without reading it again.
        case read(Session)
    }

    private func mutate(
        _ lookup: Lookup,
        _ change: (inout Session, Date) -> [SessionEvent.Kind]?
    ) async throws -> Session? {
        var lookup = lookup
        while true {
            let stored: Session?
            switch lookup {
            case .id(let id): stored = try await store.session(id: id)
            case .linkKey(let key): stored = try await store.session(linkKey: key)
            case .read(let session):
                stored = session
                lookup = .id(session.id)
            }
            guard let current = stored else { return nil }
            var session = current
            let now = clock.now()
            guard let kinds = change(&session, now) else { return nil }
            let events = kinds.map { session.record($0, at: now) }
            session.version = current.version + 1
            // Written with the change it reports, so never without it and never lost after it.
            let messages =
                webhooks?.messages(
                    for: session, events: events,
                    bound: current.result?.binding == nil && session.result?.binding != nil, at: now) ?? []
            // The events are announced as soon as they are committed, from wherever that happens.
            let written = try await store.update(
                session, expectedVersion: current.version, appending: events, reporting: messages
            ) { [bus, webhooks, id = session.id] in
                bus.publish(sessionID: id, events: events)
                if !messages.isEmpty { webhooks?.committed() }
            }
            if written {
                if session.state.isTerminal { expiries.finished(session.id) }
                return session
            }
        }
    }
}

extension Session {
    /// Prove's flow is stored with it (or it has ended). Until then it is being made, or the last write
    /// of its create failed and is being retried (`SessionService.keepStarted`).
    var isStarted: Bool { !correlationId.isEmpty || nevis?.isStarted == true || state.isTerminal }
}

/// The flows' own steps as the API takes them: each runs through `step`, the state machine's one way to
/// store what a provider answered after the result.
extension SessionService {
    /// `POST /v1/sessions/{id}/bind` (`UnifyFlow.bind`).
    func bind(sessionID: String, tenant: String, phoneNumber: String?) async throws -> SessionResult.Binding {
        let binding = try await step(sessionID: sessionID, tenant: tenant, busy: SessionError.bindNotAllowed) {
            try await flows.unify.bind($0, phoneNumber: phoneNumber)
        }
        metrics.bound(success: binding.success)
        logger.info("Session bound", metadata: ["session": .string(sessionID), "success": "\(binding.success)"])
        return binding
    }

    /// `POST /v1/sessions/{id}/challenge` (`PrefillFlow.challenge`).
    func challenge(sessionID: String, tenant: String, _ input: PrefillStepBody.Challenge) async throws
        -> PrefillChallengeResponse
    {
        let answer = try await step(sessionID: sessionID, tenant: tenant, busy: Self.anotherStep) {
            try await flows.prefill.challenge($0, input)
        }
        logPrefillStep(.challenge, sessionID, success: answer.success)
        return answer
    }

    /// `POST /v1/sessions/{id}/complete` (`PrefillFlow.complete`).
    func complete(sessionID: String, tenant: String, _ individual: PrefillIndividual) async throws
        -> PrefillCompleteResponse
    {
        let answer = try await step(sessionID: sessionID, tenant: tenant, busy: Self.anotherStep) {
            try await flows.prefill.complete($0, individual)
        }
        logPrefillStep(.complete, sessionID, success: answer.success)
        return answer
    }

    private static let anotherStep = SessionError.stepNotAllowed("Another step of this session is under way.")

    private func logPrefillStep(_ step: PrefillProgress.Step, _ sessionID: String, success: Bool) {
        logger.info(
            "Pre-Fill step taken",
            metadata: ["session": .string(sessionID), "step": .string(step.route), "success": "\(success)"])
    }
}
