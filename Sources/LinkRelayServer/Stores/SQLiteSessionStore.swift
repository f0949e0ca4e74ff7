import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOCore
import SQLiteNIO
import VaporCSQLite

/// Sessions in a SQLite file (WAL). A write commits before the relay announces it, so `kill -9`
/// and a restart lose nothing that any response or event has mentioned.
///
/// A session's row holds its events too (a JSON array), so every write is one statement. Writes go
/// through one connection (`SQLiteWriter`), which commits the writes that queued meanwhile together;
/// reads use other connections, which in WAL mode see only committed data.
///
/// Each connection runs one statement at a time. SQLiteNIO would run several at once on a
/// connection's thread pool, and statements running at once share one read transaction: a read that
/// overlaps a longer one sees the data as it was before a commit that came first.
///
/// The WAL is copied into the database file (a checkpoint) by a connection on a thread of its own,
/// every `checkpointInterval`. Left to SQLite, the commit that takes the WAL past 1,000 pages does it,
/// and that commit, with every write queued behind it, waits for the copy and its two fsyncs. See
/// `SQLiteCheckpointer.run()` for how the WAL still starts over.
///
/// Sessions are also kept in memory as last committed, with their events: every live one (waiting or
/// tapped) and the last 2,048 that ended, until the second `releaseMemory` after they ended. So the
/// reads of a landing, a verification and a channel (a session by id or link key, and the events a
/// long-poll asks for again) need neither SQL nor JSON.
/// Only the writer fills that copy, after its commit and before its next write, so it is never older
/// than the file. Everything else is read from the file. The relay is the file's only writer.
///
/// Every connection opens the file through SQLite's `unix-excl` VFS: the process holds the file
/// exclusively, and the WAL's index lives in the process's memory instead of a memory-mapped `-shm`
/// file. A mapped file that stops being writable (a disk remounted read-only, an immutable file)
/// stops the process with SIGBUS at the next write to it; with the index in memory, such a disk makes
/// writes fail, which the store reports as `StoreError.unavailable` (503) until one goes through again.
///
/// A statement that meets a damaged file (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) marks the store corrupt
/// until restart (`StorageHealth`): from then on every call that needs the store throws
/// `StoreError.corrupt` (503) without touching the file, the sessions kept in memory included, so that
/// the relay answers alike whichever copy a request would have read. The file is checked before it
/// is opened (`SQLiteFile`), and made with mode 0600 when the relay creates it.
final class SQLiteSessionStore: RelayStore {
    /// The VFS every connection uses (see above).
    static let vfs = "unix-excl"
    static let readerCount = 2
    /// At most this many live sessions are kept in memory; reads of the others go to the file.
    static let liveCapacity = 100_000
    /// How many of the sessions that ended last are kept in memory too.
    static let endedCapacity = 2048
    static let checkpointInterval: Duration = .seconds(1)
    /// A WAL this long (SQLite's own threshold) is made to start over: see `checkpoint()`.
    static let restartPages = 1000
    /// Should the checkpointer fall behind, the commit that takes the WAL past this many pages (80 MiB)
    /// checkpoints after all.
    static let backstopCheckpointPages = 20_000

    let writer: SQLiteWriter
    private let readers: [(connection: SQLiteConnection, lock: AsyncMutex)]
    private let checkpointer: SQLiteCheckpointer
    private let checkpointing: Task<Void, Never>
    private let closing = Locked<Task<Void, any Error>?>(nil)
    private let nextReader = Locked(0)
    private let cache = Locked(SQLiteSessionCache(liveCapacity: liveCapacity, endedCapacity: endedCapacity))
    private let decoder = JSONDecoder()
    private let health: StorageHealth
    /// Claimed webhook messages and the outcomes just stored: kept here, not in the file, since this
    /// process is the file's one writer (`SQLiteSessionStore+Webhooks`).
    let webhookLeases = Locked(WebhookLeases())

    /// The database file, as given.
    let path: String

