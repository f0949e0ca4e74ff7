import Foundation
import LinkRelayCore
import ProveAPI

/// Prove's Pre-Fill on the desktop: `/v3/start` starts it, `/v3/validate` answers (once), and its own steps
/// are `/v3/challenge` and `/v3/complete`, as Prove's last `next` offers them.
struct PrefillFlow: SessionFlow {
    let prove: any ProveClient
    let clock: any RelayClock
    let metrics: RelayMetrics
    /// How long an individual is kept after the complete step or Prove's 15 minutes.
    let identityRetention: TimeInterval

    var kind: Flow { .prefill }
    var resultQuestion: String { "validate" }

    func start(_ request: CreateSessionRequest, for session: Session, deadline: ContinuousClock.Instant)
        async throws -> FlowStart
    {
        let answer = try await prove.prefillStart(
            PrefillStartRequest(
                flowType: "desktop", finalTargetUrl: session.finalTargetUrl, phoneNumber: request.phoneNumber,
                dob: request.dob, ssn: request.ssn, emailAddress: request.emailAddress,
                ipAddress: request.ipAddress, smsMessage: request.smsMessage,
                allowOTPRetry: request.allowOTPRetry),
            deadline: deadline)
        metrics.prefillStep(.start, success: true)
        return FlowStart(correlationId: answer.correlationId, authToken: answer.authToken, next: answer.next)
    }

    /// `/v3/validate` answers at once, and only once: never nil.
    func result(of session: Session, deadline: ContinuousClock.Instant) async throws -> FlowAnswer {
        let answer = try await prove.prefillValidate(
            PrefillValidateRequest(correlationId: session.correlationId), deadline: deadline)
        metrics.prefillStep(.validate, success: answer.success)
        let result = SessionResult(
            outcome: answer.success ? .verified : .failed, proveSuccess: answer.success ? "true" : "false",
            phoneNumber: answer.phoneNumber, clientRequestId: session.clientRequestId,
            evaluation: answer.evaluation?.mapValues { .init(result: $0.result, failureReasons: $0.failureReasons) })
        return .done(
            FlowResult(
                result: result,
                prefill: PrefillProgress(next: answer.next, challengeMissing: answer.challengeMissing ? true : nil)))
    }

    /// `POST /v1/sessions/{id}/challenge`: `/v3/challenge` with a `dob` or `ssn`, or without (Prove then
    /// uses those the create gave). Keeps the individual Prove found and its `next`.
    func challenge(_ session: Session, _ input: PrefillStepBody.Challenge) async throws
        -> FlowStep<PrefillChallengeResponse>
    {
        try await step(.challenge, session) { progress in
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
                until: session.createdAt.addingTimeInterval(SessionService.proveFlowLifetime + identityRetention))
            return (answer, answer.success)
        }
    }

    /// `POST /v1/sessions/{id}/complete`: `/v3/complete` with the individual the customer confirmed.
    func complete(_ session: Session, _ individual: PrefillIndividual) async throws
        -> FlowStep<PrefillCompleteResponse>
    {
        try await step(.complete, session) { progress in
            let answer = try await prove.prefillComplete(
                PrefillCompleteRequest(correlationId: session.correlationId, individual: ProveIndividual(individual)),
                deadline: .now + .seconds(10))
            progress.next = answer.next
            progress.completed = answer.success
            progress.keepIndividual(until: clock.now().addingTimeInterval(identityRetention))
            return (answer, answer.success)
        }
    }

    /// One step: only on a Pre-Fill session (else `stepNotOffered`), only when Prove's last `next` offers it and
    /// within Prove's flow lifetime (else `stepNotAllowed`). `ask` calls Prove and notes its answer in the
    /// progress, which the change stores; an individual whose time is up by then is erased in that write.
    private func step<Answer: Sendable>(
        _ step: PrefillProgress.Step, _ session: Session,
        _ ask: (inout PrefillProgress) async throws -> (Answer, success: Bool)
    ) async throws -> FlowStep<Answer> {
        guard var progress = session.prefill else {
            throw SessionError.stepNotOffered(flow: session.flow, step: step.route)
        }
        guard clock.now() < session.createdAt.addingTimeInterval(SessionService.proveFlowLifetime) else {
            throw SessionError.stepNotAllowed("Prove's Pre-Fill flow lasts 15 minutes from the session's creation.")
        }
        let offered = progress.offeredSteps
        guard offered.contains(step) else {
            throw SessionError.stepNotAllowed(
                "Prove's last next does not offer \(step.route); allowed now: "
                    + (offered.isEmpty ? "none" : offered.map(\.route).joined(separator: ", ")) + ".")
        }
        let (answer, success) = try await ask(&progress)
        metrics.prefillStep(step == .challenge ? .challenge : .complete, success: success)
        return FlowStep(answer: answer) { [progress] session, now in
            session.prefill = progress
            if let until = progress.individualKeptUntil, until <= now { session.prefill?.eraseIndividual(at: now) }
            return true
        }
    }
}
