import Foundation
import LinkRelayCore
import SQLiteNIO

/// The webhook outbox in the sessions' file: messages are appended to `webhook_queue` by the write that
/// records their event (`update`), and moved into `webhook_messages`, with its indexes, by the sender's
/// own writes, which every read of the outbox makes first (`moveQueued`). Every change goes through the
/// one writer. The sender's writes are not run on its thread, which yields to the taps' (`WebhookSender`).
extension SQLiteSessionStore {
    /// A new message, in the event's write: pending, due at once, no attempt yet.
    static func insert(_ message: WebhookMessage, _ connection: SQLiteWriter.Connection) throws {
        _ = try connection.step(
            "INSERT INTO webhook_queue (id, session_id, type, created_at, payload) VALUES (?, ?, ?, ?, ?)",
            [
                .text(message.id), .text(message.sessionId), .text(message.type), .integer(message.createdAt.millis),
                .utf8(message.payload),
            ])
    }

    /// Moves what the taps queued into `webhook_messages`, in one write, when anything may be queued.
    func moveQueued() async throws {
        guard
            webhooksQueued.withLock({ queued in
                defer { queued = false }
                return queued
            })
        else { return }
        do {
            try await write(onCallersThread: false) { connection in
                _ = try connection.step(
                    """
                    INSERT INTO webhook_messages (id, session_id, type, created_at, state, next_attempt_at, attempts, payload)
                    SELECT id, session_id, type, created_at, 'pending', created_at, '[]', payload FROM webhook_queue ORDER BY seq
                    """)
                _ = try connection.step("DELETE FROM webhook_queue")
            }
        } catch {
            webhooksQueued.withLock { $0 = true }
            throw error
        }
    }

    /// Moves the queued messages in (when there are any), then reads the due messages and takes those
    /// not leased, with no write of its own: a claim must not hold up the taps' writes. A read that began before an outcome's commit may still see the message due, so
    /// what was settled since the read began is skipped too (`WebhookLeases`). Leases live in memory
    /// (this process is the file's only writer); after a restart every pending message is free again.
    ///
    /// `INDEXED BY`: left to itself, SQLite read every pending message through the index by state and
    /// sorted them for each claim (19 ms at 200,000 pending, and a drain of 35 messages a second after a
    /// 10-minute outage); the index of due times gives the first `limit` at once.
    func claimWebhooks(dueBy now: Date, leaseUntil: Date, limit: Int) async throws -> [WebhookMessage] {
        try await moveQueued()
        let (generation, skipped) = webhookLeases.withLock { $0.beginClaim(now: now) }
        let due = try await webhooks(
            "INDEXED BY webhook_messages_due WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?",
            [.integer(now.millis), .integer(limit + skipped)])
        return webhookLeases.withLock { $0.take(due, readAfter: generation, until: leaseUntil, limit: limit) }
    }

