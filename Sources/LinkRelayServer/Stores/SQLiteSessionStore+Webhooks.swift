import Foundation
import LinkRelayCore
import SQLiteNIO

/// The webhook outbox in the sessions' file. The write that records an event appends its messages to
/// `webhook_queue` (a rowid table, and an index by tenant and `seq` so that each tenant's claims read
/// only its own messages); the outcome of a message's first attempt
/// moves it into `webhook_messages`, with its indexes, in the sender's write of outcomes; later
/// outcomes update that row. Claims, the listing and the backlog read both tables, the queue first: a
/// message moved between the two reads is read twice, never missed. Every change goes through the one
/// writer; the sender's writes are not run on its thread, which yields to the taps' (`WebhookSender`).
extension SQLiteSessionStore {
    /// A new message, in the event's write: pending, due at once, no attempt yet.
    static func insert(_ message: WebhookMessage, _ connection: SQLiteWriter.Connection) throws {
        _ = try connection.step(
            "INSERT INTO webhook_queue (tenant, id, session_id, type, created_at, payload) VALUES (?, ?, ?, ?, ?, ?)",
            [
                .text(message.tenant), .text(message.id), .text(message.sessionId), .text(message.type),
                .integer(message.createdAt.millis), .utf8(message.payload),
            ])
    }

    /// Reads the due messages, queued ones first, and takes those not leased, with no write: a claim must
    /// not hold up the taps' writes. A read that began before an outcome's commit may still see the
    /// message due, so what was settled since the claim began is skipped too (`WebhookLeases`). Leases
    /// live in memory (this process is the file's only writer); after a restart every pending message is
    /// free again.
    ///
    /// `INDEXED BY`: left to itself, SQLite read every pending message through the index by state and
    /// sorted them for each claim (19 ms at 200,000 pending, and a drain of 35 messages a second after a
    /// 10-minute outage); the index of due times gives the first `limit` at once. Both reads take one
    /// tenant's messages by an index that starts with the tenant: another's backlog is never read.
    func claimWebhooks(tenant: String, dueBy now: Date, leaseUntil: Date, limit: Int) async throws
        -> [WebhookMessage]
    {
        let (generation, skipped) = webhookLeases.withLock { $0.beginClaim(now: now) }
        let queued = try await queuedWebhooks(
            "WHERE tenant = ? ORDER BY seq LIMIT ?", [.text(tenant), .integer(limit + skipped)])
        let retries = try await webhooks(
            """
            INDEXED BY webhook_messages_due WHERE tenant = ? AND state = 'pending' AND next_attempt_at <= ?
            ORDER BY next_attempt_at LIMIT ?
            """, [.text(tenant), .integer(now.millis), .integer(limit + skipped)])
        let due = (queued.map(\.message) + retries).sorted {
            ($0.nextAttemptAt, WebhookCursor($0)) < ($1.nextAttemptAt, WebhookCursor($1))
        }
        return webhookLeases.withLock {
            $0.take(
                due, queueRows: Dictionary(queued.map { ($0.message.id, $0.seq) }) { first, _ in first },
                readAfter: generation, until: leaseUntil, limit: limit)
        }
    }

