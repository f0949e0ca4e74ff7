import Foundation
import LinkRelayCore
import NevisAPI
import ProveAPI

/// A provider's flow behind the one state machine (`SessionService`): how it starts, and what it answers
/// when asked for a session's result. What every flow shares stays in the state machine: the stored
/// session and its link, the landing and the finish hook (the phone acted: the verifier asks), the hold
/// and its expiry, cancel. A flow's own steps after the result (Unify's bind, Pre-Fill's challenge and
/// complete) are methods of its type, run through `SessionService.step`. Nevis is the second provider:
/// its phone never lands here, so the verifier asks it from the start (`asksFromStart`).
protocol SessionFlow: Sendable {
    /// The sessions this flow serves (`Session.flow`).
    var kind: Flow { get }
    /// The provider, as logs and reasons name it.
    var provider: String { get }
    /// The provider's question for a result, as logs and reasons name it (`unify-status`).
    var resultQuestion: String { get }
    /// Starts the provider's flow for a stored `session`: the provider sends the link to the session's
    /// `finalTargetUrl`. Throws when the provider refuses; nothing is sent then.
    func start(_ request: CreateSessionRequest, for session: Session, deadline: ContinuousClock.Instant)
        async throws -> FlowStart
    /// The provider's result for a session the phone acted on, or that it is still pending.
    func result(of session: Session, deadline: ContinuousClock.Instant) async throws -> FlowAnswer
    /// Asked once as the hold of a session ends without a result: of one that never landed, as the
    /// redirect may have been lost on the way (only a verified answer counts then); of every live
    /// session of a flow that `asksFromStart` (any final answer counts).
    func lastQuestion(_ session: Session, deadline: ContinuousClock.Instant) async throws -> FlowAnswer
    /// True for a flow whose phone never lands on the relay: its provider is asked from the start, with
    /// `pause(afterPending:)` between questions, and the hold's end is `expired`.
    var asksFromStart: Bool { get }
    /// How long to wait after the `count`th pending answer in a row.
    func pause(afterPending count: Int) -> TimeInterval
}

extension SessionFlow {
    func lastQuestion(_ session: Session, deadline: ContinuousClock.Instant) async throws -> FlowAnswer {
        try await result(of: session, deadline: deadline)
    }

    var provider: String { "Prove" }

    var asksFromStart: Bool { false }

    /// Prove answers pending for a moment after a landing: asked again each second.
    func pause(afterPending count: Int) -> TimeInterval { 1 }
}

/// A provider's refusal of a question itself (a 4xx): asking again cannot help.
protocol ProviderRefusal: Error {
    /// What the provider refused it with ("400 (code 8003)"); nil for an error that is no refusal.
    var refusal: String? { get }
}

extension ProveClientError: ProviderRefusal {
    var refusal: String? {
        guard case .rejected(let status, let body) = self else { return nil }
        return "\(status)" + (body?.code.map { " (code \($0))" } ?? "")
    }
}

extension NevisClientError: ProviderRefusal {
    var refusal: String? {
        guard case .rejected(let status, let detail) = self else { return nil }
        return "\(status)" + (detail.map { " (\($0))" } ?? "")
    }
}

/// What the provider says when asked for a result.
enum FlowAnswer: Sendable {
    /// No result yet. `phoneHasIt`: the provider says the phone's app has the operation (Nevis's redeemed
    /// token), which counts as the tap.
    case pending(phoneHasIt: Bool = false)
    case done(FlowResult)
}

/// What a provider's start gives the session.
struct FlowStart: Sendable {
    var correlationId: String = ""
    var authToken: String?
    /// Pre-Fill's first `next`.
    var next: [String: String]?
    /// Nevis's operation.
    var nevis: NevisOperation?

    func apply(to session: inout Session) {
        session.correlationId = correlationId
        session.authToken = authToken
        if let next { session.prefill = PrefillProgress(next: next) }
        if let nevis { session.nevis = nevis }
        // No link for `none`, and none at all for Nevis: the verifier asks at once.
        if session.possession == .none || nevis != nil { session.verificationPending = true }
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
    let nevis: NevisFlow

    func serving(_ kind: Flow) -> any SessionFlow {
        switch kind {
        case .unify: unify
        case .prefill: prefill
        case .nevis: nevis
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
