import Foundation
import LinkRelayCore
import SQLiteNIO

/// The webhook outbox in the sessions' file: messages are inserted by the write that records their event
/// (`update`), and every change goes through the one writer. The sender's writes are not run on its
/// thread, which yields to the taps' (`WebhookSender`).
extension SQLiteSessionStore {
    static func insert(_ message: WebhookMessage, _ connection: SQLiteWriter.Connection) throws {
        _ = try connection.step(
            """
            INSERT INTO webhook_messages (id, session_id, type, created_at, state, next_attempt_at, attempts, payload)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(message.id), .text(message.sessionId), .text(message.type), .integer(message.createdAt.millis),
                .text(message.state.rawValue), .integer(message.nextAttemptAt.millis),
                .utf8(WebhookMessage.storedAttempts(message.attempts)), .utf8(message.payload),
            ])
    }

    /// Reads the due messages, then takes those not leased in a turn of the writer, which sees every
    /// write before it: a message whose outcome was just stored is not taken again. Leases live in memory
    /// (this process is the file's only writer), so a claim writes nothing; after a restart every pending
    /// message is free again.
    ///
    /// `INDEXED BY`: left to itself, SQLite read every pending message through the index by state and
    /// sorted them for each claim (19 ms at 200,000 pending, and a drain of 35 messages a second after a
    /// 10-minute outage); the index of due times gives the first `limit` at once.
    func claimWebhooks(dueBy now: Date, leaseUntil: Date, limit: Int) async throws -> [WebhookMessage] {
        let leased = webhookLeases.withLock { leases in
            leases = leases.filter { $0.value > now }
            return leases.count
        }
        let due = try await webhooks(
            "INDEXED BY webhook_messages_due WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?",
            [.integer(now.millis), .integer(limit + leased)])
        guard !due.isEmpty else { return [] }
        return try await write(onCallersThread: false) { [webhookLeases] connection in
            var taken: [WebhookMessage] = []
            for message in due where taken.count < limit {
                guard webhookLeases.withLock({ $0[message.id] == nil }),
                    try connection.step(
                        "SELECT 1 FROM webhook_messages WHERE id = ? AND state = 'pending' AND next_attempt_at <= ?",
                        [.text(message.id), .integer(now.millis)])
                else { continue }
                taken.append(message)
            }
            webhookLeases.withLock { leases in
                for message in taken { leases[message.id] = leaseUntil }
            }
            return taken
        }
    }

    /// Stores the outcomes in one write, and ends their leases in it: a claim after it sees the outcomes.
    /// The values are made before: the write holds up every other.
    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
        guard !messages.isEmpty else { return }
        let rows: [[SQLiteWriter.Value]] = messages.map { message in
            [
                .text(message.state.rawValue), .integer(message.nextAttemptAt.millis),
                .utf8(WebhookMessage.storedAttempts(message.attempts)), .text(message.id),
            ]
        }
        try await write(onCallersThread: false) { [webhookLeases] connection in
            for row in rows {
                _ = try connection.step(
                    "UPDATE webhook_messages SET state = ?, next_attempt_at = ?, attempts = ? WHERE id = ?", row)
            }
            webhookLeases.withLock { leases in
                for message in messages { leases[message.id] = nil }
            }
        }
    }

    func webhookMessages(state: WebhookMessage.State?, limit: Int) async throws -> [WebhookMessage] {
        guard let state else {
            return try await webhooks("ORDER BY created_at DESC, id DESC LIMIT ?", [.integer(limit)])
        }
        return try await webhooks(
            "WHERE state = ? ORDER BY created_at DESC, id DESC LIMIT ?", [.text(state.rawValue), .integer(limit)])
    }

    func retryWebhook(id: String, now: Date) async throws -> WebhookMessage? {
        try await write { connection in
            _ = try connection.step(
                "UPDATE webhook_messages SET state = 'pending', next_attempt_at = ? WHERE id = ?",
                [.integer(now.millis), .text(id)])
        }
        return try await webhooks("WHERE id = ?", [.text(id)]).first
    }

    func webhookBacklog() async throws -> WebhookBacklog {
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
