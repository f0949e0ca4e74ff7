/// A client of Prove's Unify API. Every call takes the flow's absolute deadline: no attempt, retry or backoff
/// sleep goes past it.
public protocol ProveClient: Sendable {
    func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse
    func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
}

/// Observes every HTTP attempt, e.g. for metrics.
public protocol ProveCallObserver: Sendable {
    /// - Parameters:
    ///   - endpoint: "token", "unify", "unify-status" or "unify-bind".
    ///   - status: the HTTP status as a string, or "timeout" / "error".
    ///   - duration: the attempt's duration.
    func proveCall(endpoint: String, status: String, duration: Duration)
}