    /// Stores the outcomes in one write, then ends their leases: a claim after it sees the outcomes.
    /// A first attempt's message leaves the queue for its row; a later one's row is updated. The
    /// values are made before: the write holds up every other.
    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
        guard !messages.isEmpty else { return }
        let rows: [(values: [SQLiteWriter.Value], queueRow: Int?)] = webhookLeases.withLock { leases in
            messages.map { message in
                (
                    [
                        .text(message.id), .text(message.sessionId), .text(message.tenant), .text(message.type),
                        .integer(message.createdAt.millis), .text(message.state.rawValue),
                        .integer(message.nextAttemptAt.millis), .utf8(WebhookMessage.storedAttempts(message.attempts)),
                        .utf8(message.payload),
                    ],
                    leases.queueRow(of: message.id)
                )
            }
        }
        try await write(onCallersThread: false) { connection in
            for row in rows {
                _ = try connection.step(Self.storeOutcomeSQL, row.values)
                if let seq = row.queueRow {
                    _ = try connection.step("DELETE FROM webhook_queue WHERE seq = ?", [.integer(seq)])
                }
            }
        }
        webhookLeases.withLock { $0.settle(messages.map(\.id)) }
    }

    private static let storeOutcomeSQL = """
        INSERT INTO webhook_messages (id, session_id, tenant, type, created_at, state, next_attempt_at, attempts, payload)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET
            state = excluded.state, next_attempt_at = excluded.next_attempt_at, attempts = excluded.attempts
        """

    /// Both tables, each newest first, merged. The queue has no index but by tenant and `seq` (each one
    /// would cost every tap's commit a page): a session's or a page's messages are looked for among the
    /// tenant's queued ones, which are few unless its receiver is down.
    func webhookMessages(tenant: String, _ listing: WebhookListing) async throws -> [WebhookMessage] {
        var clause = "WHERE tenant = ?"
        var binds: [SQLiteData] = [.text(tenant)]
        if let session = listing.sessionId {
            clause += " AND session_id = ?"
            binds.append(.text(session))
        }
        if let after = listing.after {
            clause += " AND (created_at, id) < (?, ?)"
            binds += [.integer(after.createdAtMillis), .text(after.id)]
        }
        let order = " ORDER BY created_at DESC, id DESC LIMIT ?"
        let queued =
            listing.state == nil || listing.state == .pending
            ? try await queuedWebhooks(clause + order, binds + [.integer(listing.limit)]).map(\.message) : []
        if let state = listing.state {
            clause += " AND state = ?"
            binds.append(.text(state.rawValue))
        }
        let stored = try await webhooks(clause + order, binds + [.integer(listing.limit)])
        let storedIDs = Set(stored.map(\.id))
        let all = stored + queued.filter { !storedIDs.contains($0.id) }
        return Array(all.sorted { WebhookCursor($0) > WebhookCursor($1) }.prefix(listing.limit))
    }

    /// Through the index of due times: what waits for a retry is after `now` there. A leased message
    /// needs no exception here: its lease, in memory, keeps it from claims, and its outcome's write sets
    /// its next attempt again.
    func makeRetriesDue(tenant: String, now: Date) async throws -> Int {
        try await write(onCallersThread: false) { connection in
            _ = try connection.step(
                """
                UPDATE webhook_messages INDEXED BY webhook_messages_due SET next_attempt_at = created_at
                WHERE tenant = ? AND state = 'pending' AND next_attempt_at > ?
                """, [.text(tenant), .integer(now.millis)])
            return connection.changes
        }
    }

    /// A queued message gets its row, due now, like any other. Another tenant's id changes nothing.
    func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage? {
        try await write { connection in
            _ = try connection.step(
                """
                INSERT OR IGNORE INTO webhook_messages (\(Self.columns))
                SELECT \(Self.queuedColumns) FROM webhook_queue WHERE id = ? AND tenant = ?
                """, [.text(id), .text(tenant)])
            _ = try connection.step(
                "DELETE FROM webhook_queue WHERE id = ? AND tenant = ?", [.text(id), .text(tenant)])
            _ = try connection.step(
                "UPDATE webhook_messages SET state = 'pending', next_attempt_at = ? WHERE id = ? AND tenant = ?",
                [.integer(now.millis), .text(id), .text(tenant)])
        }
        return try await webhooks("WHERE id = ? AND tenant = ?", [.text(id), .text(tenant)]).first
    }

    func webhookBacklog() async throws -> WebhookBacklog {
        let queued = try await read("SELECT count(*) AS n, min(created_at) AS oldest FROM webhook_queue").first
        let stored = try await read(
            "SELECT count(*) AS n, min(created_at) AS oldest FROM webhook_messages WHERE state = 'pending'"
        ).first
        let oldest = [queued, stored].compactMap { $0?.column("oldest")?.integer }.min()
        return WebhookBacklog(
            pending: [queued, stored].reduce(0) { $0 + Int($1?.column("n")?.integer ?? 0) },
            oldestPending: oldest.map { Date(millis: Int($0)) })
    }

    /// In batches of `limit`, through the index by state: each write is short, and taps go between them.
    func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int {
        try await write(onCallersThread: false) { connection in
            try Self.zeroingFreedPages(connection) {
                _ = try connection.step(
                    """
                    DELETE FROM webhook_messages WHERE rowid IN (
                        SELECT rowid FROM webhook_messages WHERE state = 'delivered' AND created_at < ?1
                        UNION ALL SELECT rowid FROM webhook_messages WHERE state = 'failed' AND created_at < ?2
                        LIMIT ?3)
                    """, [.integer(deliveredBefore.millis), .integer(failedBefore.millis), .integer(limit)])
                return connection.changes
            }
        }
    }

    private func webhooks(_ clause: String, _ binds: [SQLiteData]) async throws -> [WebhookMessage] {
        try await read("SELECT \(Self.columns) FROM webhook_messages " + clause, binds).map(Self.message)
    }

    private static let columns = "id, session_id, tenant, type, created_at, state, next_attempt_at, attempts, payload"

    /// A queued message as a row of `webhook_messages` has it: pending, due since created, no attempt yet.
    private static let queuedColumns =
        "id, session_id, tenant, type, created_at, 'pending' AS state, created_at AS next_attempt_at, '[]' AS attempts, payload"

    /// Queued messages, each with its row in the queue.
    private func queuedWebhooks(_ clause: String, _ binds: [SQLiteData]) async throws
        -> [(message: WebhookMessage, seq: Int)]
    {
        try await read("SELECT seq, \(Self.queuedColumns) FROM webhook_queue " + clause, binds).map { row in
            (try Self.message(row), Int(row.column("seq")?.integer ?? 0))
        }
    }

    private static func message(_ row: SQLiteRow) throws -> WebhookMessage {
        try WebhookMessage(
            id: row.column("id")?.string ?? "", type: row.column("type")?.string ?? "",
            sessionId: row.column("session_id")?.string ?? "",
            tenant: row.column("tenant")?.string ?? Tenant.defaultName,
            createdAt: Date(millis: Int(row.column("created_at")?.integer ?? 0)),
            payload: Array((row.column("payload")?.string ?? "").utf8),
            state: WebhookMessage.State(rawValue: row.column("state")?.string ?? "") ?? .failed,
            nextAttemptAt: Date(millis: Int(row.column("next_attempt_at")?.integer ?? 0)),
            attempts: WebhookMessage.attempts(stored: Array((row.column("attempts")?.string ?? "[]").utf8)))
    }
}

