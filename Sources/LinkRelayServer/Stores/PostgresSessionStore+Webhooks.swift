import Foundation
import LinkRelayCore
import PostgresNIO

/// The webhook outbox in PostgreSQL: messages are inserted by the statement that records their event
/// (`UpdateSession`); instances share it, and `FOR UPDATE SKIP LOCKED` gives each due message to one.
extension PostgresSessionStore {
    private static let columns = "id, session_id, tenant, type, created_at, state, next_attempt_at, attempts, payload"

    /// The batch in the order the messages were made: `RETURNING` keeps no order, and the subquery's is
    /// by due time, which the claim has just moved to the lease's end.
    func claimWebhooks(tenant: String, dueBy now: Date, leaseUntil: Date, limit: Int) async throws
        -> [WebhookMessage]
    {
        try await writing {
            try await webhooks(
                """
                UPDATE linkrelay_webhooks SET next_attempt_at = \(leaseUntil), leased_until = \(leaseUntil)
                WHERE id IN (
                    SELECT id FROM linkrelay_webhooks
                    WHERE tenant = \(tenant) AND state = 'pending' AND next_attempt_at <= \(now)
                    ORDER BY next_attempt_at, created_at, id LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: Self.columns)
                """
            ).sorted { WebhookCursor($0) < WebhookCursor($1) }
        }
    }

    func recordWebhookAttempts(_ messages: [WebhookMessage]) async throws {
        guard !messages.isEmpty else { return }
        let attempts = messages.map { String(decoding: WebhookMessage.storedAttempts($0.attempts), as: UTF8.self) }
        try await writing {
            _ = try await client.query(
                """
                UPDATE linkrelay_webhooks AS w
                SET state = x.state, next_attempt_at = x.next, attempts = x.attempts, leased_until = NULL
                FROM unnest(
                    \(messages.map(\.id))::text[], \(messages.map(\.state.rawValue))::text[],
                    \(messages.map(\.nextAttemptAt))::timestamptz[], \(attempts)::text[]) AS x (id, state, next, attempts)
                WHERE w.id = x.id
                """, logger: logger
            ).collect()
        }
    }

    /// The cursor's message gives its exact `created_at` (the cursor has milliseconds, the column
    /// microseconds); should it be gone (pruned), the cursor's milliseconds stand in.
    func webhookMessages(tenant: String, _ listing: WebhookListing) async throws -> [WebhookMessage] {
        let after = listing.after
        return try await webhooks(
            """
            SELECT \(unescaped: Self.columns) FROM linkrelay_webhooks
            WHERE tenant = \(tenant) AND (\(listing.state?.rawValue)::text IS NULL OR state = \(listing.state?.rawValue))
                AND (\(listing.sessionId)::text IS NULL OR session_id = \(listing.sessionId))
                AND (\(after?.id)::text IS NULL OR (created_at, id) < (
                    coalesce(
                        (SELECT created_at FROM linkrelay_webhooks WHERE id = \(after?.id)),
                        \(after.map { Date(millis: $0.createdAtMillis) })),
                    \(after?.id)))
            ORDER BY created_at DESC, id DESC LIMIT \(listing.limit)
            """)
    }

    /// A message being sent keeps its lease (`leased_until`), on whichever instance.
    func makeRetriesDue(tenant: String, now: Date) async throws -> Int {
        try await writing {
            var changed = 0
            let rows = try await client.query(
                """
                UPDATE linkrelay_webhooks SET next_attempt_at = created_at
                WHERE tenant = \(tenant) AND state = 'pending' AND next_attempt_at > \(now)
                    AND (leased_until IS NULL OR leased_until <= \(now))
                RETURNING 1
                """, logger: logger)
            for try await _ in rows { changed += 1 }
            return changed
        }
    }

    func retryWebhook(id: String, tenant: String, now: Date) async throws -> WebhookMessage? {
        try await writing {
            try await webhooks(
                """
                UPDATE linkrelay_webhooks SET state = 'pending', next_attempt_at = \(now)
                WHERE id = \(id) AND tenant = \(tenant)
                RETURNING \(unescaped: Self.columns)
                """
            ).first
        }
    }

    func webhookBacklog() async throws -> WebhookBacklog {
        let rows = try await client.query(
            "SELECT count(*), min(created_at) FROM linkrelay_webhooks WHERE state = 'pending'", logger: logger)
        for try await (count, oldest) in rows.decode((Int, Date?).self) {
            return WebhookBacklog(pending: count, oldestPending: oldest)
        }
        return WebhookBacklog(pending: 0, oldestPending: nil)
    }

    /// In batches of `limit`; several instances may prune at once (`SKIP LOCKED`).
    func pruneWebhooks(deliveredBefore: Date, failedBefore: Date, limit: Int) async throws -> Int {
        try await writing {
            var deleted = 0
            let rows = try await client.query(
                """
                DELETE FROM linkrelay_webhooks WHERE id IN (
                    SELECT id FROM linkrelay_webhooks
                    WHERE (state = 'delivered' AND created_at < \(deliveredBefore))
                        OR (state = 'failed' AND created_at < \(failedBefore))
                    LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1
                """, logger: logger)
            for try await _ in rows { deleted += 1 }
            return deleted
        }
    }

    private func webhooks(_ query: PostgresQuery) async throws -> [WebhookMessage] {
        var messages: [WebhookMessage] = []
        let rows = try await client.query(query, logger: logger)
        for try await (id, session, tenant, type, created, state, next, attempts, payload) in rows.decode(
            (String, String, String, String, Date, String, Date, String, String).self)
        {
            messages.append(
                WebhookMessage(
                    id: id, type: type, sessionId: session, tenant: tenant, createdAt: created,
                    payload: Array(payload.utf8),
                    state: WebhookMessage.State(rawValue: state) ?? .failed, nextAttemptAt: next,
                    attempts: try WebhookMessage.attempts(stored: Array(attempts.utf8))))
        }
        return messages
    }
}