    private init(
        path: String, writer: SQLiteWriter, readers: [SQLiteConnection], checkpointer: SQLiteCheckpointer,
        checkpointInterval: Duration?,
        logger: Logger
    ) {
        self.path = path
        self.writer = writer
        let health = StorageHealth(logger: logger, path: path)
        self.health = health
        self.readers = readers.map { ($0, AsyncMutex()) }
        self.checkpointer = checkpointer
        self.checkpointing = Task {
            guard let checkpointInterval else { return }
            let clock = EventLoopClock()
            var failing = false
            while (try? await clock.sleep(for: checkpointInterval)) != nil {
                // Copying more into a damaged file helps no one, and would meet the damage every second.
                if health.isCorrupt { continue }
                do {
                    try await checkpointer.run()
                    if failing { logger.notice("SQLite checkpoints work again") }
                    failing = false
                } catch {
                    if Task.isCancelled { return }  // the store is closing
                    if SQLiteFile.isCorruption(error) {
                        health.corrupted(error)
                        continue
                    }
                    // Once per run of failures: until one works, commits checkpoint at the backstop.
                    if !failing { logger.warning("SQLite checkpoint failed", metadata: ["error": "\(error)"]) }
                    failing = true
                }
            }
        }
    }

    /// `checkpointInterval` nil: no checkpoints but those asked for (`checkpoint()`).
    static func open(path: String, logger: Logger, checkpointInterval: Duration? = checkpointInterval) async throws
        -> SQLiteSessionStore
    {
        // `synchronous=NORMAL` in WAL mode keeps every commit across a process crash (kill -9);
        // only an operating-system crash or power loss can lose the newest commits. `secure_delete=FAST`
        // zeroes what a write frees within the pages it writes anyway (an erased individual's bytes, a
        // row rewritten smaller); the retention's deletions turn it on for their writes, so that the pages
        // they free are zeroed too (`deleteSessions`).
        let pragmas = [
            "PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000",
            "PRAGMA wal_autocheckpoint=\(backstopCheckpointPages)", "PRAGMA secure_delete=FAST",
        ]
        // A new file only where none exists, made private (0600) before SQLite opens it; an existing
        // one is looked at before any pragma can change it, and refused if the relay must not trust it.
        do {
            if try !SQLiteFile.createPrivate(path) {
                try await SQLiteFile.checkBeforeOpening(path, logger: logger)
            }
        } catch {
            throw ConfigurationError("--store \(error.description)")
        }
        let writer: SQLiteWriter
        do {
            writer = try await SQLiteWriter.open(path: path, pragmas: pragmas)
        } catch let failure as SQLiteWriter.Failure where failure.code & 0xFF == SQLITE_BUSY {
            throw ConfigurationError("--store \(SQLiteFile.Problem(path: path, kind: .held))")
        }
        let checkpointThread = NIOThreadPool(numberOfThreads: 1)
        checkpointThread.start()
        var readers: [SQLiteConnection] = []
        var checkpointConnection: SQLiteConnection?
        do {
            for _ in 0..<readerCount {
                readers.append(try await SQLiteConnection.open(storage: .file(path: uri(path)), logger: logger))
                _ = try await readers.last?.query("PRAGMA busy_timeout=5000")
            }
            let connection = try await SQLiteConnection.open(
                storage: .file(path: uri(path)), threadPool: checkpointThread, logger: logger,
                on: MultiThreadedEventLoopGroup.singleton.any())
            checkpointConnection = connection
            _ = try await connection.query("PRAGMA busy_timeout=5000")
            try await SQLiteMigrations.migrate(connection)
            let checkpointer = SQLiteCheckpointer(
                connection: connection, thread: checkpointThread,
                files: SyncedFiles(paths: [path, path + "-wal"]), writer: writer)
            return SQLiteSessionStore(
                path: path, writer: writer, readers: readers, checkpointer: checkpointer,
                checkpointInterval: checkpointInterval,
                logger: logger)
        } catch {
            // E.g. a file with tables of another program's. What was opened is closed: SQLiteNIO stops the
            // process when a connection is dropped unclosed.
            try? await closeAll(
                ([checkpointConnection].compactMap { $0 } + readers).map { $0.close }, checkpointThread, writer)
            throw error
        }
    }

