import Foundation
import LinkRelayCore
import LinkRelaySupport

/// Sessions the verifier asks Prove about, one task each, and why the last attempt for each failed.
///
/// While the `Verifier` runs, a kick starts the session's verification at once, in a task of its
/// own; before it starts (or after it stopped), kicks wait for its start. A session is verified by one
/// task at a time: a kick while one runs changes nothing, as that task reads the session again before
/// each question.
final class VerificationQueue: Sendable {
    typealias Verify = @Sendable (String) async -> Void

    private struct State {
        /// Set while the verifier runs.
        var verify: Verify?
        var kicked: [String] = []
        var running: [String: Task<Void, Never>] = [:]
    }

    private let state = Locked(State())
    private let problems = Locked<[String: String]>([:])

    func kick(_ sessionID: String) {
        state.withLock { state in
            guard let verify = state.verify else { return state.kicked.append(sessionID) }
            launch(sessionID, verify, &state)
        }
    }

    /// Starts verifying with `verify`, first the sessions kicked before.
    func start(_ verify: @escaping Verify) {
        state.withLock { state in
            state.verify = verify
            for id in state.kicked { launch(id, verify, &state) }
            state.kicked = []
        }
    }

    /// Cancels the verifications under way and returns once they have ended; later kicks are kept.
    func stop() async {
        let tasks = state.withLock { state in
            state.verify = nil
            return Array(state.running.values)
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    private func launch(_ sessionID: String, _ verify: @escaping Verify, _ state: inout State) {
        guard state.running[sessionID] == nil else { return }
        // Detached: a verification belongs to no request, and so copies none of its task-local values.
        state.running[sessionID] = Task.detached(executorPreference: EventLoopTaskExecutor.current) {
            await verify(sessionID)
            _ = self.state.withLock { $0.running.removeValue(forKey: sessionID) }
        }
    }

    /// Remembers why asking Prove failed, for the reason of a session that fails at the end of its hold.
    func noteProblem(_ sessionID: String, _ problem: String) { problems.withLock { $0[sessionID] = problem } }

    func lastProblem(_ sessionID: String) -> String? { problems.withLock { $0[sessionID] } }

    func forget(_ sessionID: String) { _ = problems.withLock { $0.removeValue(forKey: sessionID) } }
}
