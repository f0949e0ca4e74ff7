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
    /// After a pass that erased or deleted: removes from the disk what the store still keeps of those rows
    /// outside them (SQLite's WAL: earlier versions of their pages).
    func truncateJournal() async throws
}

extension RetentionStore {
    /// Memory keeps nothing on disk; PostgreSQL's WAL and dead row versions are its own (docs/store.md).
    func truncateJournal() async throws {}
}

/// What readiness, the operators' page and the shutdown ask of the store.
protocol StoreHealth: Sendable {
    /// Throws when the store cannot be reached, or cannot take a write.
    func ping() async throws
    /// The live sessions counted by flow, state and age (`LiveSessionCount`): with PostgreSQL, every
    /// instance's.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount]
    /// Releases the store's resources.
    func close() async throws
}

extension StoreHealth where Self: SessionStore {
    /// Through `activeSessions`: a store that holds its sessions in memory counts them there.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount] {
        LiveSessionCount.tally(try await activeSessions().map { ($0.flow, $0.state, $0.createdAt) }, at: now)
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
    /// `tenant`'s messages that `listing` asks for, newest first (by creation, then id): up to its limit.
    func webhookMessages(tenant: String, _ listing: WebhookListing) async throws -> [WebhookMessage]
    /// Makes `tenant`'s pending messages that wait for a retry due again, as when they were made, so that
    /// they go now and oldest first; a message being sent keeps its lease. Returns how many.
    func makeRetriesDue(tenant: String, now: Date) async throws -> Int
    /// Makes `tenant`'s message pending and due at `now`, whatever its state; nil when it has none of this id.
    func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage?
    func webhookBacklog() async throws -> WebhookBacklog
    /// Deletes up to `limit` delivered messages created before `deliveredBefore` and failed ones created
    /// before `failedBefore`; returns how many.
    func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int
}

extension WebhookOutbox {
    /// `tenant`'s messages, newest first; every state when `state` is nil.
    func webhookMessages(tenant: String, state: WebhookMessage.State?, limit: Int) async throws -> [WebhookMessage] {
        try await webhookMessages(tenant: tenant, WebhookListing(state: state, limit: limit))
    }
}

/// Which of a tenant's messages a listing shows: those older than `after`, of one state and one session
/// when given.
struct WebhookListing: Sendable, Equatable {
    var state: WebhookMessage.State?
    var sessionId: String?
    var after: WebhookCursor?
    var limit: Int

    /// Whether `message` matches the listing's filters and comes after its cursor.
    func includes(_ message: WebhookMessage) -> Bool {
        (state == nil || message.state == state) && (sessionId == nil || message.sessionId == sessionId)
            && (after.map { WebhookCursor(message) < $0 } ?? true)
    }
}

/// Where a page of the listing ended: its last message's creation (in milliseconds, as SQLite keeps it)
/// and id, the listing's order. Opaque to a caller: base64url of `millis:id`.
struct WebhookCursor: Sendable, Equatable, Comparable {
    var createdAtMillis: Int
    var id: String

    init(_ message: WebhookMessage) {
        createdAtMillis = message.createdAt.millis
        id = message.id
    }

    /// Nil for anything that is not a cursor this relay wrote.
    init?(_ text: String) {
        guard (1...200).contains(text.utf8.count),
            text.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0.isASCIIAlphanumeric })
        else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8),
            let colon = decoded.firstIndex(of: ":"), let millis = Int(decoded[..<colon]), millis >= 0
        else { return nil }
        let id = decoded[decoded.index(after: colon)...]
        guard !id.isEmpty, id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        createdAtMillis = millis
        self.id = String(id)
    }

    var text: String {
        Data("\(createdAtMillis):\(id)".utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.createdAtMillis, lhs.id) < (rhs.createdAtMillis, rhs.id) }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
