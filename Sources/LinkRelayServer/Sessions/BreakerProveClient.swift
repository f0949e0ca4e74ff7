import Foundation
import LinkRelayCore
import LinkRelaySupport
import ProveAPI

/// The Prove client behind a circuit breaker (security-anchors R3.4). Each call counts once, after
/// the client's own retries: after `failureThreshold` calls in a row that Prove could not answer,
/// calls fail at once with `unavailable` (a create answers 503 without waiting) until the cooldown
/// has passed; then a single probe goes through, and its outcome closes or re-opens the breaker.
struct BreakerProveClient: ProveClient {
    let wrapped: any ProveClient
    let breaker: CircuitBreaker
    let clock: any RelayClock
    /// Told of each call refused at once while open: the ops page and `/metrics` count them.
    var refused: @Sendable () -> Void = {}

    func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse {
        try await guarded { try await wrapped.unify(request, deadline: deadline) }
    }

    func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try await guarded { try await wrapped.unifyStatus(request, deadline: deadline) }
    }

    func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try await guarded { try await wrapped.unifyBind(request, deadline: deadline) }
    }

    func prefillStart(_ request: PrefillStartRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillStartResponse
    {
        try await guarded { try await wrapped.prefillStart(request, deadline: deadline) }
    }

    func prefillValidate(_ request: PrefillValidateRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillValidateResponse
    {
        try await guarded { try await wrapped.prefillValidate(request, deadline: deadline) }
    }

    func prefillChallenge(_ request: PrefillChallengeRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillChallengeResponse
    {
        try await guarded { try await wrapped.prefillChallenge(request, deadline: deadline) }
    }

    func prefillComplete(_ request: PrefillCompleteRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillCompleteResponse
    {
        try await guarded { try await wrapped.prefillComplete(request, deadline: deadline) }
    }

    private func guarded<T>(_ call: () async throws -> T) async throws -> T {
        guard let permit = breaker.acquire(now: clock.now()) else {
            refused()
            throw ProveClientError.unavailable(reason: "circuit breaker open after repeated Prove failures")
        }
        do {
            let value = try await call()
            breaker.record(permit, success: true, now: clock.now())
            return value
        } catch let error as ProveClientError {
            // A refusal (4xx) is an answer: Prove is up, even if it did not like this request.
            if case .rejected = error {
                breaker.record(permit, success: true, now: clock.now())
            } else {
                breaker.record(permit, success: false, now: clock.now())
            }
            throw error
        }
        // Anything else (cancellation) says nothing about Prove; the breaker treats the permit as abandoned.
    }
}
