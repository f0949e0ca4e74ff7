import Crypto
import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import ProveAPI

/// The one place that changes sessions: it writes the store, then wakes channels through the bus.
final class SessionService: Sendable {
    let store: any SessionStore & ClusterClaims
    let bus: any EventBus
    let prove: any ProveClient
    let clock: any RelayClock
    let metrics: RelayMetrics
    let logger: Logger
    let publicURL: String
    let defaultHold: Int
    /// How long a Pre-Fill individual is kept after the complete step or Prove's 15 minutes.
    let identityRetention: TimeInterval
    let verifications: VerificationQueue
    let expiries: ExpiryQueue
    let lastQuestions = LastQuestions()
    /// Makes the webhook messages written with each change; nil without `--webhook-url`.
    let webhooks: WebhookReporter?
    private let inFlightCreates = Locked<[String: Task<Session, any Error>]>([:])
    /// Binds and Pre-Fill steps under way on this instance: one at a time per session.
    private let steps = Locked<Set<String>>([])

    init(
        store: any SessionStore & ClusterClaims, bus: any EventBus, prove: any ProveClient, clock: any RelayClock,
        metrics: RelayMetrics, logger: Logger, publicURL: String, defaultHold: Int, webhooks: WebhookReporter? = nil,
        identityRetention: TimeInterval = 900
    ) {
        self.webhooks = webhooks
        self.identityRetention = identityRetention
        self.store = store
        self.bus = bus
        self.prove = prove
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        self.publicURL = publicURL
        self.defaultHold = defaultHold
        self.verifications = VerificationQueue()
        self.expiries = ExpiryQueue()
    }

    // MARK: - create

