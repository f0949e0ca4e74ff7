import Foundation
import LinkRelaySupport
import ProveAPI

/// A Prove client that answers from a script, records every call, and can hold `/v3/unify` until a test
/// lets it go: the SessionService's tests talk to it instead of a sandbox.
final class ScriptedProve: ProveClient {
    private struct State {
        var unifyAnswers: [Result<UnifyResponse, ProveClientError>] = []
        var statusAnswers: [Result<UnifyStatusResponse, ProveClientError>] = []
        var unifyCalls: [UnifyRequest] = []
        var statusCalls: [UnifyStatusRequest] = []
        var holdingUnify = false
        var held: [CheckedContinuation<Void, Never>] = []
        var callWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    var unifyCalls: [UnifyRequest] { state.value.unifyCalls }
    var statusCalls: [UnifyStatusRequest] { state.value.statusCalls }

    /// The next `/v3/unify` answers, in order; once they are spent, each call gets a new flow.
    func answerUnify(_ answers: Result<UnifyResponse, ProveClientError>...) {
        state.withLock { $0.unifyAnswers += answers }
    }

    /// The next `/v3/unify-status` answers, in order; once they are spent, `pending`.
    func answerStatus(_ answers: Result<UnifyStatusResponse, ProveClientError>...) {
        state.withLock { $0.statusAnswers += answers }
    }

    /// `/v3/unify` calls wait until `releaseUnify()`.
    func holdUnify() { state.withLock { $0.holdingUnify = true } }

    func releaseUnify() {
        let held = state.withLock { state in
            state.holdingUnify = false
            defer { state.held = [] }
            return state.held
        }
        for call in held { call.resume() }
    }

    /// Returns once Prove has had at least `count` calls of any kind.
    func waitForCalls(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                guard state.unifyCalls.count + state.statusCalls.count < count else { return true }
                state.callWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse {
        let (answer, hold) = record { state in
            state.unifyCalls.append(request)
            let answer =
                state.unifyAnswers.isEmpty
                ? .success(UnifyResponse(success: "pending", correlationId: UUID().uuidString, authToken: "eyJ.test"))
                : state.unifyAnswers.removeFirst()
            return (answer, state.holdingUnify)
        }
        if hold { await withCheckedContinuation { continuation in held(continuation) } }
        return try answer.get()
    }

    func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try record { state in
            state.statusCalls.append(request)
            return state.statusAnswers.isEmpty ? .success(.init(success: "pending")) : state.statusAnswers.removeFirst()
        }.get()
    }

    func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        throw ProveClientError.rejected(status: 400, body: nil)
    }

    // No script for Pre-Fill: the SessionService's tests start Unify flows only, and a Pre-Fill call
    // is refused as Prove refuses a request it does not take.
    func prefillStart(_ request: PrefillStartRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillStartResponse
    { throw ProveClientError.rejected(status: 400, body: nil) }

    func prefillValidate(_ request: PrefillValidateRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillValidateResponse
    { throw ProveClientError.rejected(status: 400, body: nil) }

    func prefillChallenge(_ request: PrefillChallengeRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillChallengeResponse
    { throw ProveClientError.rejected(status: 400, body: nil) }

    func prefillComplete(_ request: PrefillCompleteRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillCompleteResponse
    { throw ProveClientError.rejected(status: 400, body: nil) }

    /// Changes the state, then wakes the tests waiting for this many calls.
    private func record<T>(_ change: (inout State) -> T) -> T {
        let (result, woken) = state.withLock { state -> (T, [CheckedContinuation<Void, Never>]) in
            let result = change(&state)
            let calls = state.unifyCalls.count + state.statusCalls.count
            let woken = state.callWaiters.filter { $0.count <= calls }.map(\.continuation)
            state.callWaiters.removeAll { $0.count <= calls }
            return (result, woken)
        }
        for waiter in woken { waiter.resume() }
        return result
    }

    private func held(_ continuation: CheckedContinuation<Void, Never>) {
        let release = state.withLock { state in
            guard state.holdingUnify else { return true }
            state.held.append(continuation)
            return false
        }
        if release { continuation.resume() }
    }
}
