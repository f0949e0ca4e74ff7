import Foundation
import LinkRelayCore

/// A provider's flow behind the one state machine (`SessionService`): how it starts, and what it answers
/// when asked for a session's result. What every flow shares stays in the state machine: the stored
/// session and its link, the landing and the finish hook (the phone acted: the verifier asks), the hold
/// and its expiry, cancel. A flow's own steps after the result (Unify's bind, Pre-Fill's challenge and
/// complete) are methods of its type, run through `SessionService.step`. A second provider is a new
/// type like these, its client and its simulator, and a line in `Flows`.
protocol SessionFlow: Sendable {
    /// The sessions this flow serves (`Session.flow`).
    var kind: Flow { get }
    /// The provider's question for a result, as logs and reasons name it (`unify-status`).
    var resultQuestion: String { get }
    /// Starts the provider's flow for a stored `session`: the provider sends the link to the session's
    /// `finalTargetUrl`. Throws when the provider refuses; nothing is sent then.
    func start(_ request: CreateSessionRequest, for session: Session, deadline: ContinuousClock.Instant)
        async throws -> FlowStart
    /// The provider's result for a session the phone acted on; nil while the provider says it is pending.
    func result(of session: Session, deadline: ContinuousClock.Instant) async throws -> FlowResult?
    /// Asked once as the hold of a session that never landed ends (the redirect may have been lost on
    /// the way): only a verified answer counts.
    func lastQuestion(_ session: Session, deadline: ContinuousClock.Instant) async throws -> FlowResult?
}

extension SessionFlow {
    func lastQuestion(_ session: Session, deadline: ContinuousClock.Instant) async throws -> FlowResult? {
        try await result(of: session, deadline: deadline)
    }
}

/// What a provider's start gives the session.
struct FlowStart: Sendable {
    var correlationId: String
    var authToken: String?
    /// Pre-Fill's first `next`.
    var next: [String: String]?

    func apply(to session: inout Session) {
        session.correlationId = correlationId
        session.authToken = authToken
        if let next { session.prefill = PrefillProgress(next: next) }
        // No link for `none`: the provider knows the outcome now; the verifier asks at once.
        if session.possession == .none { session.verificationPending = true }
    }
}

/// A provider's result, with what it brings of the flow's own progress (Pre-Fill's `next`).
struct FlowResult: Sendable {
    var result: SessionResult
    var prefill: PrefillProgress? = nil
}

/// What one of a flow's own steps brought: the provider's answer, and the change it makes to the session
/// (false: the session no longer takes it, and nothing is stored).
struct FlowStep<Answer: Sendable>: Sendable {
    var answer: Answer
    var change: @Sendable (inout Session, Date) -> Bool
}

/// The relay's flows, one per `Flow`.
struct Flows: Sendable {
    let unify: UnifyFlow
    let prefill: PrefillFlow

    func serving(_ kind: Flow) -> any SessionFlow {
        switch kind {
        case .unify: unify
        case .prefill: prefill
        }
    }
}

extension RelayClock {
    /// A `ContinuousClock` deadline for provider calls made for a session that ends at `date`.
    func deadline(for date: Date) -> ContinuousClock.Instant {
        let remaining = max(0, date.timeIntervalSince(now()))
        return .now + .milliseconds(Int64(remaining * 1000))
    }
}