    /// Starts a Prove desktop flow for `tenant` and stores the session with its `waiting` event. A repeat
    /// under the same Idempotency-Key (scoped to the tenant) returns the session it made.
    ///
    /// `legacyKey`: the key as sessions stored before tenants scoped it (per API key), looked up too, once.
    func create(
        _ request: CreateSessionRequest, tenant: String = Tenant.defaultName, idempotencyKey: String?,
        legacyKey: String? = nil
    ) async throws -> Session {
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
        let event = session.record(.waiting(expiresAt: expiresAt), at: now)
        try await store.insert(session, event: event)

        let flow: StartedFlow
        do {
            flow = try await startFlow(request, session, deadline: deadline(for: expiresAt))
        } catch {
            // Nothing was sent: the session goes. Should the store refuse even that, the session, never
            // handed out and with no flow to ask about, ends `expired` at the end of its hold.
            try? await store.discard(sessionID: id)
            if error is ProveClientError {
                log.warning(
                    "Prove refused to start the flow",
                    metadata: ["phone": .string(Secrets.maskedPhone(request.phoneNumber)), "error": "\(error)"])
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
        log.info(
            "Session created",
            metadata: [
                "correlation": .string(flow.correlationId), "flow": .string(session.flow.rawValue), "hold": "\(hold)",
                "tenant": .string(tenant),
            ])
        return session
    }

    /// What Prove's start of a flow gives the session.
    struct StartedFlow: Sendable {
        var correlationId: String
        var authToken: String?
        /// Pre-Fill's first `next`.
        var next: [String: String]?

        func apply(to session: inout Session) {
            session.correlationId = correlationId
            session.authToken = authToken
            if let next { session.prefill = PrefillProgress(next: next) }
            // No link for `none`: Prove knows the outcome now; the verifier asks at once.
            if session.possession == .none { session.verificationPending = true }
        }
    }

    /// `/v3/unify`, or `/v3/start` (desktop) for Pre-Fill: either sends the Instant Link to `finalTargetUrl`.
    private func startFlow(_ request: CreateSessionRequest, _ session: Session, deadline: ContinuousClock.Instant)
        async throws -> StartedFlow
    {
        switch request.flow ?? .unify {
        case .unify:
            let answer = try await prove.unify(
                UnifyRequest(
                    possessionType: session.possession.rawValue, clientRequestId: session.clientRequestId,
                    phoneNumber: request.phoneNumber, finalTargetUrl: session.finalTargetUrl,
                    smsMessage: request.smsMessage, allowOTPRetry: request.allowOTPRetry,
                    checkReputation: request.checkReputation, clientCustomerId: request.clientCustomerId,
                    clientHumanId: request.clientHumanId, deviceId: request.deviceId,
                    emailAddress: request.emailAddress, ipAddress: request.ipAddress, proveId: request.proveId,
                    rebind: request.rebind),
                deadline: deadline)
            return StartedFlow(correlationId: answer.correlationId, authToken: answer.authToken)
        case .prefill:
            let answer = try await prove.prefillStart(
                PrefillStartRequest(
                    flowType: "desktop", finalTargetUrl: session.finalTargetUrl, phoneNumber: request.phoneNumber,
                    dob: request.dob, ssn: request.ssn, emailAddress: request.emailAddress,
                    ipAddress: request.ipAddress, smsMessage: request.smsMessage,
                    allowOTPRetry: request.allowOTPRetry, clientRequestId: session.clientRequestId,
                    clientCustomerId: request.clientCustomerId),
                deadline: deadline)
            metrics.prefillStep(.start, success: true)
            return StartedFlow(correlationId: answer.correlationId, authToken: answer.authToken, next: answer.next)
        }
    }

    /// Stores Prove's answer on a session whose last create write failed, retrying with growing pauses
    /// until the store takes it or the hold ends. Until then a landing is asked about again later (the
    /// verifier waits for the correlationId).
    private func keepStarted(_ id: String, _ flow: StartedFlow, until expiresAt: Date) {
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

    // MARK: - bind

    /// Prove's flow lifetime: a bind or a Pre-Fill step after it is refused (API.md v1.1).
    static let proveFlowLifetime: TimeInterval = 15 * 60

    /// `POST /v1/sessions/{id}/bind`: once the integrator's own possession check passed on a
    /// `possession_required` session, asks `/v3/unify-bind` and keeps Prove's answer as
    /// `result.binding`. Allowed once, within `proveFlowLifetime` of the creation: else `bindNotAllowed` (409).
    /// No channel event.
    func bind(sessionID: String, tenant: String, phoneNumber: String?) async throws -> SessionResult.Binding {
        let session = try await self.session(sessionID, of: tenant)
        guard session.result?.outcome == .possessionRequired, session.result?.binding == nil,
            clock.now() < session.createdAt.addingTimeInterval(Self.proveFlowLifetime),
            steps.withLock({ $0.insert(sessionID).inserted })
        else { throw SessionError.bindNotAllowed }
        defer { _ = steps.withLock { $0.remove(sessionID) } }
        let phone = phoneNumber ?? session.phoneNumber
        let answer = try await prove.unifyBind(
            UnifyBindRequest(
                correlationId: session.correlationId, phoneNumber: phone, clientRequestId: session.clientRequestId),
            deadline: .now + .seconds(10))
        let binding = SessionResult.Binding(
            success: answer.success == "true", phoneNumber: answer.phoneNumber ?? phone, deviceId: answer.deviceId,
            evaluation: answer.evaluation?.mapValues { .init(result: $0.result, failureReasons: $0.failureReasons) },
            at: clock.now())
        var kept = false
        _ = try await mutate(.id(sessionID)) { session, _ in
            guard session.result?.binding == nil else { return nil }
            session.result?.binding = binding
            kept = true
            return []
        }
        guard kept else { throw SessionError.bindNotAllowed }
        metrics.bound(success: binding.success)
        logger.info(
            "Session bound", metadata: ["session": .string(sessionID), "success": "\(binding.success)"])
        return binding
    }

    // MARK: - Pre-Fill steps

    /// `POST /v1/sessions/{id}/challenge`: `/v3/challenge` with a `dob` or `ssn`, or without (Prove then
    /// uses those the create gave). Keeps the individual Prove found and its `next`.
    func challenge(sessionID: String, tenant: String, _ input: PrefillStepBody.Challenge) async throws
        -> PrefillChallengeResponse
    {
        try await prefillStep(.challenge, sessionID: sessionID, tenant: tenant) { session, progress in
            if input.dob == nil, input.ssn == nil, progress.challengeMissing == true {
                throw Problem.invalid([
                    .init(field: "dob", message: "dob or ssn is required: the session was created with neither")
                ])
            }
            let answer = try await prove.prefillChallenge(
                PrefillChallengeRequest(correlationId: session.correlationId, dob: input.dob, ssn: input.ssn),
                deadline: .now + .seconds(10))
            progress.next = answer.next
            progress.individual = answer.individual.map(PrefillIndividual.init)
            progress.individualKeptUntil = nil
            progress.keepIndividual(
                until: session.createdAt.addingTimeInterval(Self.proveFlowLifetime + identityRetention))
            return (answer, answer.success)
        }
    }

    /// `POST /v1/sessions/{id}/complete`: `/v3/complete` with the individual the customer confirmed.
    func complete(sessionID: String, tenant: String, _ individual: PrefillIndividual) async throws
        -> PrefillCompleteResponse
    {
        try await prefillStep(.complete, sessionID: sessionID, tenant: tenant) { session, progress in
            let answer = try await prove.prefillComplete(
                PrefillCompleteRequest(correlationId: session.correlationId, individual: ProveIndividual(individual)),
                deadline: .now + .seconds(10))
            progress.next = answer.next
            progress.completed = answer.success
            progress.keepIndividual(until: clock.now().addingTimeInterval(identityRetention))
            return (answer, answer.success)
        }
    }

    /// One step the backend asks for: only on one of `tenant`'s Pre-Fill sessions (else `notFound`), only
    /// when Prove's last `next` offers it, within Prove's flow lifetime, one at a time (else
    /// `stepNotAllowed`). `ask` calls Prove and notes its answer in the progress, which is stored; nothing
    /// is when Prove fails. An individual whose time is up by then is erased in the same write.
    private func prefillStep<Answer>(
        _ step: PrefillProgress.Step, sessionID: String, tenant: String,
        _ ask: (Session, inout PrefillProgress) async throws -> (Answer, success: Bool)
    ) async throws -> Answer {
        let session = try await self.session(sessionID, of: tenant)
        guard var progress = session.prefill else { throw SessionError.notFound }
        guard clock.now() < session.createdAt.addingTimeInterval(Self.proveFlowLifetime) else {
            throw SessionError.stepNotAllowed("Prove's Pre-Fill flow lasts 15 minutes from the session's creation.")
        }
        let offered = progress.offeredSteps
        guard offered.contains(step) else {
            throw SessionError.stepNotAllowed(
                "Prove's last next does not offer \(step.route); allowed now: "
                    + (offered.isEmpty ? "none" : offered.map(\.route).joined(separator: ", ")) + ".")
        }
        guard steps.withLock({ $0.insert(sessionID).inserted }) else {
            throw SessionError.stepNotAllowed("Another step of this session is under way.")
        }
        defer { _ = steps.withLock { $0.remove(sessionID) } }
        let (answer, success) = try await ask(session, &progress)
        metrics.prefillStep(step == .challenge ? .challenge : .complete, success: success)
        _ = try await mutate(.id(sessionID)) { [progress] session, now in
            session.prefill = progress
            if let until = progress.individualKeptUntil, until <= now { session.prefill?.eraseIndividual(at: now) }
            return []
        }
        logger.info(
            "Pre-Fill step taken",
            metadata: ["session": .string(sessionID), "step": .string(step.route), "success": "\(success)"])
        return answer
    }

    // MARK: - endings

    /// Asks Prove for the session's result: `/v3/unify-status`, or `/v3/validate` for Pre-Fill (with
    /// what the session keeps of its answer), answering by `until`. Nil while Prove says `pending`
    /// (Unify only: `/v3/validate` answers at once, and only once).
    func askProve(_ session: Session, until: Date) async throws -> (result: SessionResult, prefill: PrefillProgress?)? {
        let deadline = deadline(for: until)
        guard session.flow == .prefill else {
            let status = try await prove.unifyStatus(
                UnifyStatusRequest(correlationId: session.correlationId, clientRequestId: session.clientRequestId),
                deadline: deadline)
            return Outcome(proveSuccess: status.success).map { (SessionResult(status, outcome: $0), nil) }
        }
        let answer = try await prove.prefillValidate(
            PrefillValidateRequest(correlationId: session.correlationId), deadline: deadline)
        metrics.prefillStep(.validate, success: answer.success)
        let result = SessionResult(
            outcome: answer.success ? .verified : .failed, proveSuccess: answer.success ? "true" : "false",
            phoneNumber: answer.phoneNumber, clientRequestId: session.clientRequestId,
            evaluation: answer.evaluation?.mapValues { .init(result: $0.result, failureReasons: $0.failureReasons) })
        return (result, PrefillProgress(next: answer.next, challengeMissing: answer.challengeMissing ? true : nil))
    }

    /// Records Prove's answer for `session` (as the verifier read it), and a Pre-Fill session's progress.
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

    /// Ends a session whose hold has passed. Does nothing before that or once it has ended.
    ///
    /// A session that never landed asks Prove once first (`lastQuestion`): the customer may have tapped
    /// with the redirect lost on the way. (The sweeper runs each expiry in a task of its own.)
    func expire(sessionID: String) async throws {
        if let session = try await store.session(id: sessionID), session.state == .waiting,
            !session.verificationPending, session.isStarted, session.isPastHold(at: clock.now()),
            lastQuestions.begin(sessionID)
        {
            return try await lastQuestion(session)
        }
        try await expireNow(sessionID: sessionID)
    }

    /// Asks `/v3/unify-status` once for a session that never landed, within `lastQuestionGrace` past its
    /// hold: `true` ends it `verified` (a `result` with no `tapped` before it), anything else, or no
    /// answer in time, `expired`.
    private func lastQuestion(_ session: Session) async throws {
        defer { lastQuestions.end(session.id) }
        var verified = false
        do {
            if let answer = try await askProve(session, until: session.expiresAt + Self.lastQuestionGrace),
                answer.result.outcome == .verified
            {
                try await finish(session, result: answer.result, prefill: answer.prefill)
                verified = true
            }
        } catch {
            logger.info(
                "No answer to the last question before expiry",
                metadata: ["session": .string(session.id), "error": "\(error)"])
        }
        metrics.lastQuestion(verified: verified)
        // Should this throw, the sweeper tries again later, without asking twice.
        if !verified { try await expireNow(sessionID: session.id) }
        lastQuestions.forget(session.id)
    }

    /// How long past the hold the last question may take.
    static let lastQuestionGrace: TimeInterval = 5

    /// A tapped session whose result Prove did not deliver in time (Prove unreachable, or still
    /// `pending`) ends `failed`, with the last reason the verifier saw; an untapped one `expired`.
    private func expireNow(sessionID: String) async throws {
        let problem = verifications.lastProblem(sessionID)
        let session = try await mutate(.id(sessionID)) { session, now in
            guard !session.state.isTerminal, session.isPastHold(at: now) else { return nil }
            guard session.verificationPending else { return [.expired] }
            session.result = SessionResult(
                outcome: .failed, proveSuccess: nil,
                reason: "No result from Prove before the hold ended: " + (problem ?? "Prove still said pending"))
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

    /// The session when it is `tenant`'s; another tenant's is `notFound`, exactly as an unknown id, after
    /// the same read.
    func session(_ id: String, of tenant: String) async throws -> Session {
        guard let session = try await store.session(id: id), session.owner == tenant else {
            throw SessionError.notFound
        }
        return session
    }

    /// Erases a Pre-Fill individual once its time is up (`--identity-retention`): `prefill.individualErasedAt`
    /// then says when. No event and no webhook go with it.
    func eraseIndividual(sessionID: String) async throws {
        let erased = try await mutate(.id(sessionID)) { session, now in
            guard let until = session.prefill?.individualKeptUntil, until <= now else { return nil }
            session.prefill?.eraseIndividual(at: now)
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

    /// A `ContinuousClock` deadline for Prove calls made for a session that ends at `expiresAt`.
    func deadline(for expiresAt: Date) -> ContinuousClock.Instant {
        let remaining = max(0, expiresAt.timeIntervalSince(clock.now()))
        return .now + .milliseconds(Int64(remaining * 1000))
    }
}

extension Session {
    /// Prove's flow is stored with it (or it has ended). Until then it is being made, or the last write
    /// of its create failed and is being retried (`SessionService.keepStarted`).
    var isStarted: Bool { !correlationId.isEmpty || state.isTerminal }
}
