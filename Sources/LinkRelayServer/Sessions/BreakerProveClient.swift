import Foundation
import LinkRelayCore
import LinkRelaySupport
import NevisAPI
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
        try await breaker.guarded(
            clock: clock, refused: refused,
            open: ProveClientError.unavailable(reason: "circuit breaker open after repeated Prove failures"),
            answered: { error in
                guard let error = error as? ProveClientError else { return nil }
                if case .rejected = error { return true }
                return false
            }, call)
    }
}

/// The Nevis client behind its own circuit breaker, as Prove's is.
struct BreakerNevisClient: NevisClient {
    let wrapped: any NevisClient
    let breaker: CircuitBreaker
    let clock: any RelayClock
    var refused: @Sendable () -> Void = {}

    func start(_ approval: NevisApproval, deadline: ContinuousClock.Instant) async throws -> NevisStarted {
        try await guarded { try await wrapped.start(approval, deadline: deadline) }
    }

    func status(_ handle: String, deadline: ContinuousClock.Instant) async throws -> NevisStatus {
        try await guarded { try await wrapped.status(handle, deadline: deadline) }
    }

    private func guarded<T>(_ call: () async throws -> T) async throws -> T {
        try await breaker.guarded(
            clock: clock, refused: refused,
            open: NevisClientError.unavailable(reason: "circuit breaker open after repeated Nevis failures"),
            answered: { error in
                guard let error = error as? NevisClientError else { return nil }
                if case .rejected = error { return true }
                return false
            }, call)
    }
}

extension CircuitBreaker {
    /// Runs a provider's call under the breaker: refused at once with `open` while it is open.
    /// `answered` reads a failure: true for a refusal (4xx: an answer, the provider is up), false for
    /// one it could not answer, nil for anything else (cancellation), which says nothing about the
    /// provider: the permit is then abandoned.
    func guarded<T>(
        clock: any RelayClock, refused: () -> Void, open: @autoclosure () -> any Error,
        answered: (any Error) -> Bool?, _ call: () async throws -> T
    ) async throws -> T {
        guard let permit = acquire(now: clock.now()) else {
            refused()
            throw open()
        }
        do {
            let value = try await call()
            record(permit, success: true, now: clock.now())
            return value
        } catch {
            if let up = answered(error) { record(permit, success: up, now: clock.now()) }
            throw error
        }
    }
}