    /// Stores the outcomes in one write, then ends their leases: a claim after it sees the outcomes.
    /// The values are made before: the write holds up every other.
    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
        guard !messages.isEmpty else { return }
        let rows: [[SQLiteWriter.Value]] = messages.map { message in
            [
                .text(message.state.rawValue), .integer(message.nextAttemptAt.millis),
                .utf8(WebhookMessage.storedAttempts(message.attempts)), .text(message.id),
            ]
        }
        try await write(onCallersThread: false) { connection in
            for row in rows {
                _ = try connection.step(
                    "UPDATE webhook_messages SET state = ?, next_attempt_at = ?, attempts = ? WHERE id = ?", row)
            }
        }
        webhookLeases.withLock { $0.settle(messages.map(\.id)) }
    }

    func webhookMessages(state: WebhookMessage.State?, limit: Int) async throws -> [WebhookMessage] {
        try await moveQueued()
        guard let state else {
            return try await webhooks("ORDER BY created_at DESC, id DESC LIMIT ?", [.integer(limit)])
        }
        return try await webhooks(
            "WHERE state = ? ORDER BY created_at DESC, id DESC LIMIT ?", [.text(state.rawValue), .integer(limit)])
    }

    func retryWebhook(id: String, now: Date) async throws -> WebhookMessage? {
        try await moveQueued()
        try await write { connection in
            _ = try connection.step(
                "UPDATE webhook_messages SET state = 'pending', next_attempt_at = ? WHERE id = ?",
                [.integer(now.millis), .text(id)])
        }
        return try await webhooks("WHERE id = ?", [.text(id)]).first
    }

    func webhookBacklog() async throws -> WebhookBacklog {
        try await moveQueued()
        let row = try await read(
            "SELECT count(*) AS n, min(created_at) AS oldest FROM webhook_messages WHERE state = 'pending'"
        ).first
        let oldest = row?.column("oldest")?.integer.map { Date(millis: Int($0)) }
        return WebhookBacklog(pending: Int(row?.column("n")?.integer ?? 0), oldestPending: oldest)
    }

    func pruneWebhooks(createdBefore date: Date) async throws {
        try await write { connection in
            _ = try connection.step(
                "DELETE FROM webhook_messages WHERE state IN ('delivered', 'failed') AND created_at < ?",
                [.integer(date.millis)])
        }
    }

    private func webhooks(_ clause: String, _ binds: [SQLiteData]) async throws -> [WebhookMessage] {
        try await read(
            "SELECT id, session_id, type, created_at, state, next_attempt_at, attempts, payload FROM webhook_messages "
                + clause, binds
        ).map { row in
            try WebhookMessage(
                id: row.column("id")?.string ?? "", type: row.column("type")?.string ?? "",
                sessionId: row.column("session_id")?.string ?? "",
                createdAt: Date(millis: Int(row.column("created_at")?.integer ?? 0)),
                payload: Array((row.column("payload")?.string ?? "").utf8),
                state: WebhookMessage.State(rawValue: row.column("state")?.string ?? "") ?? .failed,
                nextAttemptAt: Date(millis: Int(row.column("next_attempt_at")?.integer ?? 0)),
                attempts: WebhookMessage.attempts(stored: Array((row.column("attempts")?.string ?? "[]").utf8)))
        }
    }
}

extension WebhookMessage {
    /// Attempts as the stores keep them: JSON, dates as seconds since 2001.
    static func storedAttempts(_ attempts: [Attempt]) -> [UInt8] {
        guard !attempts.isEmpty else { return Array("[]".utf8) }  // every new message
        return Array((try? JSONEncoder().encode(attempts)) ?? Data("[]".utf8))
    }

    static func attempts(stored: [UInt8]) throws -> [Attempt] {
        try JSONDecoder().decode([Attempt].self, from: Data(stored))
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
    /// Messages whose outcome was stored, by the generation of that commit.
    private var settled: [String: Int] = [:]
    private var generation = 0

    /// Before the read: its generation, and how many due messages it may find that are not for taking.
    mutating func beginClaim(now: Date) -> (generation: Int, skipped: Int) {
        leases = leases.filter { $0.value > now }
        return (generation, leases.count + settled.count)
    }

    /// After the read: leases the first `limit` of `due` that are neither leased nor settled since.
    mutating func take(_ due: [WebhookMessage], readAfter generation: Int, until: Date, limit: Int)
        -> [WebhookMessage]
    {
        // What was settled before the read began is in the read's snapshot.
        settled = settled.filter { $0.value > generation }
        var taken: [WebhookMessage] = []
        for message in due where taken.count < limit && leases[message.id] == nil && settled[message.id] == nil {
            leases[message.id] = until
            taken.append(message)
        }
        return taken
    }

    /// After the outcomes' commit.
    mutating func settle(_ ids: [String]) {
        generation += 1
        for id in ids {
            leases[id] = nil
            settled[id] = generation
        }
    }
}