    /// `path` as a URI that opens it through `vfs` (SQLiteNIO opens with URIs allowed).
    static func uri(_ path: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#%")
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return "file:" + (absolute.addingPercentEncoding(withAllowedCharacters: allowed) ?? absolute) + "?vfs=" + vfs
    }

    /// Runs a write through the writer (`SQLiteWriter.write`). One that SQLite could not make (the disk
    /// read-only or full, the file removed) is `StoreError.unavailable`, and the store counts as failing
    /// until a write goes through again. One that met a damaged page is `StoreError.corrupt`, for good.
    func write<T: Sendable>(
        onCallersThread: Bool = true,
        _ body: @escaping @Sendable (SQLiteWriter.Connection) throws -> T,
        committed: @escaping @Sendable (Result<T, any Error>) -> Void = { _ in }
    ) async throws -> T {
        guard !health.isCorrupt else { throw StoreError.corrupt }
        do {
            // Only a commit that changed rows reached the file: a write that changed nothing (a retention
            // pass with nothing to delete) commits even on a file that refuses writes.
            let (result, changedRows) = try await writer.write(
                onCallersThread: onCallersThread,
                { connection in
                    let before = connection.totalChanges
                    let result = try body(connection)
                    return (result, connection.totalChanges != before)
                },
                committed: { committed($0.map(\.0)) })
            if changedRows { health.succeeded() }
            return result
        } catch let failure as SQLiteWriter.Failure {
            if SQLiteFile.isCorruption(failure) {
                health.corrupted(failure)
                throw StoreError.corrupt
            }
            health.failed(failure)
            throw StoreError.unavailable
        }
    }

    /// Whether a statement met a damaged file: then everything that needs the store answers 503 until restart.
    var isCorrupt: Bool { health.isCorrupt }

    /// Copies the WAL into the database file; returns the WAL's pages and how many of them are now in the file.
    @discardableResult
    func checkpoint() async throws -> (walPages: Int, copied: Int) {
        try await checkpointer.run()
    }

    func insert(_ session: Session, event: SessionEvent) async throws {
        let values: [SQLiteWriter.Value] = [
            .text(session.id), .text(session.linkKey), session.idempotencyKey.map { .text($0) } ?? .null,
            .text(session.state.rawValue), .integer(session.version),
            .utf8(session.storedJSON), .utf8(event.storedJSON),
        ]
        try await write(
            { connection in
                // The writer runs one write at a time, so the check and the insert are one step: this process is the only writer.
                if let key = session.idempotencyKey,
                    try connection.step("SELECT 1 FROM sessions WHERE idempotency_key = ?", [.text(key)])
                {
                    throw StoreError.duplicateIdempotencyKey
                }
                _ = try connection.step(
                    """
                    INSERT INTO sessions (id, link_key, idempotency_key, state, version, data, events)
                    VALUES (?, ?, ?, ?, ?, ?, '[' || ? || ']')
                    """, values)
            },
            committed: { [cache] result in
                if case .success = result { cache.withLock { $0.inserted(session, event) } }
            })
    }

    /// Stores a session (`?3`) at a new state and version (`?1`, `?2`) if it is still at `?6`, and
    /// appends the events in `?4` (their JSON objects, comma-separated; `NULL` for none) to its array.
    /// The events are spliced in as text: SQLite's `json_insert` parsed and wrote the whole array again
    /// for every write. Only an ended session's write sets `ended_at` (`?7`), and only a Pre-Fill
    /// session's `individual_until` (the next number): SQLite maintains an index for every write that
    /// names its column, and a tap names neither. By `updateSQLIndex(ended:prefill:)`.
    static let updateSQL: [String] = [(false, false), (true, false), (false, true), (true, true)].map {
        ended, prefill in
        var columns = ""
        if ended { columns += ", ended_at = ?7" }
        if prefill { columns += ", individual_until = ?\(ended ? 8 : 7)" }
        return """
            UPDATE sessions SET state = ?1, version = ?2, data = ?3, events = CASE
                WHEN ?4 IS NULL THEN events
                WHEN events = '[]' THEN '[' || ?4 || ']'
                ELSE substr(events, 1, length(events) - 1) || ',' || ?4 || ']' END\(columns)
            WHERE id = ?5 AND version = ?6
            """
    }

