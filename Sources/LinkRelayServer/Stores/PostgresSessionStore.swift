import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOSSL
import PostgresNIO

/// Sessions in PostgreSQL, shared by every instance that names the same database.
///
/// Every write is one statement, so PostgreSQL commits it whole, and nothing is announced before that
/// commit. A write that adds events also sends `NOTIFY linkrelay, '<session id> <last seq>'` inside
/// the same statement: PostgreSQL delivers it only once the write has committed, and never for a
/// write that did not. `PostgresListener` turns those into wake-ups for this instance's channels.
///
/// Nothing is cached: another instance may change a session at any moment, and the version check of
/// `update` is what makes a change happen once across instances. The one exception is a session whose
/// verification this instance's own write just claimed (see `sessionToVerify`).
final class PostgresSessionStore: RelayStore {
    /// The channel of the wake-ups.
    static let channel = "linkrelay"

    /// This instance among the others, in claims: new at each start.
    let instanceID = "ins_" + Secrets.token(length: 16)
    /// How often an instance says it is alive, and how long after that it counts as gone (its work
    /// is then taken over), in seconds.
    static let heartbeat = 2
    static let presumedGone = 10

    let client: PostgresClient
    /// The pool's `run()`, for as long as the store is open.
    private let running: Task<Void, Never>
    let logger: Logger
    private let decoder = JSONDecoder()
    /// Sessions whose verification this instance's last write of them claimed, as written: the verifier
    /// starts from one instead of claiming it again. Dropped at its first use, once this instance's
    /// next write of the session is answered, and at every `releaseMemory`.
    private let claimedByWrite = Locked<[String: Session]>([:])

    private init(url: PostgresURL, logger: Logger) {
        self.client = PostgresClient(configuration: url.clientConfiguration, backgroundLogger: logger)
        // `immediate`: `run()` has begun when `init` returns, so the first lease does not find the pool idle.
        self.running = Task.immediate { [client] in await client.run() }
        self.logger = logger
    }

    /// Connects and brings the schema up to date; throws when the database cannot be reached within `limit`.
    static func open(url: PostgresURL, logger: Logger, limit: Duration = .seconds(30)) async throws
        -> PostgresSessionStore
    {
        let store = PostgresSessionStore(url: url, logger: logger)
        do {
            try await withTimeLimit(limit) {
                try await store.migrate()
                try await store.heartbeat()
            }
        } catch {
            store.running.cancel()
            guard error is StoreUnreachable else { throw error }
            throw StoreUnreachable(
                description: "PostgreSQL at \(url.host):\(url.port) did not answer within \(limit)")
        }
        return store
    }

