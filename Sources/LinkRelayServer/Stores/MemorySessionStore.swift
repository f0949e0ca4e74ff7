import LinkRelayCore
import LinkRelaySupport

/// Sessions in this process's memory only: for tests and throw-away runs. A restart loses everything.
final class MemorySessionStore: SessionStore {
    private struct State {
        var sessions: [String: Session] = [:]
        var events: [String: [SessionEvent]] = [:]
        var byLinkKey: [String: String] = [:]
        var byIdempotencyKey: [String: String] = [:]
    }

    private let state = Locked(State())

    func insert(_ session: Session, event: SessionEvent) async throws {
        try state.withLock { state in
            if let key = session.idempotencyKey {
                guard state.byIdempotencyKey[key] == nil else { throw StoreError.duplicateIdempotencyKey }
                state.byIdempotencyKey[key] = session.id
            }
            state.sessions[session.id] = session
            state.events[session.id] = [event]
            state.byLinkKey[session.linkKey] = session.id
        }
    }

    func discard(sessionID: String) async throws {
        state.withLock { state in
            guard let session = state.sessions.removeValue(forKey: sessionID) else { return }
            state.events[sessionID] = nil
            state.byLinkKey[session.linkKey] = nil
            if let key = session.idempotencyKey { state.byIdempotencyKey[key] = nil }
        }
    }

    func update(
        _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
        committed: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        let stored = state.withLock { state in
            guard state.sessions[session.id]?.version == expectedVersion else { return false }
            state.sessions[session.id] = session
            state.events[session.id, default: []].append(contentsOf: events)
            return true
        }
        if stored { committed() }
        return stored
    }

    func session(id: String) async throws -> Session? { sessionInMemory(id: id) }

    func session(linkKey: String) async throws -> Session? {
        state.withLock { state in state.byLinkKey[linkKey].flatMap { state.sessions[$0] } }
    }

    func session(idempotencyKey: String) async throws -> Session? {
        state.withLock { state in state.byIdempotencyKey[idempotencyKey].flatMap { state.sessions[$0] } }
    }

    func events(sessionID: String, after: Int) async throws -> [SessionEvent] {
        eventsInMemory(sessionID: sessionID, after: after) ?? []
    }

    func sessionInMemory(id: String) -> Session? { state.withLock { $0.sessions[id] } }

    func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]? {
        state.withLock { state in state.events[sessionID]?.filter { $0.seq > after } }
    }

    func activeSessions() async throws -> [Session] {
        state.withLock { state in state.sessions.values.filter { !$0.state.isTerminal } }
    }

    func ping() async throws {}

    func close() async throws {}
}
