import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOPosix
import SQLiteNIO
import VaporCSQLite

/// The SQLite file's one writing connection, with its statements prepared once.
///
/// A write that finds the writer idle runs at once, on its caller's thread: no hand-off to another
/// thread and back. Writes that arrive while a commit runs queue and are committed together, in one
/// transaction, in the order they came (group commit): by that caller, right after its own, or, for
/// what queues after that, by a thread of NIO's shared pool. Each still gets its own answer, and none
/// before the commit. A write that throws changes nothing.
///
/// The connection is SQLiteNIO's own copy of SQLite, the one the store's readers use: two copies of
/// SQLite in one process would break each other's file locks.
final class SQLiteWriter: Sendable {
    enum Value {
        case text(String)
        /// Text as UTF-8 bytes (JSON the relay wrote), bound without making a `String` of it first.
        case utf8([UInt8])
        case integer(Int)
        case null
    }

    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        let message: String
        var description: String { "SQLite error \(code): \(message)" }
    }

    /// The connection, as the writes' bodies see it.
    final class Connection {
        fileprivate let handle: OpaquePointer
        private var statements: [String: OpaquePointer] = [:]

        /// Once closed, every use fails as SQLite's misuse would: the handle is freed, and touching it is
        /// undefined (a write after the store closed answered 503 or 500 by chance).
        private var isClosed = false
        private static let closed = Failure(code: SQLITE_MISUSE, message: "the database is closed")

        fileprivate init(handle: OpaquePointer) { self.handle = handle }

        /// Runs `sql` (prepared at its first use) with `values` bound; true when it returned a row.
        func step(_ sql: String, _ values: [Value] = []) throws -> Bool {
            guard !isClosed else { throw Self.closed }
            let statement = try prepared(sql)
            defer {
                sqlite_nio_sqlite3_reset(statement)
                sqlite_nio_sqlite3_clear_bindings(statement)
            }
            for (offset, value) in values.enumerated() {
                let index = Int32(offset + 1)
                // Text is bound from its own storage: a `String` passed as a C string would first be
                // copied into a new array.
                let code =
                    switch value {
                    case .text(var text): text.withUTF8 { bindText(statement, index, $0) }
                    case .utf8(let bytes): bytes.withUnsafeBufferPointer { bindText(statement, index, $0) }
                    case .integer(let integer): sqlite_nio_sqlite3_bind_int64(statement, index, Int64(integer))
                    case .null: sqlite_nio_sqlite3_bind_null(statement, index)
                    }
                try check(code)
            }
            switch sqlite_nio_sqlite3_step(statement) {
            case SQLITE_ROW: return true
            case SQLITE_DONE: return false
            case let code: throw failure(code)
            }
        }

        /// Binds `text` (UTF-8) for SQLite to copy; empty text is bound as `''`, not as `NULL`.
        private func bindText(_ statement: OpaquePointer, _ index: Int32, _ text: UnsafeBufferPointer<UInt8>) -> Int32 {
            guard let start = text.baseAddress, !text.isEmpty else {
                return sqlite_nio_sqlite3_bind_text(statement, index, "", 0, transient)
            }
            return start.withMemoryRebound(to: CChar.self, capacity: text.count) {
                sqlite_nio_sqlite3_bind_text(statement, index, $0, Int32(text.count), transient)
            }
        }

        /// How many rows the last `INSERT`, `UPDATE` or `DELETE` changed.
        var changes: Int { isClosed ? 0 : Int(sqlite_nio_sqlite3_changes(handle)) }

        /// How many rows every `INSERT`, `UPDATE` or `DELETE` since the connection opened changed.
        var totalChanges: Int { isClosed ? 0 : Int(sqlite_nio_sqlite3_total_changes(handle)) }

        /// Runs statements without values or results (pragmas, `ROLLBACK`).
        func execute(_ sql: String) throws {
            guard !isClosed else { throw Self.closed }
            try check(sqlite_nio_sqlite3_exec(handle, sql, nil, nil, nil))
        }

        /// Copies the rest of the WAL into the file, so that the next write starts it over (SQLite's
        /// `RESTART`); returns the WAL's pages and how many of them are in the file.
        func restartWAL() throws -> (walPages: Int, copied: Int) {
            try checkpoint(SQLITE_CHECKPOINT_RESTART)
        }

        /// Copies the rest of the WAL into the file and cuts the WAL to 0 bytes (SQLite's `TRUNCATE`),
        /// so that no earlier version of a page stays on disk in it.
        func truncateWAL() throws -> (walPages: Int, copied: Int) {
            try checkpoint(SQLITE_CHECKPOINT_TRUNCATE)
        }

        private func checkpoint(_ mode: Int32) throws -> (walPages: Int, copied: Int) {
            guard !isClosed else { throw Self.closed }
            var log: Int32 = 0
            var copied: Int32 = 0
            try check(sqlite_nio_sqlite3_wal_checkpoint_v2(handle, nil, mode, &log, &copied))
            return (Int(log), Int(copied))
        }

        /// Gives back the connection's page cache.
        func releaseMemory() { if !isClosed { _ = sqlite_nio_sqlite3_db_release_memory(handle) } }

        fileprivate var inTransaction: Bool { !isClosed && sqlite_nio_sqlite3_get_autocommit(handle) == 0 }

        fileprivate func close() {
            guard !isClosed else { return }
            isClosed = true
            for statement in statements.values { sqlite_nio_sqlite3_finalize(statement) }
            statements = [:]
            sqlite_nio_sqlite3_close_v2(handle)
        }

        private func prepared(_ sql: String) throws -> OpaquePointer {
            if let statement = statements[sql] { return statement }
            var statement: OpaquePointer?
            try check(
                sqlite_nio_sqlite3_prepare_v3(
                    handle, sql, Int32(sql.utf8.count), UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil))
            guard let statement else { throw Failure(code: SQLITE_MISUSE, message: "no statement in \(sql)") }
            statements[sql] = statement
            return statement
        }

        private func check(_ code: Int32) throws {
            guard code == SQLITE_OK else { throw failure(code) }
        }

        fileprivate func failure(_ code: Int32) -> Failure {
            Failure(
                code: sqlite_nio_sqlite3_extended_errcode(handle),
                message: String(cString: sqlite_nio_sqlite3_errmsg(handle)))
        }
    }

    /// Touched by one thread at a time: `init`, then whichever runs `drain()`, which runs once at a time.
    private nonisolated(unsafe) let connection: Connection
    /// The database file as opened.
    private let file: FileIdentity
    private let queue = Locked(Queue())

    private struct Queue {
        var work: [Work] = []
        var draining = false
        var commits = 0

        /// Marks the writer busy; true when it was idle, and the caller now drains.
        mutating func claim() -> Bool {
            defer { draining = true }
            return !draining
        }

        /// Marks the writer idle unless work queued; true when it did, and the caller hands it on.
        mutating func release() -> Bool {
            draining = !work.isEmpty
            return draining
        }

        /// Takes the queued work if it is all writes; none of it otherwise.
        mutating func takeWrites() -> [any Write] {
            var writes: [any Write] = []
            for case .write(let write) in work { writes.append(write) }
            guard writes.count == work.count else { return [] }
            work.removeAll(keepingCapacity: true)
            return writes
        }
    }

    /// Opens (or creates) the file, and sets up the connection with `pragmas`.
    static func open(path: String, pragmas: [String]) async throws -> SQLiteWriter {
        // SQLite sets itself up once per process, and SQLiteNIO does that under a lock of its own.
        // Opening through SQLiteNIO first orders this open after that set-up, which ThreadSanitizer
        // otherwise reports as a race with another thread's first open.
        try await SQLiteConnection.open(storage: .memory).close()
        return try SQLiteWriter(path: path, pragmas: pragmas)
    }

    private init(path: String, pragmas: [String]) throws {
        var handle: OpaquePointer?
        let code = sqlite_nio_sqlite3_open_v2(
            path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
            SQLiteSessionStore.vfs)
        guard let handle else { throw Failure(code: code, message: "cannot open \(path)") }
        connection = Connection(handle: handle)
        do {
            guard code == SQLITE_OK else { throw connection.failure(code) }
            for pragma in pragmas { try connection.execute(pragma) }
            file = try FileIdentity(path: path)
        } catch {
            connection.close()
            throw error
        }
    }

    /// Runs `body` in a transaction with the other writes that queued meanwhile, and once that
    /// committed (or failed), `committed` with the outcome, in commit order, before any later write runs.
    ///
    /// `onCallersThread: false` for a caller whose thread runs at a lower priority (the webhook sender):
    /// the writes that queue behind its commit would wait for that thread to get the CPU back.
    func write<T: Sendable>(
        onCallersThread: Bool = true,
        _ body: @escaping @Sendable (Connection) throws -> T,
        committed: @escaping @Sendable (Result<T, any Error>) -> Void = { _ in }
    ) async throws -> T {
        if onCallersThread, queue.withLock({ $0.claim() }) {
            let write = PendingWrite(body: body, committed: committed, continuation: nil)
            commit([write])
            // Writes that queued meanwhile are committed here too; only what queues after that, or must
            // run alone (a checkpoint), goes to the pool. A hand-off wakes a pool thread, likely asleep,
            // which then wakes the thread of each write in it.
            commit(queue.withLock { $0.takeWrites() })
            if queue.withLock({ $0.release() }) { NIOThreadPool.singleton.submit { _ in self.drain() } }
            return try write.result.get()
        }
        return try await withCheckedThrowingContinuation { continuation in
            enqueue(.write(PendingWrite(body: body, committed: committed, continuation: continuation)))
        }
    }

    /// Runs `body` on its own, outside any transaction, between two commits.
    func alone<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(.alone { connection in continuation.resume(with: Result { try body(connection) }) })
        }
    }

    /// How many commits the writer has made (a batch of writes is one).
    var commits: Int { queue.withLock { $0.commits } }

    /// How many writes (and other work) wait for the writer.
    var waiting: Int { queue.withLock { $0.work.count } }

    func close() async throws {
        try await alone { $0.close() }
    }

    private func enqueue(_ work: Work) {
        let start = queue.withLock { queue in
            queue.work.append(work)
            return queue.claim()
        }
        if start { NIOThreadPool.singleton.submit { _ in self.drain() } }
    }

    /// Runs what has queued, batch after batch, until the queue is empty.
    private func drain() {
        var batch: [Work] = []
        while true {
            queue.withLock { queue in
                swap(&batch, &queue.work)
                if batch.isEmpty { queue.draining = false }
            }
            if batch.isEmpty { return }
            var writes: [any Write] = []
            for work in batch {
                switch work {
                case .write(let write):
                    writes.append(write)
                case .alone(let run):
                    commit(writes)
                    writes.removeAll(keepingCapacity: true)
                    run(connection)
                }
            }
            commit(writes)
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Commits `writes` in one transaction, so that a write that throws changes nothing and leaves the
    /// others be: with others, each runs in a savepoint of its own; alone (most commits), its
    /// transaction is rolled back.
    private func commit(_ writes: [any Write]) {
        guard !writes.isEmpty else { return }
        let savepoints = writes.count > 1
        var rollback: (any Error)?
        do {
            // SQLite writes on into a file that was removed (its directory deleted, say), and all of
            // it would be gone at the next start.
            guard file.isStillAtItsPath() else {
                throw Failure(code: SQLITE_IOERR, message: "the database file is no longer at its path")
            }
            _ = try connection.step("BEGIN IMMEDIATE")
            for write in writes {
                if savepoints { _ = try connection.step("SAVEPOINT write") }
                write.run(connection)
                // Some errors (a full disk, I/O) end the whole transaction, and with it the writes before.
                guard connection.inTransaction else {
                    throw write.failure ?? Failure(code: SQLITE_ERROR, message: "transaction rolled back")
                }
                if savepoints {
                    if write.failure != nil { _ = try connection.step("ROLLBACK TO write") }
                    _ = try connection.step("RELEASE write")
                } else if let failure = write.failure {
                    throw failure
                }
            }
            _ = try connection.step("COMMIT")
            queue.withLock { $0.commits += 1 }
        } catch {
            rollback = error
            if connection.inTransaction { try? connection.execute("ROLLBACK") }
        }
        for write in writes { write.finish(failing: rollback) }
    }
}

/// Work for the writer: a write, or something that runs alone.
private enum Work {
    case write(any Write)
    case alone((SQLiteWriter.Connection) -> Void)
}

private protocol Write {
    func run(_ connection: SQLiteWriter.Connection)
    /// The error of `run`, if it threw.
    var failure: (any Error)? { get }
    /// Answers the write: with `failing` if its transaction did not commit, otherwise with what `run` gave.
    func finish(failing: (any Error)?)
}

/// Touched by the writer only, once queued.
private final class PendingWrite<T: Sendable>: Write {
    let body: @Sendable (SQLiteWriter.Connection) throws -> T
    let committed: @Sendable (Result<T, any Error>) -> Void
    /// Nil for a write that runs on its caller's thread: the caller reads `result`.
    let continuation: CheckedContinuation<T, any Error>?
    /// What `run` gave, then what the write answers (`finish`); nil until `run`.
    private(set) var outcome: Result<T, any Error>?

    init(
        body: @escaping @Sendable (SQLiteWriter.Connection) throws -> T,
        committed: @escaping @Sendable (Result<T, any Error>) -> Void,
        continuation: CheckedContinuation<T, any Error>?
    ) {
        self.body = body
        self.committed = committed
        self.continuation = continuation
    }

    func run(_ connection: SQLiteWriter.Connection) { outcome = Result { try body(connection) } }

    var failure: (any Error)? {
        guard case .failure(let error) = outcome else { return nil }
        return error
    }

    func finish(failing error: (any Error)?) {
        if let error { outcome = .failure(error) }
        committed(result)
        continuation?.resume(with: result)
    }

    /// What the write answers, once `finish` has run. (No error is made up front for a write that has
    /// not run: it would cost an allocation per write.)
    var result: Result<T, any Error> { outcome ?? .failure(CancellationError()) }
}

/// SQLite copies a bound value bound this way (`SQLITE_TRANSIENT`).
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// Which file a path named when the database was opened (device and inode), to notice that the path
/// no longer leads to it: removed, or replaced by another file. One `stat` per commit.
struct FileIdentity: Sendable {
    let path: String
    private let device: UInt64
    private let inode: UInt64

    init(path: String) throws {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw SQLiteWriter.Failure(code: SQLITE_CANTOPEN, message: "cannot stat \(path)")
        }
        self.path = path
        (device, inode) = (UInt64(status.st_dev), UInt64(status.st_ino))
    }

    func isStillAtItsPath() -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
