import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOCore
import SQLiteNIO

/// Sessions in a SQLite file (WAL). A write commits before the relay announces it, so `kill -9`
/// and a restart lose nothing that any response or event has mentioned.
///
/// A session's row holds its events too (a JSON array), so every write is one statement. Writes go
/// through one connection (`SQLiteWriter`), which commits the writes that queued meanwhile together;
/// reads use other connections, which in WAL mode see only committed data.
///
/// Each connection runs one statement at a time. SQLiteNIO would run several at once on a
/// connection's thread pool, and statements running at once share one read transaction: a read that
/// overlapped a longer one saw the data as it was before a commit that came first.
///
/// The WAL is copied into the database file (a checkpoint) by a connection on a thread of its own,
/// every `checkpointInterval`. Left to SQLite, the commit that takes the WAL past 1,000 pages does it,
/// and that commit, with every write queued behind it, waits for the copy and its two fsyncs. See
/// `Checkpointer.run()` for how the WAL still starts over.
///
/// Sessions are also kept in memory as last committed, with their events: every live one (waiting or
/// tapped) and the last 2,048 that ended, for one to two rounds of `releaseMemory`. So the reads of a
/// landing, a verification and a channel (a session by id or link key, and the events a long-poll asks
/// for again) need neither SQL nor JSON.
/// Only the writer fills that copy, after its commit and before its next write, so it is never older
/// than the file. Everything else is read from the file. The relay is the file's only writer.
final class SQLiteSessionStore: SessionStore {
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

    private let writer: SQLiteWriter
    private let readers: [(connection: SQLiteConnection, lock: AsyncMutex)]
    private let checkpointer: Checkpointer
    private let checkpointing: Task<Void, Never>
    private let closing = Locked<Task<Void, any Error>?>(nil)
    private let nextReader = Locked(0)
    private let cache = Locked(SessionCache(liveCapacity: liveCapacity, endedCapacity: endedCapacity))
    private let decoder = JSONDecoder()

