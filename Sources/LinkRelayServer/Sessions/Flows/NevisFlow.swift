import Foundation
import LinkRelayCore
import NevisAPI

/// A Nevis out-of-band approval: the relay starts the operation (Auth Cloud's approval, nevisFIDO's
/// dispatch), and since the phone answers Nevis, never the relay, the verifier asks Nevis's status from the
/// start: about once a second at first, backing off to every 5 s, with jitter so that sessions created
/// together do not ask together. Its mapping: the app has the operation → `tapped`; `succeeded` →
/// `verified`; `failed` (a denial, or Nevis's own timeout) → `failed`; `unknown` or a failed dispatch →
/// `failed` with a reason; the hold's end → `expired`, after one last question.
struct NevisFlow: SessionFlow {
    /// Nil without `--nevis`: creates are refused (422) before they reach the flow, and a session stored
    /// while the relay ran with it fails at the end of its hold with the reason every question gives.
    let client: (any NevisClient)?
    /// The jitter's source: uniform in `0..<1`.
    var random: @Sendable () -> Double = { Double.random(in: 0..<1) }

    var kind: Flow { .nevis }
    var provider: String { "Nevis" }
    var resultQuestion: String { "status" }
    var asksFromStart: Bool { true }

    static let firstPause: TimeInterval = 1
    static let longestPause: TimeInterval = 5

    func pause(afterPending count: Int) -> TimeInterval {
        let pause = min(Self.longestPause, Self.firstPause * pow(1.25, Double(max(count - 1, 0))))
        return pause * (0.8 + 0.4 * random())
    }

    func start(_ request: CreateSessionRequest, for session: Session, deadline: ContinuousClock.Instant)
        async throws -> FlowStart
    {
        let client = try configured()
        let channel = NevisChannel(rawValue: session.nevis?.channel ?? "app") ?? .app
        let started = try await client.start(
            NevisApproval(
                username: request.username, userId: request.userId, message: request.message, channel: channel),
            deadline: deadline)
        return FlowStart(
            nevis: NevisOperation(
                handle: started.handle, channel: channel.rawValue, username: request.username,
                userId: request.userId, transactionId: started.transactionId, qrCode: started.qrCode,
                appLink: started.appLink, dispatchFailure: started.dispatchFailure))
    }

    func result(of session: Session, deadline: ContinuousClock.Instant) async throws -> FlowAnswer {
        guard let operation = session.nevis else { throw NevisClientError.unavailable(reason: "not a Nevis session") }
        if let failure = operation.dispatchFailure {
            return .done(
                Self.result(
                    .failed, status: failure, operation,
                    reason: "Nevis could not dispatch the operation (dispatchResult \(failure))"))
        }
        let status = try await configured().status(operation.handle, deadline: deadline)
        switch status.progress {
        case .pending: return .pending()
        case .redeemed: return .pending(phoneHasIt: true)
        case .succeeded: return .done(Self.result(.verified, status: status.status, operation, status))
        case .failed: return .done(Self.result(.failed, status: status.status, operation, status))
        case .unknown:
            return .done(
                Self.result(
                    .failed, status: status.status, operation, status,
                    reason: "Nevis does not know the operation (status unknown)"))
        }
    }

    private func configured() throws -> any NevisClient {
        guard let client else { throw NevisClientError.unavailable(reason: "the relay runs without --nevis") }
        return client
    }

    /// The session's result: Nevis's identity of the user where it gave one (a usernameless operation's
    /// only once succeeded), else the create's.
    private static func result(
        _ outcome: Outcome, status: String, _ operation: NevisOperation, _ answer: NevisStatus? = nil,
        reason: String? = nil
    ) -> FlowResult {
        var result = SessionResult(outcome: outcome, proveSuccess: nil, reason: reason)
        result.nevis = NevisResult(
            transactionId: answer?.transactionId ?? operation.transactionId,
            userId: answer?.userId ?? operation.userId, username: answer?.username ?? operation.username,
            status: status)
        return FlowResult(result: result)
    }
}
