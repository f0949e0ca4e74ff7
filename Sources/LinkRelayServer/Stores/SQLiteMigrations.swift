import SQLiteNIO

/// The SQLite store's schema, versioned: each step is one transaction, run at start.
enum SQLiteMigrations {
    /// The schema's versions, in order: each brings the file from the one before. A new file gets them all.
    static let steps: [[String]] = [
        [
            """
            CREATE TABLE IF NOT EXISTS sessions (
                id TEXT PRIMARY KEY, link_key TEXT NOT NULL UNIQUE, idempotency_key TEXT UNIQUE,
                state TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS sessions_active ON sessions (state) WHERE state IN ('waiting', 'tapped')",
            """
            CREATE TABLE IF NOT EXISTS events (
                session_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)) WITHOUT ROWID
            """,
        ],
        // A session's events move into its row (a JSON array), so that every write is one statement.
        [
            "ALTER TABLE sessions ADD COLUMN events TEXT NOT NULL DEFAULT '[]'",
            """
            UPDATE sessions SET events = (
                SELECT json_group_array(json(data) ORDER BY seq) FROM events WHERE session_id = sessions.id)
            """,
            "DROP TABLE events",
        ],
        // One row that readiness writes, to learn that the file still takes writes.
        ["CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY, checked_at INTEGER NOT NULL)"],
        // The webhook outbox (`SQLiteSessionStore+Webhooks`); times in milliseconds since 1970.
        [
            """
            CREATE TABLE webhook_messages (
                id TEXT PRIMARY KEY, session_id TEXT NOT NULL, type TEXT NOT NULL, created_at INTEGER NOT NULL,
                state TEXT NOT NULL, next_attempt_at INTEGER NOT NULL, attempts TEXT NOT NULL, payload TEXT NOT NULL)
            """,
            "CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX webhook_messages_by_state ON webhook_messages (state, created_at)",
        ],
        // New messages wait here, appended, until their first attempt's outcome moves them into
        // `webhook_messages`: a tap's commit then dirties one page for its messages, not a row and three
        // indexes (Benchmarks/HISTORY.md).
        [
            """
            CREATE TABLE webhook_queue (
                seq INTEGER PRIMARY KEY, id TEXT NOT NULL, session_id TEXT NOT NULL, type TEXT NOT NULL,
                created_at INTEGER NOT NULL, payload TEXT NOT NULL)
            """
        ],
        // Tenants, and what retention deletes and erases. Messages and sessions stored before belong to
        // `default` (a session's tenant is in its JSON, absent meaning `default`). Times in milliseconds
        // since 1970; a stored event's `at` is in seconds since 2001. `ended_at` and `individual_until` are
        // written only by the writes that change them, so a tap's update maintains neither index.
        [
            "ALTER TABLE sessions ADD COLUMN ended_at INTEGER",
            "ALTER TABLE sessions ADD COLUMN individual_until INTEGER",
            """
            UPDATE sessions SET ended_at = CAST(round((json_extract(events, '$[#-1].at') + 978307200) * 1000) AS INTEGER)
            WHERE state NOT IN ('waiting', 'tapped')
            """,
            // Kept since before: erased as though created with the default retention (15 min + 900 s).
            """
            UPDATE sessions SET individual_until =
                CAST(round((json_extract(data, '$.createdAt') + 978307200 + 1800) * 1000) AS INTEGER)
            WHERE json_extract(data, '$.prefill.individual') IS NOT NULL
            """,
            "CREATE INDEX sessions_ended ON sessions (ended_at) WHERE ended_at IS NOT NULL",
            "CREATE INDEX sessions_individual ON sessions (individual_until) WHERE individual_until IS NOT NULL",
            "ALTER TABLE webhook_messages ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'",
            // Each tenant's receiver has its own claims: by tenant, then as before.
            "DROP INDEX webhook_messages_due",
            "CREATE INDEX webhook_messages_due ON webhook_messages (tenant, next_attempt_at) WHERE state = 'pending'",
            // A tenant's claims read only its own queued messages, whatever another's backlog. (A table kept
            // in that order, `WITHOUT ROWID`, made the taps' p99 with webhooks worse: Benchmarks/HISTORY.md.)
            "ALTER TABLE webhook_queue ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'",
            "CREATE INDEX webhook_queue_by_tenant ON webhook_queue (tenant, seq)",
        ],
        // `GET /v1/webhooks/messages?session=`: a session's few messages, not a scan of its tenant's.
        ["CREATE INDEX webhook_messages_by_session ON webhook_messages (session_id)"],
    ]

    static var schemaVersion: Int { steps.count }

    /// Creates or upgrades the schema, one version per transaction; safe to run on every start.
    static func migrate(_ connection: SQLiteConnection) async throws {
        // The version table comes with the first version, so a file that fails it is left as it was.
        var current = 0
        if try await !connection.query("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").isEmpty {
            let row = try await connection.query("SELECT MAX(version) AS v FROM schema_version").first
            current = row?.column("v")?.integer ?? 0
        }
        for (index, statements) in steps.enumerated() where index + 1 > current {
            _ = try await connection.query("BEGIN IMMEDIATE")
            do {
                _ = try await connection.query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                for statement in statements { _ = try await connection.query(statement) }
                _ = try await connection.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(index + 1)])
                _ = try await connection.query("COMMIT")
            } catch {
                _ = try? await connection.query("ROLLBACK")
                throw error
            }
        }
    }
}