    /// The schema's versions, in order: each brings the database from the one before.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE linkrelay_sessions (
                id text PRIMARY KEY, link_key text NOT NULL UNIQUE, idempotency_key text UNIQUE,
                state text NOT NULL, version integer NOT NULL, expires_at timestamptz NOT NULL, data text NOT NULL,
                verifier text)
            """,
            // The instances that are running, each seen every `heartbeat` seconds.
            "CREATE TABLE linkrelay_instances (id text PRIMARY KEY, seen_at timestamptz NOT NULL)",
            // Idempotency-Keys whose session an instance is making now.
            "CREATE TABLE linkrelay_idempotency (key text PRIMARY KEY, instance text NOT NULL)",
            """
            CREATE INDEX linkrelay_sessions_live ON linkrelay_sessions (expires_at)
            WHERE state IN ('waiting', 'tapped')
            """,
            """
            CREATE TABLE linkrelay_events (
                session_id text NOT NULL REFERENCES linkrelay_sessions (id) ON DELETE CASCADE,
                seq integer NOT NULL, data text NOT NULL, PRIMARY KEY (session_id, seq))
            """,
        ],
        // The sweep for verifications left behind (`orphanedVerifications`, every `heartbeat` seconds on
        // each instance) read every live session; this index holds only the tapped ones.
        ["CREATE INDEX linkrelay_sessions_tapped ON linkrelay_sessions (verifier) WHERE state = 'tapped'"],
        // The webhook outbox (`PostgresSessionStore+Webhooks`).
        [
            """
            CREATE TABLE linkrelay_webhooks (
                id text PRIMARY KEY, session_id text NOT NULL, type text NOT NULL, created_at timestamptz NOT NULL,
                state text NOT NULL, next_attempt_at timestamptz NOT NULL, attempts text NOT NULL, payload text NOT NULL)
            """,
            "CREATE INDEX linkrelay_webhooks_due ON linkrelay_webhooks (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX linkrelay_webhooks_by_state ON linkrelay_webhooks (state, created_at)",
        ],
        // Tenants, and what retention deletes and erases. Messages and sessions stored before belong to
        // `default` (a session's tenant is in its JSON, absent meaning `default`); a stored event's `at`
        // is in seconds since 2001.
        [
            "ALTER TABLE linkrelay_sessions ADD COLUMN ended_at timestamptz, ADD COLUMN individual_until timestamptz",
            """
            UPDATE linkrelay_sessions AS s SET ended_at = (
                SELECT to_timestamp((e.data::json->>'at')::float8 + 978307200) FROM linkrelay_events AS e
                WHERE e.session_id = s.id ORDER BY e.seq DESC LIMIT 1)
            WHERE s.state NOT IN ('waiting', 'tapped')
            """,
            // Kept since before: erased as though created with the default retention (15 min + 900 s).
            """
            UPDATE linkrelay_sessions
            SET individual_until = to_timestamp((data::json->>'createdAt')::float8 + 978307200 + 1800)
            WHERE data::json->'prefill'->'individual' IS NOT NULL
            """,
            "CREATE INDEX linkrelay_sessions_ended ON linkrelay_sessions (ended_at) WHERE ended_at IS NOT NULL",
            """
            CREATE INDEX linkrelay_sessions_individual ON linkrelay_sessions (individual_until)
            WHERE individual_until IS NOT NULL
            """,
            "ALTER TABLE linkrelay_webhooks ADD COLUMN tenant text NOT NULL DEFAULT 'default'",
            // Each tenant's receiver has its own claims: by tenant, then as before.
            "DROP INDEX linkrelay_webhooks_due",
            """
            CREATE INDEX linkrelay_webhooks_due ON linkrelay_webhooks (tenant, next_attempt_at) WHERE state = 'pending'
            """,
            "CREATE INDEX linkrelay_webhooks_by_tenant ON linkrelay_webhooks (tenant, state, created_at)",
        ],
        // A claim moves `next_attempt_at` to its lease's end; `leased_until` tells a message being sent from
        // one waiting for a retry, which a receiver that is back makes due (`makeRetriesDue`). And
        // `?session=` of the listing: a session's few messages, not a scan of its tenant's.
        [
            "ALTER TABLE linkrelay_webhooks ADD COLUMN leased_until timestamptz",
            "CREATE INDEX linkrelay_webhooks_by_session ON linkrelay_webhooks (session_id)",
        ],
    ]

    static var schemaVersion: Int { migrations.count }

    /// Creates or upgrades the schema. Instances starting at once take turns on an advisory lock, so
    /// each version is applied once; safe to run on every start.
    private func migrate() async throws {
        try await client.withTransaction(logger: logger) { connection in
            // Any fixed number works: it names this lock among the database's advisory locks.
            _ = try await connection.query("SELECT pg_advisory_xact_lock(7141720230)", logger: logger).collect()
            _ = try await connection.query(
                "CREATE TABLE IF NOT EXISTS linkrelay_schema (version integer NOT NULL)", logger: logger
            ).collect()
            var current = 0
            for try await version in try await connection.query(
                "SELECT coalesce(max(version), 0) FROM linkrelay_schema", logger: logger
            ).decode(Int.self) {
                current = version
            }
            for (index, statements) in Self.migrations.enumerated() where index + 1 > current {
                for statement in statements {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
                }
                _ = try await connection.query(
                    "INSERT INTO linkrelay_schema (version) VALUES (\(index + 1))", logger: logger
                ).collect()
            }
        }
    }

    func insert(_ session: Session, event: SessionEvent) async throws {
        do {
            // A statement's error arrives with its rows: reading them is what waits for the commit.
            _ = try await writing { try await all(InsertSession(session: session, event: event)) }
        } catch let error as PSQLError
            where error.serverInfo?[.sqlState] == "23505"
            && error.serverInfo?[.constraintName]?.contains("idempotency") == true
        {
            throw StoreError.duplicateIdempotencyKey
        }
    }

    func discard(sessionID: String) async throws {
        // Its events go with it (ON DELETE CASCADE).
        try await writing {
            _ = try await client.query("DELETE FROM linkrelay_sessions WHERE id = \(sessionID)", logger: logger)
                .collect()
        }
    }

    /// Runs a write; one the database did not take for want of the database (the connection lost, the
    /// server read-only, shutting down or out of room) is `StoreError.unavailable`. A constraint's
    /// refusal stays as it is, for the caller to read.
    func writing<T>(_ write: () async throws -> T) async throws -> T {
        do {
            return try await write()
        } catch let error as PSQLError {
            let state = error.serverInfo?[.sqlState] ?? ""
            // Class 23: integrity constraints, which the caller tells apart.
            if state.hasPrefix("23") { throw error }
            throw StoreError.unavailable
        }
    }

    func update(
        _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
        reporting messages: [WebhookMessage],
        committed: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        let statement = UpdateSession(
            session: session, expectedVersion: expectedVersion, events: events, messages: messages,
            instanceID: instanceID)
        // One row when written, saying whether this instance now holds the verification. An entry left
        // by an earlier write is replaced either way; one used meanwhile is refused by its version.
        let claimed = try await writing { try await all(statement).first }
        claimedByWrite.withLock { $0[session.id] = claimed == true ? session : nil }
        if claimed != nil { committed() }
        return claimed != nil
    }

    /// Claims the session's verification for this instance, and reads it: nil when another instance
    /// that is still running holds it. The instance whose write landed the session holds it from that
    /// write (`update`); a claim stays until the session ends or its instance is gone.
    ///
    /// Right after this instance's landing, the session as that write left it is enough, and saves a
    /// statement per tap. Should another instance have changed it since (a cancel), the verifier's
    /// write is refused by its version and made again on the session as it is now.
    func sessionToVerify(id: String) async throws -> Session? {
        if let session = claimedByWrite.withLock({ $0.removeValue(forKey: id) }) { return session }
        return try await sessions(ClaimVerification(sessionID: id, instanceID: instanceID)).first
    }

    /// Every read goes to the database: a channel opens through `session(id:)`.
    func sessionInMemory(id: String) -> Session? { nil }
    func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]? { nil }

    func releaseMemory() async {
        claimedByWrite.withLock { $0 = [:] }
    }

    /// A key another instance reserved is free once that instance is gone. This instance makes one
    /// session per key at a time (`SessionService.create`), so a reservation of its own is its to renew.
    func reserveIdempotencyKey(_ key: String) async throws -> Bool {
        try await !client.query(
            """
            INSERT INTO linkrelay_idempotency (key, instance) VALUES (\(key), \(instanceID))
            ON CONFLICT (key) DO UPDATE SET instance = excluded.instance
            WHERE linkrelay_idempotency.instance = excluded.instance OR linkrelay_idempotency.instance NOT IN (
                SELECT id FROM linkrelay_instances WHERE seen_at > now() - make_interval(secs => \(Self.presumedGone)))
            RETURNING 1
            """,
            logger: logger
        ).collect().isEmpty
    }

    func releaseIdempotencyKey(_ key: String) async throws {
        _ = try await client.query(
            "DELETE FROM linkrelay_idempotency WHERE key = \(key) AND instance = \(instanceID)", logger: logger
        ).collect()
    }

    /// Says this instance is running; to be called every `heartbeat` seconds.
    func heartbeat() async throws {
        _ = try await client.query(
            """
            INSERT INTO linkrelay_instances (id, seen_at) VALUES (\(instanceID), now())
            ON CONFLICT (id) DO UPDATE SET seen_at = now()
            """,
            logger: logger
        ).collect()
    }

    /// This instance stops: its claims can be taken over at once.
    func leave() async throws {
        _ = try await client.query("DELETE FROM linkrelay_instances WHERE id = \(instanceID)", logger: logger).collect()
    }

    /// Landed sessions, and live Nevis sessions (asked about from the start), that no running instance is
    /// verifying: the instance that landed, created or took them over is gone.
    func orphanedVerifications() async throws -> [String] {
        try await ids(
            """
            SELECT id FROM linkrelay_sessions
            WHERE (verifier IS NULL OR verifier NOT IN (
                SELECT id FROM linkrelay_instances WHERE seen_at > now() - make_interval(secs => \(Self.presumedGone))))
            AND (state = 'tapped' OR (state = 'waiting' AND data::json->'nevis' IS NOT NULL))
            """)
    }

    /// Live sessions whose hold ended more than `grace` seconds ago, which their instance would have
    /// expired if it were still running.
    func overdueSessions(grace: Int) async throws -> [String] {
        try await ids(
            """
            SELECT id FROM linkrelay_sessions
            WHERE state IN ('waiting', 'tapped') AND expires_at < now() - make_interval(secs => \(grace))
            """)
    }

    func session(id: String) async throws -> Session? {
        try await sessions(SessionByID(id: id)).first
    }

    func session(linkKey: String) async throws -> Session? {
        try await sessions(SessionByLinkKey(linkKey: linkKey)).first
    }

    func session(idempotencyKey: String) async throws -> Session? {
        try await oneSession("SELECT data FROM linkrelay_sessions WHERE idempotency_key = \(idempotencyKey)")
    }

    func events(sessionID: String, after: Int) async throws -> [SessionEvent] {
        try await all(EventsAfter(sessionID: sessionID, after: after)).map {
            try decoder.decode(SessionEvent.self, from: Data($0.utf8))
        }
    }

    /// Every event of each of `sessionIDs`, in order, by session (none for a session that has none):
    /// one query for all of them.
    func events(of sessionIDs: [String]) async throws -> [String: [SessionEvent]] {
        var events: [String: [SessionEvent]] = [:]
        for (id, data) in try await all(EventsOf(sessionIDs: sessionIDs)) {
            events[id, default: []].append(try decoder.decode(SessionEvent.self, from: Data(data.utf8)))
        }
        return events
    }

    func activeSessions() async throws -> [Session] {
        try await decodeAll(Session.self, "SELECT data FROM linkrelay_sessions WHERE state IN ('waiting', 'tapped')")
    }

    func sessionsWithIndividual(keptUntil date: Date, limit: Int) async throws -> [String] {
        try await ids(
            """
            SELECT id FROM linkrelay_sessions WHERE individual_until <= \(date) ORDER BY individual_until LIMIT \(limit)
            """)
    }

    /// Their events go with them (ON DELETE CASCADE). Several instances may purge at once: `SKIP LOCKED`
    /// gives each its own rows.
    func deleteSessions(endedBefore date: Date, limit: Int) async throws -> Int {
        try await writing {
            try await ids(
                """
                DELETE FROM linkrelay_sessions WHERE id IN (
                    SELECT id FROM linkrelay_sessions WHERE ended_at < \(date) ORDER BY ended_at LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED)
                RETURNING id
                """
            ).count
        }
    }

    /// The pool keeps retrying while the server is down, and a request waits meanwhile: `/readyz`
    /// must answer sooner than that.
    /// The server answers, and takes writes: a server that has become a read-only standby (after a
    /// failover) answers reads but refuses every write.
    func ping() async throws {
        try await withTimeLimit(.seconds(2)) { [client, logger] in
            let rows = try await client.query("SELECT current_setting('transaction_read_only')", logger: logger)
            for try await readOnly in rows.decode(String.self) where readOnly != "off" {
                throw StoreError.unavailable
            }
        }
    }

    func close() async throws {
        running.cancel()
        await running.value
    }

    private func ids(_ query: PostgresQuery) async throws -> [String] {
        var ids: [String] = []
        for try await id in try await client.query(query, logger: logger).decode(String.self) { ids.append(id) }
        return ids
    }

    private func oneSession(_ query: PostgresQuery) async throws -> Session? {
        try await decodeAll(Session.self, query).first
    }

    private func decodeAll<T: Decodable>(_ type: T.Type, _ query: PostgresQuery) async throws -> [T] {
        var values: [T] = []
        for try await data in try await client.query(query, logger: logger).decode(String.self) {
            values.append(try decoder.decode(type, from: Data(data.utf8)))
        }
        return values
    }

    private func sessions<Statement: StoredText>(_ statement: Statement) async throws -> [Session] {
        try await all(statement).map { try decoder.decode(Session.self, from: Data($0.utf8)) }
    }

    private func all<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [Statement.Row] {
        var rows: [Statement.Row] = []
        for try await row in try await client.execute(statement, logger: logger) { rows.append(row) }
        return rows
    }
}

// MARK: - the statements of taps, verifications and channels, prepared once per connection
//
// PostgreSQL then parses and plans each of them once per pooled connection instead of at every
// call, where parsing and planning cost more than running them (docs/store.md).

/// A prepared statement whose rows are one text column.
private protocol StoredText: PostgresPreparedStatement where Row == String {}

extension StoredText {
    func decodeRow(_ row: PostgresRow) throws -> String { try row.decode(String.self) }
}

/// A write: only how many rows it returns matters (the value of `pg_notify`, or NULL, is not read).
private protocol Write: PostgresPreparedStatement where Row == Void {}

extension Write {
    func decodeRow(_ row: PostgresRow) {}
}

private struct SessionByID: StoredText {
    static let sql = "SELECT data FROM linkrelay_sessions WHERE id = $1"
    var id: String
    func makeBindings() -> PostgresBindings { .init(id) }
}

private struct SessionByLinkKey: StoredText {
    static let sql = "SELECT data FROM linkrelay_sessions WHERE link_key = $1"
    var linkKey: String
    func makeBindings() -> PostgresBindings { .init(linkKey) }
}

private struct EventsAfter: StoredText {
    static let sql = "SELECT data FROM linkrelay_events WHERE session_id = $1 AND seq > $2 ORDER BY seq"
    var sessionID: String
    var after: Int
    func makeBindings() -> PostgresBindings { .init(sessionID, after) }
}

/// Every event of several sessions, as (session id, event) rows in each session's order.
private struct EventsOf: PostgresPreparedStatement {
    static let sql = "SELECT session_id, data FROM linkrelay_events WHERE session_id = ANY($1) ORDER BY session_id, seq"
    var sessionIDs: [String]
    func makeBindings() -> PostgresBindings { .init(sessionIDs) }
    func decodeRow(_ row: PostgresRow) throws -> (String, String) { try row.decode((String, String).self) }
}

/// Claims the session's verification (see `sessionToVerify`) and returns it.
private struct ClaimVerification: StoredText {
    static let sql = """
        UPDATE linkrelay_sessions SET verifier = $2
        WHERE id = $1 AND (verifier IS NULL OR verifier = $2 OR verifier NOT IN (
            SELECT id FROM linkrelay_instances WHERE seen_at > now() - make_interval(secs => \(
                PostgresSessionStore.presumedGone))))
        RETURNING data
        """
    var sessionID: String
    var instanceID: String
    func makeBindings() -> PostgresBindings { .init(sessionID, instanceID) }
}

/// The new session, its first event and the wake-up, in one statement.
private struct InsertSession: Write {
    static let sql = """
        WITH s AS (
            INSERT INTO linkrelay_sessions (id, link_key, idempotency_key, state, version, expires_at, data)
            VALUES ($1, $2, $9, $3, $4, $5, $6)
            RETURNING id),
        e AS (INSERT INTO linkrelay_events (session_id, seq, data) SELECT id, $7, $8 FROM s)
        SELECT pg_notify('\(PostgresSessionStore.channel)', id || ' ' || $7::text) FROM s
        """
    var session: Session
    var event: SessionEvent
    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(
            session.id, session.linkKey, session.state.rawValue, session.version, session.expiresAt,
            String(decoding: session.storedJSON, as: UTF8.self), event.seq,
            String(decoding: event.storedJSON, as: UTF8.self))
        bindings.append(session.idempotencyKey)  // $9, last: it may be NULL
        return bindings
    }
}

/// Writes the session if it is still at `expectedVersion`, with its new events and their wake-up:
/// one row when it was, which says whether this instance now holds the session's verification.
private struct UpdateSession: PostgresPreparedStatement {
    static let sql = """
        WITH s AS (
            UPDATE linkrelay_sessions SET state = $2, version = $3, expires_at = $4, data = $5,
                verifier = CASE WHEN $6 THEN coalesce(verifier, $7) END, ended_at = $17, individual_until = $18
            WHERE id = $1 AND version = $8
            RETURNING id, verifier),
        e AS (
            INSERT INTO linkrelay_events (session_id, seq, data)
            SELECT s.id, x.seq, x.data FROM s, unnest($9::int8[], $10::text[]) AS x (seq, data)),
        w AS (
            INSERT INTO linkrelay_webhooks (
                id, session_id, tenant, type, created_at, state, next_attempt_at, attempts, payload)
            SELECT x.id, s.id, $19, x.type, x.at, 'pending', x.at, '[]', x.payload
            FROM s, unnest($13::text[], $14::text[], $15::timestamptz[], $16::text[]) AS x (id, type, at, payload))
        SELECT (SELECT pg_notify('\(PostgresSessionStore.channel)', s.id || ' ' || $11::text) WHERE $12),
            coalesce(s.verifier = $7, false)
        FROM s
        """
    var session: Session
    var expectedVersion: Int
    var events: [SessionEvent]
    var messages: [WebhookMessage]
    var instanceID: String
    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(
            session.id, session.state.rawValue, session.version, session.expiresAt,
            String(decoding: session.storedJSON, as: UTF8.self), session.verificationPending, instanceID,
            expectedVersion, events.map(\.seq), events.map { String(decoding: $0.storedJSON, as: UTF8.self) },
            events.last?.seq ?? 0, !events.isEmpty, messages.map(\.id), messages.map(\.type),
            messages.map(\.createdAt), messages.map { String(decoding: $0.payload, as: UTF8.self) })
        bindings.append(session.endedAt)  // $17, $18: either may be NULL
        bindings.append(session.prefill?.individualKeptUntil)
        bindings.append(session.owner)  // $19
        return bindings
    }

    /// Whether the session's verifier is now this instance (the `pg_notify` column is not read).
    func decodeRow(_ row: PostgresRow) throws -> Bool { try row.makeRandomAccess()[1].decode(Bool.self) }
}

struct StoreUnreachable: Error, CustomStringConvertible {
    var description = "the store did not answer in time"
}

/// Runs `body`, cancelling it and throwing `StoreUnreachable` once `limit` has passed.
func withTimeLimit<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw StoreUnreachable()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw StoreUnreachable() }
        return first
    }
}

extension PostgresBindings {
    fileprivate init(_ values: any PostgresDynamicTypeEncodable...) {
        self.init(capacity: values.count)
        for value in values { append(value) }
    }
}
