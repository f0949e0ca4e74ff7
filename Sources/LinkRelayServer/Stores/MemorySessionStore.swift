import Foundation
import LinkRelayCore
import LinkRelaySupport

/// Sessions in this process's memory only: for tests and throw-away runs. A restart loses everything.
final class MemorySessionStore: RelayStore {
    private struct State {
        var sessions: [String: Session] = [:]
        var events: [String: [SessionEvent]] = [:]
        var byLinkKey: [String: String] = [:]
        var byIdempotencyKey: [String: String] = [:]
        var webhooks: [String: WebhookMessage] = [:]
        /// The ids of the pending messages: claims look through these, not through the delivered and
        /// failed ones kept for the listing (tens of thousands after an hour at a few a second).
        var pending: Set<String> = []
        /// Claimed messages, until when: `makeRetriesDue` leaves them to their sender.
        var leases: [String: Date] = [:]

        var pendingMessages: [WebhookMessage] { pending.compactMap { webhooks[$0] } }

        mutating func put(_ message: WebhookMessage) {
            webhooks[message.id] = message
            if message.state == .pending { pending.insert(message.id) } else { pending.remove(message.id) }
        }
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
        reporting messages: [WebhookMessage],
        committed: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        let stored = state.withLock { state in
            guard state.sessions[session.id]?.version == expectedVersion else { return false }
            state.sessions[session.id] = session
            state.events[session.id, default: []].append(contentsOf: events)
            for message in messages { state.put(message) }
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

    /// Its sessions are the truth, not a cache: nothing to give back.
    func releaseMemory() async {}

    func activeSessions() async throws -> [Session] {
        state.withLock { state in state.sessions.values.filter { !$0.state.isTerminal } }
    }

    func sessionsWithIndividual(keptUntil date: Date, limit: Int) async throws -> [String] {
        state.withLock { state in
            state.sessions.values.compactMap { session in
                session.prefill?.individualKeptUntil.flatMap { $0 <= date ? (session.id, $0) : nil }
            }.sorted { $0.1 < $1.1 }.prefix(limit).map(\.0)
        }
    }

    func deleteSessions(endedBefore date: Date, limit: Int) async throws -> Int {
        state.withLock { state in
            let ended = state.sessions.values.filter { $0.endedAt.map { $0 < date } ?? false }.prefix(limit)
            for session in ended {
                state.sessions[session.id] = nil
                state.events[session.id] = nil
                state.byLinkKey[session.linkKey] = nil
                if let key = session.idempotencyKey { state.byIdempotencyKey[key] = nil }
            }
            return ended.count
        }
    }

    func ping() async throws {}

    // MARK: - webhook outbox

    func claimWebhooks(tenant: String, dueBy now: Date, leaseUntil: Date, limit: Int) async throws
        -> [WebhookMessage]
    {
        state.withLock { state in
            let due = state.pendingMessages.filter {
                $0.tenant == tenant && $0.nextAttemptAt <= now
            }
            .sorted { ($0.nextAttemptAt, WebhookCursor($0)) < ($1.nextAttemptAt, WebhookCursor($1)) }.prefix(limit)
            return due.map { message in
                state.webhooks[message.id]?.nextAttemptAt = leaseUntil
                state.leases[message.id] = leaseUntil
                return message
            }
        }
    }

    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
        state.withLock { state in
            for message in messages where state.webhooks[message.id] != nil {
                state.put(message)
                state.leases[message.id] = nil
            }
        }
    }

    func webhookMessages(tenant: String, _ listing: WebhookListing) async throws -> [WebhookMessage] {
        state.withLock { state in
            Array(
                state.webhooks.values.filter { $0.tenant == tenant && listing.includes($0) }
                    .sorted { WebhookCursor($0) > WebhookCursor($1) }.prefix(listing.limit))
        }
    }

    func makeRetriesDue(tenant: String, now: Date) async throws -> Int {
        state.withLock { state in
            let waiting = state.pendingMessages.filter {
                $0.tenant == tenant && $0.nextAttemptAt > now && (state.leases[$0.id].map { $0 <= now } ?? true)
            }
            for message in waiting { state.webhooks[message.id]?.nextAttemptAt = message.createdAt }
            return waiting.count
        }
    }

    func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage? {
        state.withLock { state in
            guard var message = state.webhooks[id], message.tenant == tenant else { return nil }
            message.state = .pending
            message.nextAttemptAt = now
            state.put(message)
            return message
        }
    }

    func webhookBacklog() async throws -> WebhookBacklog {
        state.withLock { state in
            let oldest = state.pendingMessages.map(\.createdAt).min()
            return WebhookBacklog(pending: state.pending.count, oldestPending: oldest)
        }
    }

    func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int {
        state.withLock { state in
            let old = state.webhooks.values.filter {
                ($0.state == .delivered && $0.createdAt < deliveredBefore)
                    || ($0.state == .failed && $0.createdAt < failedBefore)
            }.prefix(limit)
            for message in old { state.webhooks[message.id] = nil }
            return old.count
        }
    }

    func close() async throws {}
}
