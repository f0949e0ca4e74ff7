import LinkRelaySupport

/// The sessions whose last question to Prove (`Verifier.expire`) is asked or in flight. Each is
/// asked once, however often the sweeper comes back to it; and at most `maximum` are in flight at
/// once, so that a wave of expiries while Prove is slow cannot pile up calls: past it, sessions expire
/// without asking.
final class LastQuestions: Sendable {
    static let maximum = 256

    private struct State {
        var asked: Set<String> = []
        var inFlight = 0
    }

    private let state = Locked(State())

    /// True when the question for `sessionID` is to be asked now.
    func begin(_ sessionID: String) -> Bool {
        state.withLock { state in
            guard state.inFlight < Self.maximum, state.asked.insert(sessionID).inserted else { return false }
            state.inFlight += 1
            return true
        }
    }

    /// The question was answered (or not in time). The session stays marked as asked until it has
    /// ended (`forget`).
    func end(_ sessionID: String) {
        state.withLock { $0.inFlight -= 1 }
    }

    /// The session has ended.
    func forget(_ sessionID: String) {
        _ = state.withLock { $0.asked.remove(sessionID) }
    }
}
