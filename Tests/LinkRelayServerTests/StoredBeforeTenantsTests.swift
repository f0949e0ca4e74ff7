import Foundation
import LinkRelayCore
import Logging
import PostgresNIO
import SQLiteNIO
import Testing

@testable import LinkRelayServer

/// A store written before tenants (SQLite schema 5, PostgreSQL 3) opens with its sessions and queued
/// webhook messages belonging to `default`, Prove's old `success` string as `proveSuccess`, and its ended
/// sessions known to the retention.
@Suite("Stored before tenants", .timeLimit(.minutes(1)))
struct StoredBeforeTenantsTests {
    /// A verified session as the relay stored it before: `success` was Prove's string; no tenant, no `endedAt`.
    static func oldSession() throws -> (session: Session, data: String, events: [SessionEvent]) {
        let created = Date(timeIntervalSince1970: 1_790_000_000)
        var session = Session(
            id: "ses_old" + Secrets.token(length: 12), linkKey: Secrets.token(length: 22), channelToken: "t",
            createdAt: created, expiresAt: created + 180, correlationId: "c", authToken: nil, clientRequestId: "r",
            phoneNumber: "2001004014", finalTargetUrl: "https://relay.example/l/x", idempotencyKey: nil,
            requestFingerprint: "f")
        let events = [
            session.record(.waiting(expiresAt: session.expiresAt), at: created),
            session.record(.result(.verified), at: created + 20),
        ]
        session.result = SessionResult(outcome: .verified, proveSuccess: "true", phoneNumber: "2001004014")
        session.version = 1
        var object = try #require(
            try JSONSerialization.jsonObject(with: try JSONEncoder().encode(session)) as? [String: Any])
        object["endedAt"] = nil
        var result = try #require(object["result"] as? [String: Any])
        result["success"] = "true"
        result["proveSuccess"] = nil
        object["result"] = result
        let data = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        return (session, data, events)
    }

    static func eventsJSON(_ events: [SessionEvent]) -> String {
        "[" + events.map { String(decoding: $0.storedJSON, as: UTF8.self) }.joined(separator: ",") + "]"
    }

    /// What every store must say of the old session and message once opened by this version; closes it.
    static func check(_ store: any RelayStore, _ old: Session, messageID: String) async throws {
        do {
            try await checkOpen(store, old, messageID: messageID)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    private static func checkOpen(_ store: any RelayStore, _ old: Session, messageID: String) async throws {
        let session = try #require(try await store.session(id: old.id))
        #expect(session.owner == Tenant.defaultName)
        #expect(session.result?.proveSuccess == "true")
        #expect(session.result?.success == true)
        let view = String(
            decoding: RelayJSON.encode(SessionView(session, events: nil, at: session.createdAt)), as: UTF8.self)
        #expect(view.contains(#""success":true"#) && view.contains(#""proveSuccess":"true""#))
        let due = try await store.claimWebhooks(
            tenant: Tenant.defaultName, dueBy: Date(), leaseUntil: Date() + 60, limit: 10)
        #expect(due.map(\.id) == [messageID])
        #expect(due.first?.tenant == Tenant.defaultName)
        // Ended 20 s after its creation: the retention finds it from then on.
        #expect(try await store.deleteSessions(endedBefore: old.createdAt + 19, limit: 10) == 0)
        #expect(try await store.deleteSessions(endedBefore: old.createdAt + 21, limit: 10) == 1)
        #expect(try await store.session(id: old.id) == nil)
    }

    @Test("SQLite: a schema-5 file")
    func sqlite() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-old-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let (session, data, events) = try Self.oldSession()
        let messageID = WebhookMessage.newID(at: session.createdAt)

        let old = try await SQLiteConnection.open(storage: .file(path: path), logger: Logger(label: "test"))
        _ = try await old.query("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for (index, statements) in SQLiteMigrations.steps.prefix(5).enumerated() {
            for statement in statements { _ = try await old.query(statement) }
            _ = try await old.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(index + 1)])
        }
        _ = try await old.query(
            "INSERT INTO sessions (id, link_key, state, version, data, events) VALUES (?, ?, 'verified', 1, ?, ?)",
            [.text(session.id), .text(session.linkKey), .text(data), .text(Self.eventsJSON(events))])
        _ = try await old.query(
            "INSERT INTO webhook_queue (id, session_id, type, created_at, payload) VALUES (?, ?, 'session.verified', ?, '{}')",
            [.text(messageID), .text(session.id), .integer(session.createdAt.millis)])
        try await old.close()

        try await Self.check(
            try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test")), session, messageID: messageID)
    }

    @Test("PostgreSQL: a schema-3 database", .enabled(if: TestPostgres.available))
    func postgres() async throws {
        let url = try await TestPostgres.createDatabase()
        let (session, data, events) = try Self.oldSession()
        let messageID = WebhookMessage.newID(at: session.createdAt)
        try await TestPostgres.withConnection(url) { connection in
            let logger = TestPostgres.logger
            _ = try await connection.query("CREATE TABLE linkrelay_schema (version integer NOT NULL)", logger: logger)
                .collect()
            for (index, statements) in PostgresSessionStore.migrations.prefix(3).enumerated() {
                for statement in statements {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
                }
                _ = try await connection.query(
                    "INSERT INTO linkrelay_schema (version) VALUES (\(index + 1))", logger: logger
                )
                .collect()
            }
            _ = try await connection.query(
                """
                INSERT INTO linkrelay_sessions (id, link_key, state, version, expires_at, data)
                VALUES (\(session.id), \(session.linkKey), 'verified', 1, \(session.expiresAt), \(data))
                """, logger: logger
            ).collect()
            for event in events {
                _ = try await connection.query(
                    """
                    INSERT INTO linkrelay_events (session_id, seq, data)
                    VALUES (\(session.id), \(event.seq), \(String(decoding: event.storedJSON, as: UTF8.self)))
                    """, logger: logger
                ).collect()
            }
            _ = try await connection.query(
                """
                INSERT INTO linkrelay_webhooks (id, session_id, type, created_at, state, next_attempt_at, attempts, payload)
                VALUES (\(messageID), \(session.id), 'session.verified', \(session.createdAt), 'pending',
                    \(session.createdAt), '[]', '{}')
                """, logger: logger
            ).collect()
        }
        try await Self.check(
            try await PostgresSessionStore.open(url: try PostgresURL(url), logger: Logger(label: "test")), session,
            messageID: messageID)
    }
}