extension WebhookMessage {
    /// Attempts as the stores keep them: JSON, dates as seconds since 2001.
    static func storedAttempts(_ attempts: [Attempt]) -> [UInt8] {
        guard !attempts.isEmpty else { return Array("[]".utf8) }  // every new message
        return Array((try? JSONEncoder().encode(attempts)) ?? Data("[]".utf8))
    }

    static func attempts(stored: [UInt8]) throws -> [Attempt] {
        guard !stored.elementsEqual("[]".utf8) else { return [] }  // every message not yet tried
        return try JSONDecoder().decode([Attempt].self, from: Data(stored))
    }
}

extension Date {
    var millis: Int { Int((timeIntervalSince1970 * 1000).rounded()) }
    init(millis: Int) { self.init(timeIntervalSince1970: TimeInterval(millis) / 1000) }
}

/// The SQLite outbox's claims, in memory. A claim reads through a reader, whose snapshot may predate
/// an outcome's commit: each settling gets a generation, and a claim skips what was settled after its
/// read began (it is due again, if at all, at the next claim). The sender claims one batch at a time.
struct WebhookLeases {
    /// Claimed messages, until when.
    private var leases: [String: Date] = [:]
    /// The `webhook_queue` rows of claimed messages not yet settled, which the outcome's write deletes.
    private var queueRows: [String: Int] = [:]
    /// Messages whose outcome was stored, by the generation of that commit.
    private var settled: [String: Int] = [:]
    private var generation = 0

    /// Before the read: its generation, and how many due messages it may find that are not for taking.
    mutating func beginClaim(now: Date) -> (generation: Int, skipped: Int) {
        leases = leases.filter { $0.value > now }
        return (generation, leases.count + settled.count)
    }

    /// After the read: leases the first `limit` of `due` that are neither leased nor settled since.
    /// `queueRows`: the queue's row of each message read from the queue.
    mutating func take(
        _ due: [WebhookMessage], queueRows read: [String: Int] = [:], readAfter generation: Int, until: Date,
        limit: Int
    ) -> [WebhookMessage] {
        // What was settled before the read began is in the read's snapshot.
        settled = settled.filter { $0.value > generation }
        var taken: [WebhookMessage] = []
        for message in due where taken.count < limit && leases[message.id] == nil && settled[message.id] == nil {
            leases[message.id] = until
            if let row = read[message.id] { queueRows[message.id] = row }
            taken.append(message)
        }
        return taken
    }

    /// The queue's row of a claimed message, if it was claimed from the queue.
    func queueRow(of id: String) -> Int? { queueRows[id] }

    /// After the outcomes' commit.
    mutating func settle(_ ids: [String]) {
        generation += 1
        for id in ids {
            leases[id] = nil
            queueRows[id] = nil
            settled[id] = generation
        }
    }
}
