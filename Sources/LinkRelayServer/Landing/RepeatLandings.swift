import LinkRelayCore
import LinkRelaySupport
import NIOCore

/// The ended sessions whose final page a phone has seen: a reload of it is answered from memory,
/// without the store or a task (`LandingController.visit`).
///
/// Only what `LandingController` has already answered once as a final page is kept: an ended
/// session never changes, so an entry cannot go stale. Every other landing (the first, one of a
/// session still going, any refusal) asks the store.
final class RepeatLandings: Sendable {
    private struct Entry {
        let authIds: Set<String>
        let rejected: Bool
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        /// Link keys in the order they were first kept.
        var order = CircularBuffer<String>()
    }

    private let capacity: Int
    private let table = Locked(Table())

    init(capacity: Int = 20_000) {
        self.capacity = capacity
    }

    /// Keeps an ended session for its repeat landings. The oldest entry goes first.
    func remember(_ session: Session) {
        guard session.state.isTerminal, session.state != .expired else { return }
        let entry = Entry(authIds: Set(session.seenAuthIds), rejected: session.state == .cancelled)
        table.withLock { table in
            if table.entries.updateValue(entry, forKey: session.linkKey) != nil { return }
            table.order.append(session.linkKey)
            if table.order.count > capacity { table.entries[table.order.removeFirst()] = nil }
        }
    }

    /// For a landing that repeats a seen `authId` of a kept session, whether the phone turned that session
    /// down ("Not me"); nil for any other landing.
    func ended(key: String, authId: String) -> Bool? {
        guard let entry = table.withLock({ $0.entries[key] }), entry.authIds.contains(authId) else { return nil }
        return entry.rejected
    }
}
