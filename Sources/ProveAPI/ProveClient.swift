/// A client of Prove's Unify and Pre-Fill APIs. Every call takes the flow's absolute deadline: no attempt,
/// retry or backoff sleep goes past it.
public protocol ProveClient: Sendable {
    func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse
    func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse

    /// `POST /v3/start`: starts a Pre-Fill flow; a desktop flow sends the Instant Link SMS.
    func prefillStart(_ request: PrefillStartRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillStartResponse
    /// `POST /v3/validate`: whether possession passed, and which step comes next.
    func prefillValidate(_ request: PrefillValidateRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillValidateResponse
    /// `POST /v3/challenge`: the individual, given a date of birth or SSN.
    func prefillChallenge(_ request: PrefillChallengeRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillChallengeResponse
    /// `POST /v3/complete`: verifies the individual the customer confirmed.
    func prefillComplete(_ request: PrefillCompleteRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillCompleteResponse
}

/// Observes every HTTP attempt, e.g. for metrics.
public protocol ProveCallObserver: Sendable {
    /// - Parameters:
    ///   - endpoint: "token", "unify", "unify-status", "unify-bind", "start", "validate", "challenge" or
    ///     "complete".
    ///   - status: the HTTP status as a string, or "timeout" / "error".
    ///   - duration: the attempt's duration.
    func proveCall(endpoint: String, status: String, duration: Duration)
}