    static func updateSQLIndex(ended: Bool, prefill: Bool) -> Int { (ended ? 1 : 0) + (prefill ? 2 : 0) }

    func update(
        _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
        reporting messages: [WebhookMessage],
        committed: @escaping @Sendable () -> Void
    ) async throws -> Bool {
        var appended = SQLiteWriter.Value.null
        if let first = events.first {
            var objects = first.storedJSON
            for event in events.dropFirst() {
                objects.append(UInt8(ascii: ","))
                objects.append(contentsOf: event.storedJSON)
            }
            appended = .utf8(objects)
        }
        var values: [SQLiteWriter.Value] = [
            .text(session.state.rawValue), .integer(session.version), .utf8(session.storedJSON), appended,
            .text(session.id), .integer(expectedVersion),
        ]
        if let endedAt = session.endedAt { values.append(.integer(endedAt.millis)) }
        if let prefill = session.prefill {
            values.append(prefill.individualKeptUntil.map { .integer($0.millis) } ?? .null)
        }
        let sql = Self.updateSQL[Self.updateSQLIndex(ended: session.endedAt != nil, prefill: session.prefill != nil)]
        // A Pre-Fill session's row may hold an individual, before or after this write: the pages the
        // write frees (a page merged away, an old overflow chain) are zeroed too, not only the bytes
        // freed within the pages it writes anyway, so that no earlier copy of an individual stays in the file.
        let zeroing = session.prefill != nil
        return try await write(
            // Whether it changed the row, from SQLite's count: `RETURNING` makes SQLite open a temporary
            // table, with a page cache of its own, for every update.
            { [values] connection in
                if zeroing {
                    _ = try Self.zeroingFreedPages(connection) { try connection.step(sql, values) }
                } else {
                    _ = try connection.step(sql, values)
                }
                guard connection.changes == 1 else { return false }
                for message in messages { try Self.insert(message, connection) }
                return true
            },
            committed: { [cache] changed in
                // A refused write means the file holds a newer version than the caller read, and after a
                // failure whether it committed is unknown: either way the next reads go to the file, so
                // that a copy that somehow fell behind cannot refuse every retry.
                let stored = cache.withLock { cache in
                    guard case .success(true) = changed else {
                        cache.forget(session)
                        return false
                    }
                    cache.updated(session, appending: events)
                    return true
                }
                if stored { committed() }
            })
    }

    func session(id: String) async throws -> Session? {
        if let session = sessionInMemory(id: id) { return session }
        return try await oneSession("SELECT data FROM sessions WHERE id = ?", id)
    }

    /// Nil once the store is corrupt, so that the caller asks the store, which answers `corrupt`.
    func sessionInMemory(id: String) -> Session? {
        guard !health.isCorrupt else { return nil }
        return cache.withLock { $0.entry(id: id)?.session }
    }

