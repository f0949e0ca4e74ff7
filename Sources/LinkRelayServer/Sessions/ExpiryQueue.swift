import Foundation
import LinkRelayCore
import LinkRelaySupport

/// Hold ends the expiry sweeper waits for, earliest first.
final class ExpiryQueue: Sendable {
    private struct State {
        var heap = DeadlineHeap<String>()
        /// When each session not known to have ended is due. A heap entry that is not here (its
        /// session ended, or was scheduled again) is skipped when it comes up, and dropped by `compact`.
        var deadlines: [String: Date] = [:]
    }

    private let state = Locked(State())

    func schedule(sessionID: String, at date: Date) {
        state.withLock { state in
            state.deadlines[sessionID] = date
            state.heap.insert(sessionID, at: date)
        }
    }

    /// The session ended: it needs no expiry.
    func finished(_ sessionID: String) { _ = state.withLock { $0.deadlines.removeValue(forKey: sessionID) } }

    /// Removes and returns every session due at `now`.
    func due(at now: Date) -> [String] {
        state.withLock { state in
            state.heap.popDue(at: now).compactMap { entry in
                guard state.deadlines[entry.value] == entry.date else { return nil }
                state.deadlines[entry.value] = nil
                return entry.value
            }
        }
    }

    var next: Date? { state.withLock { $0.heap.first?.date } }

    /// How many entries the heap holds, skipped ones included.
    var count: Int { state.withLock { $0.heap.count } }

    /// Drops the entries of sessions that ended, which would otherwise stay until their hold's end.
    func compact() {
        state.withLock { state in
            let deadlines = state.deadlines
            state.heap.removeAll { deadlines[$0.value] != $0.date }
            state.deadlines.releaseUnusedCapacity()
        }
    }
}
