import Foundation
import LinkRelayCore

// The store's roles beyond the domain's `SessionStore` (LinkRelayCore). Each part of the relay takes the
// roles it uses; the three stores play all of them (`RelayStore`).

/// Everything the relay asks of its store.
typealias RelayStore = SessionStore & InMemoryReads & MemoryReleasing & ClusterClaims & WebhookOutbox
    & RetentionStore & StoreHealth

/// What a channel reads on its event loop, without a task, when the store holds it in memory.
protocol InMemoryReads: Sendable {
    /// The session when the store holds it in memory, else nil (ask `session(id:)`). PostgreSQL never
    /// answers here.
    func sessionInMemory(id: String) -> Session?
    /// The session's events with `seq > after` when the store holds them in memory, else nil.
    func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]?
}

/// A store that holds memory only to be faster (caches).
protocol MemoryReleasing: Sendable {
    /// Gives that memory back; called every half minute, and once the relay goes quiet after a burst.
    func releaseMemory() async
}

/// What one of several instances may do while others run. A store that only one instance uses answers
/// as the defaults below do.
protocol ClusterClaims: Sendable {
    /// The session, when this instance may ask Prove about it: nil when there is none, or while another
    /// running instance verifies it.
    func sessionToVerify(id: String) async throws -> Session?
    /// Marks `key` as taken by a create running on this instance, so that the same key on another
    /// instance does not start a second Prove flow meanwhile: false while another running instance
    /// holds it. `releaseIdempotencyKey` ends the mark. (The instance itself lets concurrent repeats
    /// wait for the first.)
    func reserveIdempotencyKey(_ key: String) async throws -> Bool
    func releaseIdempotencyKey(_ key: String) async throws
}

extension ClusterClaims where Self: SessionStore {
    func sessionToVerify(id: String) async throws -> Session? { try await session(id: id) }
    func reserveIdempotencyKey(_ key: String) async throws -> Bool { true }
    func releaseIdempotencyKey(_ key: String) async throws {}
}

/// What the retention (`--identity-retention`, `--retention`) asks of the store; old webhook messages
/// go through `WebhookOutbox.pruneWebhooks`.
protocol RetentionStore: Sendable {
    /// Up to `limit` ids of sessions whose Pre-Fill individual is kept until `date` or earlier
    /// (`PrefillProgress.individualKeptUntil`), soonest first.
    func sessionsWithIndividual(keptUntil date: Date, limit: Int) async throws -> [String]
    /// Deletes up to `limit` sessions that ended (`Session.endedAt`) before `date`, with their events and
    /// Idempotency-Keys; returns how many went.
    func deleteSessions(endedBefore date: Date, limit: Int) async throws -> Int
}

/// What readiness, the operators' page and the shutdown ask of the store.
protocol StoreHealth: Sendable {
    /// Throws when the store cannot be reached, or cannot take a write.
    func ping() async throws
    /// The live sessions counted by state and age (`LiveSessionCount`): with PostgreSQL, every instance's.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount]
    /// Releases the store's resources.
    func close() async throws
}

extension StoreHealth where Self: SessionStore {
    /// Through `activeSessions`: a store that holds its sessions in memory counts them there.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount] {
        LiveSessionCount.tally(try await activeSessions().map { ($0.state, $0.createdAt) }, at: now)
    }
}

/// How far behind the outbox is.
struct WebhookBacklog: Sendable, Equatable {
    var pending: Int
    var oldestPending: Date?
}

/// The webhook outbox, kept in the sessions' own store so that a message is written with the event it
/// reports (`SessionStore.update(…reporting:…)`), never without it and never lost after it.
protocol WebhookOutbox: Sendable {
    /// Up to `limit` of `tenant`'s pending messages due by `now`, oldest due first, each leased until
    /// `leaseUntil`: until then no other caller (on any instance) claims it again.
    func claimWebhooks(tenant: String, dueBy now: Date, leaseUntil: Date, limit: Int) async throws -> [WebhookMessage]
    /// Stores attempts' outcomes, together: each message's state, next attempt and attempts. A message
    /// stays leased until its outcome is stored.
    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws
    /// `tenant`'s messages, newest first; every state when `state` is nil.
    func webhookMessages(tenant: String, state: WebhookMessage.State?, limit: Int) async throws -> [WebhookMessage]
    /// Makes `tenant`'s message pending and due at `now`, whatever its state; nil when it has none of this id.
    func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage?
    func webhookBacklog() async throws -> WebhookBacklog
    /// Deletes up to `limit` delivered messages created before `deliveredBefore` and failed ones created
    /// before `failedBefore`; returns how many.
    func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int
}
