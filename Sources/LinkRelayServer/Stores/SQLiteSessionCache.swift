import LinkRelayCore
import LinkRelaySupport
import NIOCore

/// Sessions as last committed, by id and by link key, with their events when this process has seen all
/// of them (it created the session): every live one (up to `liveCapacity`), and the `endedCapacity`
/// that ended last, which a desktop's next long-poll and a phone's reload still ask about. Those are
/// asked about within seconds: an ended session is dropped at the second `release()` after it ended.
struct SQLiteSessionCache {
    struct Entry {
        var session: Session
        var events: [SessionEvent]?
    }

    let liveCapacity: Int
    let endedCapacity: Int
    private var live: [String: Entry] = [:]
    private var ended: [String: Entry] = [:]
    /// Ended ids in the order they ended; the first `releasable` were already there at the last `release()`.
    private var endedOrder = CircularBuffer<String>()
    private var releasable = 0
    private var idByLinkKey: [String: String] = [:]

    init(liveCapacity: Int, endedCapacity: Int) {
        self.liveCapacity = liveCapacity
        self.endedCapacity = endedCapacity
    }

    func entry(id: String) -> Entry? { live[id] ?? ended[id] }

    /// The room the ring of ended ids holds; `release` gives it back once the ring is empty.
    var endedRoom: Int { endedOrder.capacity }

    func entry(linkKey: String) -> Entry? { idByLinkKey[linkKey].flatMap(entry(id:)) }

    mutating func inserted(_ session: Session, _ event: SessionEvent) {
        keep(Entry(session: session, events: [event]))
    }

    mutating func updated(_ session: Session, appending events: [SessionEvent]) {
        // A session first seen here after a restart has events only the file knows.
        keep(Entry(session: session, events: entry(id: session.id)?.events.map { $0 + events }))
    }

    mutating func forget(_ session: Session) {
        live[session.id] = nil
        ended[session.id] = nil
        idByLinkKey[session.linkKey] = nil
    }

    private mutating func keep(_ entry: Entry) {
        let id = entry.session.id
        guard entry.session.state.isTerminal else {
            guard live[id] != nil || live.count < liveCapacity else { return }
            live[id] = entry
            idByLinkKey[entry.session.linkKey] = id
            return
        }
        live[id] = nil
        idByLinkKey[entry.session.linkKey] = id
        guard ended.updateValue(entry, forKey: id) == nil else { return }
        endedOrder.append(id)
        if endedOrder.count > endedCapacity { dropOldestEnded() }
    }

    /// Drops the ended sessions that were already kept at the last call, and the room that sessions
    /// no longer kept took (the ring of ended ids too, once it is empty).
    mutating func release() {
        for _ in 0..<releasable { dropOldestEnded() }
        if endedOrder.isEmpty { endedOrder.removeAll() }
        releasable = endedOrder.count
        live.releaseUnusedCapacity()
        ended.releaseUnusedCapacity()
        idByLinkKey.releaseUnusedCapacity()
    }

    private mutating func dropOldestEnded() {
        if let evicted = ended.removeValue(forKey: endedOrder.removeFirst()) {
            idByLinkKey[evicted.session.linkKey] = nil
        }
        releasable = max(0, releasable - 1)
    }
}