    func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]? {
        guard !health.isCorrupt else { return nil }
        return cache.withLock { $0.entry(id: sessionID)?.events }?.filter { $0.seq > after }
    }

    func session(linkKey: String) async throws -> Session? {
        if !health.isCorrupt, let session = cache.withLock({ $0.entry(linkKey: linkKey)?.session }) {
            return session
        }
        return try await oneSession("SELECT data FROM sessions WHERE link_key = ?", linkKey)
    }

    func session(idempotencyKey: String) async throws -> Session? {
        try await oneSession("SELECT data FROM sessions WHERE idempotency_key = ?", idempotencyKey)
    }

    func events(sessionID: String, after: Int) async throws -> [SessionEvent] {
        if let events = eventsInMemory(sessionID: sessionID, after: after) { return events }
        guard let row = try await read("SELECT events AS data FROM sessions WHERE id = ?", [.text(sessionID)]).first
        else { return [] }
        return try decode([SessionEvent].self, row).filter { $0.seq > after }
    }

    func activeSessions() async throws -> [Session] {
        let rows = try await read("SELECT data FROM sessions WHERE state IN ('waiting', 'tapped')")
        return try rows.map { try decode(Session.self, $0) }
    }

    func sessionsWithIndividual(keptUntil date: Date, limit: Int) async throws -> [String] {
        try await read(
            "SELECT id FROM sessions WHERE individual_until <= ? ORDER BY individual_until LIMIT ?",
            [.integer(date.millis), .integer(limit)]
        ).compactMap { $0.column("id")?.string }
    }

    /// Reads the ids first, so that the write, which holds up every other, only deletes; the write
    /// does not run on the caller's thread (see `SQLiteWriter.write`).
    func deleteSessions(endedBefore date: Date, limit: Int) async throws -> Int {
        let ids = try await read(
            "SELECT id FROM sessions WHERE ended_at < ? ORDER BY ended_at LIMIT ?",
            [.integer(date.millis), .integer(limit)]
        ).compactMap { $0.column("id")?.string }
        guard !ids.isEmpty else { return 0 }
        return try await write(
            onCallersThread: false,
            { connection in
                try Self.zeroingFreedPages(connection) {
                    var deleted = 0
                    for id in ids {
                        _ = try connection.step(
                            "DELETE FROM sessions WHERE id = ? AND ended_at < ?", [.text(id), .integer(date.millis)])
                        deleted += connection.changes
                    }
                    return deleted
                }
            },
            committed: { [cache] result in
                guard case .success = result else { return }
                cache.withLock { cache in
                    for id in ids { cache.entry(id: id).map { cache.forget($0.session) } }
                }
            })
    }

    /// Runs `body` with `secure_delete` fully on: a page the deletions free is zeroed too, not only the
    /// bytes within pages written anyway, so that nothing of a deleted row stays in the file. Only the
    /// retention's deletions and the writes of Pre-Fill rows pay for it; the queue's pages, freed and taken
    /// again by every second's messages, do not.
    static func zeroingFreedPages<T>(_ connection: SQLiteWriter.Connection, _ body: () throws -> T) throws -> T {
        try connection.execute("PRAGMA secure_delete=ON")
        defer { try? connection.execute("PRAGMA secure_delete=FAST") }
        return try body()
    }

    /// Copies the WAL into the file and cuts it to 0 bytes (`SQLiteCheckpointer.truncate`): the retention
    /// calls it after a pass that erased or deleted, so that the WAL's earlier versions of those rows'
    /// pages leave the disk with them.
    func truncateJournal() async throws {
        guard !health.isCorrupt else { throw StoreError.corrupt }
        do {
            try await checkpointer.truncate()
        } catch let error where SQLiteFile.isCorruption(error) {
            health.corrupted(error)
            throw StoreError.corrupt
        }
    }

    /// A real write, so that readiness fails on a file that cannot take one.
    func ping() async throws {
        let now = Int(Date().timeIntervalSince1970)
        try await write { connection in
            _ = try connection.step(
                "INSERT INTO health (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at",
                [.integer(now)])
        }
    }

    func discard(sessionID: String) async throws {
        try await write(
            { connection in _ = try connection.step("DELETE FROM sessions WHERE id = ?", [.text(sessionID)]) },
            committed: { [cache] result in
                guard case .success = result else { return }
                cache.withLock { cache in cache.entry(id: sessionID).map { cache.forget($0.session) } }
            })
    }

    /// Forgets every session kept in memory, so that the next reads go to the file (a test that damages
    /// the file under a running store).
    func dropCachedSessions() {
        cache.withLock { $0 = SQLiteSessionCache(liveCapacity: Self.liveCapacity, endedCapacity: Self.endedCapacity) }
    }

    /// Drops the ended sessions kept since the last call, and gives back SQLite's page caches.
    func releaseMemory() async {
        cache.withLock { $0.release() }
        _ = try? await writer.alone { $0.releaseMemory() }
        for reader in readers {
            _ = try? await reader.lock.withLock { try await reader.connection.query("PRAGMA shrink_memory") }
        }
    }

    /// Closes every connection, also when one fails to close or the caller is cancelled (the service
    /// group may cancel the teardown that calls this): a connection left open keeps the WAL, and SQLiteNIO
    /// stops the process when one is dropped unclosed. A second call waits for the first and gets its outcome.
    func close() async throws {
        let closing = closing.withLock { closing in
            if closing == nil { closing = Task { try await closeConnections() } }
            return closing!
        }
        try await closing.value
    }

    private func closeConnections() async throws {
        checkpointing.cancel()
        await checkpointing.value
        // Should one fail, the sync's files stay open: closing them would drop that connection's locks.
        // Each reader closes under its lock: a read still under way finishes first (closing a connection
        // while a statement is prepared on it is a use after free in SQLite).
        let readers: [@Sendable () async throws -> Void] = readers.map { reader in
            { try await reader.lock.withLock { try await reader.connection.close() } }
        }
        try await Self.closeAll([checkpointer.connection.close] + readers, checkpointer.thread, writer)
        checkpointer.files.closeAll()
    }

    /// Closes the connections (`closes`), then `thread` (the checkpoint's), then the writer, each whatever
    /// the others did; throws the first failure.
    private static func closeAll(
        _ closes: [@Sendable () async throws -> Void], _ thread: NIOThreadPool, _ writer: SQLiteWriter
    ) async throws {
        let steps = closes + [thread.shutdownGracefully, writer.close]
        var failure: (any Error)?
        for step in steps {
            do { try await step() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    // MARK: - helpers

    /// One statement on a reader connection that runs nothing else meanwhile (see the type's notes).
    /// One that meets a damaged page marks the store corrupt (`StoreError.corrupt`).
    func read(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        guard !health.isCorrupt else { throw StoreError.corrupt }
        let index = nextReader.withLock { next in
            defer { next = (next + 1) % readers.count }
            return next
        }
        let reader = readers[index]
        do {
            return try await reader.lock.withLock { try await reader.connection.query(sql, binds) }
        } catch let error where SQLiteFile.isCorruption(error) {
            health.corrupted(error)
            throw StoreError.corrupt
        }
    }

    /// A consistent copy of the database, without any Pre-Fill individual, in the new file `output` (mode
    /// 0600): `SQLiteFile.writeBackup` on a connection of its own, on a thread of its own. Its copy is one
    /// read transaction, which in WAL mode no write waits for, and which holds up neither the readers nor
    /// the pool threads the writes use. A copy of a damaged file is refused (`StoreError.corrupt`): it
    /// would be damaged too. A failed backup leaves no file behind.
    func backup(to output: String) async throws {
        guard !health.isCorrupt else { throw StoreError.corrupt }
        do {
            try await SQLiteFile.onOwnConnection(path, busyTimeout: 5000) {
                try await SQLiteFile.writeBackup($0, to: output)
            }
        } catch let error where SQLiteFile.isCorruption(error) {
            health.corrupted(error)
            throw StoreError.corrupt
        }
    }

    private func oneSession(_ sql: String, _ value: String) async throws -> Session? {
        guard let row = try await read(sql, [.text(value)]).first else { return nil }
        return try decode(Session.self, row)
    }

    private func decode<T: Decodable>(_ type: T.Type, _ row: SQLiteRow) throws -> T {
        try decoder.decode(type, from: Data((row.column("data")?.string ?? "").utf8))
    }
}
