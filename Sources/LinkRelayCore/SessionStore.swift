import Foundation

/// Where sessions and their events live. The store is the truth: nothing is announced before it
/// has been written here.
public protocol SessionStore: WebhookOutbox {
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
    /// Up to `limit` ids of sessions whose Pre-Fill individual is kept until `date` or earlier
    /// (`PrefillProgress.individualKeptUntil`), soonest first.
    func sessionsWithIndividual(keptUntil date: Date, limit: Int) async throws -> [String]
    /// Deletes up to `limit` sessions that ended (`Session.endedAt`) before `date`, with their events and
    /// Idempotency-Keys; returns how many went.
    func deleteSessions(endedBefore date: Date, limit: Int) async throws -> Int
    /// The live sessions counted by state and age (`LiveSessionCount`), for the operators' page: with
    /// PostgreSQL, every instance's. By default through `activeSessions`.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount]
    /// Throws when the store cannot be reached, or cannot take a write.
    func ping() async throws
    /// Releases the store's resources.
    func close() async throws
    /// Gives back memory the store holds only to be faster (caches); called every half minute.
    func releaseMemory() async
    /// The session, when this instance may ask Prove about it: nil when there is none, or while another
    /// running instance verifies it. A store that only one instance uses is `session(id:)`.
    func sessionToVerify(id: String) async throws -> Session?
    /// Marks `key` as taken by a create running on this instance, so that the same key on another
    /// instance does not start a second Prove flow meanwhile: false while another running instance
    /// holds it. `releaseIdempotencyKey` ends the mark. A store that only one instance uses always
    /// says yes (the instance itself lets concurrent repeats wait for the first).
    func reserveIdempotencyKey(_ key: String) async throws -> Bool
    func releaseIdempotencyKey(_ key: String) async throws
    /// The session when the store holds it in memory, else nil (ask `session(id:)`). Lets a channel
    /// open on its event loop without a task and two thread switches; PostgreSQL never answers here.
    func sessionInMemory(id: String) -> Session?
    /// The session's events with `seq > after` when the store holds them in memory, else nil.
    func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]?
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
    public func releaseMemory() async {}
    public func sessionToVerify(id: String) async throws -> Session? { try await session(id: id) }
    public func reserveIdempotencyKey(_ key: String) async throws -> Bool { true }
    public func releaseIdempotencyKey(_ key: String) async throws {}
    public func sessionInMemory(id: String) -> Session? { nil }
    public func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]? { nil }
}
