import Foundation

/// Where sessions, their events and their Idempotency-Keys live: the domain's part of the store. The store
/// is the truth: nothing is announced before it has been written here. What the relay needs beyond it
/// (in-memory reads, claims between instances, the webhook outbox, retention, health) are roles of their
/// own in the server module (`StoreRoles.swift`).
public protocol SessionStore: Sendable {
    /// Stores a new session with its first event. Throws `StoreError.duplicateIdempotencyKey` when
    /// another session already holds the session's idempotency key.
    func insert(_ session: Session, event: SessionEvent) async throws
    /// Replaces a stored session only if its stored `version` is still `expectedVersion`, appending
    /// `events`, and adding `messages` to the webhook outbox, in one transaction. Returns false (and
    /// writes nothing) when someone else changed it first. Once the change is committed, and before this
    /// returns, calls `committed`: the relay announces the events there, without waiting for its task
    /// to resume (SQLite's writer calls it from its own thread).
    func update(
        _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
        reporting messages: [WebhookMessage],
        committed: @escaping @Sendable () -> Void
    ) async throws -> Bool
    /// Removes a session that was stored but never handed out (its Prove flow could not start), with
    /// its events and its idempotency key.
    func discard(sessionID: String) async throws
    func session(id: String) async throws -> Session?
    func session(linkKey: String) async throws -> Session?
    func session(idempotencyKey: String) async throws -> Session?
    /// The session's events with `seq > after`, in order.
    func events(sessionID: String, after: Int) async throws -> [SessionEvent]
    /// Every session that is not terminal: what the verifier and the expiry sweeper pick up at start.
    func activeSessions() async throws -> [Session]
}

extension SessionStore {
    public func update(_ session: Session, expectedVersion: Int, appending events: [SessionEvent]) async throws
        -> Bool
    {
        try await update(session, expectedVersion: expectedVersion, appending: events, reporting: [], committed: {})
    }
    public func update(
        _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
        committed: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        try await update(
            session, expectedVersion: expectedVersion, appending: events, reporting: [], committed: committed)
    }
}