    private init(
        writer: SQLiteWriter, readers: [SQLiteConnection], checkpointer: Checkpointer, checkpointInterval: Duration?,
        logger: Logger
    ) {
        self.writer = writer
        self.readers = readers.map { ($0, AsyncMutex()) }
        self.checkpointer = checkpointer
        self.checkpointing = Task {
            guard let checkpointInterval else { return }
            let clock = EventLoopClock()
            var failing = false
            while (try? await clock.sleep(for: checkpointInterval)) != nil {
                do {
                    try await checkpointer.run()
                    if failing { logger.notice("SQLite checkpoints work again") }
                    failing = false
                } catch {
                    if Task.isCancelled { return }  // the store is closing
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
        // only an operating-system crash or power loss can lose the newest commits.
        let writer = try await SQLiteWriter.open(
            path: path,
            pragmas: [
                "PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000",
                "PRAGMA wal_autocheckpoint=\(backstopCheckpointPages)",
            ])
        let checkpointThread = NIOThreadPool(numberOfThreads: 1)
        checkpointThread.start()
        var readers: [SQLiteConnection] = []
        var checkpointConnection: SQLiteConnection?
        do {
            for _ in 0..<readerCount {
                readers.append(try await SQLiteConnection.open(storage: .file(path: path), logger: logger))
                _ = try await readers.last?.query("PRAGMA busy_timeout=5000")
            }
            let connection = try await SQLiteConnection.open(
                storage: .file(path: path), threadPool: checkpointThread, logger: logger,
                on: MultiThreadedEventLoopGroup.singleton.any())
            checkpointConnection = connection
            _ = try await connection.query("PRAGMA busy_timeout=5000")
            try await migrate(connection)
            let checkpointer = Checkpointer(
                connection: connection, thread: checkpointThread,
                files: SyncedFiles(paths: [path, path + "-wal"]), writer: writer)
            return SQLiteSessionStore(
                writer: writer, readers: readers, checkpointer: checkpointer, checkpointInterval: checkpointInterval,
                logger: logger)
        } catch {
            // E.g. a file with tables of another program's. What was opened is closed: SQLiteNIO stops the
            // process when a connection is dropped unclosed.
            try? await closeAll([checkpointConnection].compactMap { $0 } + readers, checkpointThread, writer)
            throw error
        }
    }

    /// Copies the WAL into the database file; returns the WAL's pages and how many of them are now in the file.
    @discardableResult
    func checkpoint() async throws -> (walPages: Int, copied: Int) {
        try await checkpointer.run()
    }

    /// The checkpoint's connection, on a thread of its own.
    private struct Checkpointer: Sendable {
        let connection: SQLiteConnection
        let thread: NIOThreadPool
        let files: SyncedFiles
        let writer: SQLiteWriter

        /// The copy runs while writes go on. But the WAL starts over only at a write that finds all of it
        /// copied, and under load a write always lands while the copy runs. So once the WAL has
        /// `restartPages`, writes wait while what was appended meanwhile is copied too (SQLite's
        /// `RESTART`), and the next write starts the WAL over.
        ///
        /// That wait is two syncs: of the WAL before its copy, of the database file after. But SQLite syncs
        /// the file only after a copy that reached the WAL's end, so none of the copy below has been synced,
        /// and the `RESTART`'s sync would flush all of it (on this kind of VM, from 5 ms to a quarter of a
        /// second) with every write held. Both files are synced first, here, so it flushes only what came
        /// since. Should that fail, the `RESTART` syncs them as before.
        @discardableResult
        func run() async throws -> (walPages: Int, copied: Int) {
            let row = try await connection.query("PRAGMA wal_checkpoint(PASSIVE)").first
            let copied = (walPages: row?.column("log")?.integer ?? 0, copied: row?.column("checkpointed")?.integer ?? 0)
            guard copied.walPages >= restartPages else { return copied }
            try? await thread.runIfActive { files.sync() }
            return try await writer.alone { try $0.restartWAL() }
        }
    }

    /// The schema's versions, in order: each brings the file from the one before. A new file gets them all.
    static let migrations: [[String]] = [
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
    ]

    static var schemaVersion: Int { migrations.count }

    /// Creates or upgrades the schema, one version per transaction; safe to run on every start.
    private static func migrate(_ connection: SQLiteConnection) async throws {
        // The version table comes with the first version, so a file that fails it is left as it was.
        var current = 0
        if try await !connection.query("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").isEmpty {
            let row = try await connection.query("SELECT MAX(version) AS v FROM schema_version").first
            current = row?.column("v")?.integer ?? 0
        }
        for (index, statements) in migrations.enumerated() where index + 1 > current {
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

    func insert(_ session: Session, event: SessionEvent) async throws {
        let values: [SQLiteWriter.Value] = [
            .text(session.id), .text(session.linkKey), session.idempotencyKey.map { .text($0) } ?? .null,
            .text(session.state.rawValue), .integer(session.version),
            .utf8(session.storedJSON), .utf8(event.storedJSON),
        ]
        try await writer.write(
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
    /// for every write.
    static let updateSQL = """
        UPDATE sessions SET state = ?1, version = ?2, data = ?3, events = CASE
            WHEN ?4 IS NULL THEN events
            WHEN events = '[]' THEN '[' || ?4 || ']'
            ELSE substr(events, 1, length(events) - 1) || ',' || ?4 || ']' END
        WHERE id = ?5 AND version = ?6
        """

    func update(
        _ session: Session, expectedVersion: Int, appending events: [SessionEvent],
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
        let values: [SQLiteWriter.Value] = [
            .text(session.state.rawValue), .integer(session.version), .utf8(session.storedJSON), appended,
            .text(session.id), .integer(expectedVersion),
        ]
        return try await writer.write(
            // Whether it changed the row, from SQLite's count: `RETURNING` made SQLite open a temporary
            // table, with a page cache of its own, for every update (2% of the relay's CPU under taps).
            { connection in
                _ = try connection.step(Self.updateSQL, values)
                return connection.changes == 1
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

    func sessionInMemory(id: String) -> Session? { cache.withLock { $0.entry(id: id)?.session } }

    func eventsInMemory(sessionID: String, after: Int) -> [SessionEvent]? {
        cache.withLock { $0.entry(id: sessionID)?.events }?.filter { $0.seq > after }
    }

    func session(linkKey: String) async throws -> Session? {
        if let session = cache.withLock({ $0.entry(linkKey: linkKey)?.session }) { return session }
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

    func ping() async throws {
        _ = try await read("SELECT 1")
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
        try await Self.closeAll(
            [checkpointer.connection] + readers.map(\.connection), checkpointer.thread, writer)
        checkpointer.files.closeAll()
    }

    /// Closes the connections, then `thread` (the checkpoint's), then the writer, each whatever the others
    /// did; throws the first failure.
    private static func closeAll(
        _ connections: [SQLiteConnection], _ thread: NIOThreadPool, _ writer: SQLiteWriter
    ) async throws {
        var steps: [@Sendable () async throws -> Void] = connections.map { $0.close }
        steps += [thread.shutdownGracefully, writer.close]
        var failure: (any Error)?
        for step in steps {
            do { try await step() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    // MARK: - helpers

    /// One statement on a reader connection that runs nothing else meanwhile (see the type's notes).
    private func read(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        let index = nextReader.withLock { next in
            defer { next = (next + 1) % readers.count }
            return next
        }
        let reader = readers[index]
        return try await reader.lock.withLock { try await reader.connection.query(sql, binds) }
    }

    private func oneSession(_ sql: String, _ value: String) async throws -> Session? {
        guard let row = try await read(sql, [.text(value)]).first else { return nil }
        return try decode(Session.self, row)
    }

    private func decode<T: Decodable>(_ type: T.Type, _ row: SQLiteRow) throws -> T {
        try decoder.decode(type, from: Data((row.column("data")?.string ?? "").utf8))
    }
}

/// Sessions as last committed, by id and by link key, with their events when this process has seen all
/// of them (it created the session): every live one (up to `liveCapacity`), and the `endedCapacity`
/// that ended last, which a desktop's next long-poll and a phone's reload still ask about. Those are
/// asked about within seconds: an ended session is dropped at the second `release()` after it ended.
struct SessionCache {
    struct Entry {
        var session: Session
        var events: [SessionEvent]?
    }

    let liveCapacity: Int
    let endedCapacity: Int
    private var live: [String: Entry] = [:]
    private var ended: [String: Entry] = [:]
    /// Ended ids in the order they ended; the first `releasable` were already there at the last `release()`.
    private var endedOrder = CircularBuffer<String>()
    private var releasable = 0
    private var idByLinkKey: [String: String] = [:]

    init(liveCapacity: Int, endedCapacity: Int) {
        self.liveCapacity = liveCapacity
        self.endedCapacity = endedCapacity
    }

    func entry(id: String) -> Entry? { live[id] ?? ended[id] }

    /// The room the ring of ended ids holds; `release` gives it back once the ring is empty.
    var endedRoom: Int { endedOrder.capacity }

    func entry(linkKey: String) -> Entry? { idByLinkKey[linkKey].flatMap(entry(id:)) }

    mutating func inserted(_ session: Session, _ event: SessionEvent) {
        keep(Entry(session: session, events: [event]))
    }

    mutating func updated(_ session: Session, appending events: [SessionEvent]) {
        // A session first seen here after a restart has events only the file knows.
        keep(Entry(session: session, events: entry(id: session.id)?.events.map { $0 + events }))
    }

    mutating func forget(_ session: Session) {
        live[session.id] = nil
        ended[session.id] = nil
        idByLinkKey[session.linkKey] = nil
    }

    private mutating func keep(_ entry: Entry) {
        let id = entry.session.id
        guard entry.session.state.isTerminal else {
            guard live[id] != nil || live.count < liveCapacity else { return }
            live[id] = entry
            idByLinkKey[entry.session.linkKey] = id
            return
        }
        live[id] = nil
        idByLinkKey[entry.session.linkKey] = id
        guard ended.updateValue(entry, forKey: id) == nil else { return }
        endedOrder.append(id)
        if endedOrder.count > endedCapacity { dropOldestEnded() }
    }

    /// Drops the ended sessions that were already kept at the last call, and the room that sessions
    /// no longer kept took (the ring of ended ids too: 64 KiB once 2,048 sessions had ended).
    mutating func release() {
        for _ in 0..<releasable { dropOldestEnded() }
        if endedOrder.isEmpty { endedOrder.removeAll() }
        releasable = endedOrder.count
        live.releaseUnusedCapacity()
        ended.releaseUnusedCapacity()
        idByLinkKey.releaseUnusedCapacity()
    }

    private mutating func dropOldestEnded() {
        if let evicted = ended.removeValue(forKey: endedOrder.removeFirst()) {
            idByLinkKey[evicted.session.linkKey] = nil
        }
        releasable = max(0, releasable - 1)
    }
}

/// A lock that suspends instead of blocking a thread, and hands over in arrival order.
final class AsyncMutex: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    func withLock<T>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state -> Bool in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if acquired { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

/// Files opened only to be synced (`fsync`), each at its first sync; one that cannot be opened is left out.
private final class SyncedFiles: Sendable {
    private let paths: [String]
    private let descriptors = Locked<[Int32]?>(nil)

    init(paths: [String]) { self.paths = paths }

    func sync() {
        let descriptors = descriptors.withLock { descriptors in
            if descriptors == nil { descriptors = paths.map { open($0, O_RDONLY | O_CLOEXEC) }.filter { $0 >= 0 } }
            return descriptors ?? []
        }
        for descriptor in descriptors { fsync(descriptor) }
    }

    /// Only after the file's SQLite connections have closed: closing any descriptor of a database file
    /// drops every POSIX lock the process holds on it, SQLite's own included.
    func closeAll() {
        descriptors.withLock { descriptors in
            for descriptor in descriptors ?? [] { close(descriptor) }
            descriptors = nil
        }
    }
}
