import Foundation
import LinkRelayCore
import Logging
import ProveAPI

/// Prove's Unify: `/v3/unify` starts it, `/v3/unify-status` answers, and `/v3/unify-bind` is its own step
/// after a `possession_required` result.
struct UnifyFlow: SessionFlow {
    let prove: any ProveClient
    let clock: any RelayClock

    var kind: Flow { .unify }
    var resultQuestion: String { "unify-status" }

    func start(_ request: CreateSessionRequest, for session: Session, deadline: ContinuousClock.Instant)
        async throws -> FlowStart
    {
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
        return FlowStart(correlationId: answer.correlationId, authToken: answer.authToken)
    }

    func result(of session: Session, deadline: ContinuousClock.Instant) async throws -> FlowAnswer {
        let status = try await prove.unifyStatus(
            UnifyStatusRequest(correlationId: session.correlationId, clientRequestId: session.clientRequestId),
            deadline: deadline)
        guard let outcome = Outcome(proveSuccess: status.success) else { return .pending() }
        return .done(FlowResult(result: SessionResult(status, outcome: outcome)))
    }

    /// The bind (`POST /v1/sessions/{id}/bind`): allowed once, on a `possession_required` result, within
    /// Prove's flow lifetime of the creation (else `bindNotAllowed`, 409). Prove's answer is kept as
    /// `result.binding`, with no channel event.
    func bind(_ session: Session, phoneNumber: String?) async throws -> FlowStep<SessionResult.Binding> {
        guard session.flow == .unify else { throw SessionError.stepNotOffered(flow: session.flow, step: "bind") }
        guard session.result?.outcome == .possessionRequired, session.result?.binding == nil,
            clock.now() < session.createdAt.addingTimeInterval(SessionService.proveFlowLifetime)
        else { throw SessionError.bindNotAllowed }
        guard let phone = phoneNumber ?? session.phoneNumber else {
            throw Problem.invalid([
                .init(field: "phoneNumber", message: "is required: the session was created without one")
            ])
        }
        let answer = try await prove.unifyBind(
            UnifyBindRequest(
                correlationId: session.correlationId, phoneNumber: phone, clientRequestId: session.clientRequestId),
            deadline: .now + .seconds(10))
        let binding = SessionResult.Binding(
            success: answer.success == "true", phoneNumber: answer.phoneNumber ?? phone, deviceId: answer.deviceId,
            evaluation: answer.evaluation?.mapValues { .init(result: $0.result, failureReasons: $0.failureReasons) },
            at: clock.now())
        return FlowStep(answer: binding) { session, _ in
            guard session.result?.binding == nil else { return false }
            session.result?.binding = binding
            return true
        }
    }
}

extension SessionResult {
    init(_ status: UnifyStatusResponse, outcome: Outcome) {
        self.init(
            outcome: outcome, proveSuccess: status.success, phoneNumber: status.phoneNumber, proveId: status.proveId,
            deviceId: status.deviceId, clientHumanId: status.clientHumanId, clientRequestId: status.clientRequestId,
            evaluation: status.evaluation?.mapValues {
                Evaluation(result: $0.result, failureReasons: $0.failureReasons)
            })
    }
}
