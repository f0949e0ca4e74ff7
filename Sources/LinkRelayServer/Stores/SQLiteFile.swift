import Foundation
import Logging
import NIOPosix
import SQLiteNIO
import VaporCSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// The SQLite store's file itself, apart from the store's connections: what start-up checks before
/// the relay trusts it, `linkrelay store check` and `store backup`, and files made private (0600).
///
/// An empty file is a new database to SQLite, and a damaged one fails only at the statement that
/// meets the damage. So the relay looks first: it makes a new file only where none exists, and
/// refuses to start on one that is empty, not SQLite's, damaged (`PRAGMA quick_check`), another
/// program's, or of a newer schema. Every look opens the file through the store's `unix-excl` VFS,
/// so a file a running relay holds is refused as held, not read under it.
public enum SQLiteFile {
    /// Why a file cannot be used; `description` is one line that names the file and says what to do.
    public struct Problem: Error, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            case missing
            case empty
            case notSQLite
            /// The lines of `PRAGMA quick_check` / `integrity_check`, or the error a statement met.
            case corrupt([String])
            /// A SQLite database with tables, but no `schema_version`: another program's.
            case foreign
            /// A schema newer than this binary knows.
            case newer(version: Int)
            /// Another process (a running relay) holds the file.
            case held
            /// The file cannot be opened or read for another reason (permissions, I/O).
            case unreadable(String)
            /// A backup's file that is already there.
            case exists
            /// No file there, and none can be made (its directory missing or not writable).
            case cannotCreate(String)
        }

        public let path: String
        public let kind: Kind

        /// What is wrong, without the path.
        public var reason: String {
            switch kind {
            case .missing: "no such file"
            case .empty: "the file is empty (0 bytes), so it holds no database"
            case .notSQLite: "not a SQLite database (the file does not begin with SQLite's header)"
            case .corrupt(let lines): "the database is corrupt (\(Self.summary(lines)))"
            case .foreign: "a SQLite database with tables, but not LinkRelay's (it has no schema_version table)"
            case .newer(let version):
                "its schema version \(version) is newer than this linkrelay knows (\(SQLiteMigrations.schemaVersion))"
            case .held:
                "another process has this file open (a running relay holds its file exclusively; one relay per SQLite file)"
            case .unreadable(let detail): "cannot read it: \(detail)"
            case .exists: "the file already exists"
            case .cannotCreate(let detail): "cannot create it: \(detail)"
            }
        }

        /// What the operator can do about it.
        public var advice: String {
            switch kind {
            case .missing: "check the path"
            case .empty, .notSQLite, .corrupt:
                "restore the newest good backup to this path, or move the file away to start with a new, empty database"
            case .foreign: "check the path, or move the file away to start with a new database"
            case .newer: "run the linkrelay that wrote it, or restore a backup this version made"
            case .held:
                "stop that relay first, or send it SIGUSR1 to write a backup into its --backup-dir (instances that share sessions use PostgreSQL)"
            case .unreadable: "check its permissions and the disk"
            case .exists: "name a new file (a backup never overwrites one)"
            case .cannotCreate: "check that its directory exists and that this user may write there"
            }
        }

        public var description: String { "sqlite:\(path): \(reason): \(advice)" }

        /// SQLite's report on one line: its first three problems, without its heading or line breaks.
        static func summary(_ lines: [String]) -> String {
            let problems = lines.flatMap { $0.split(separator: "\n") }.filter { !$0.hasPrefix("***") }
            return problems.prefix(3).joined(separator: "; ")
        }
    }

    /// The first 16 bytes of every SQLite database.
    static let header = Array("SQLite format 3\0".utf8)

    /// Whether `error` is SQLite meeting a damaged file: `SQLITE_CORRUPT` (any extended code) or
    /// `SQLITE_NOTADB`, from the writer's own calls or from SQLiteNIO's.
    static func isCorruption(_ error: any Error) -> Bool {
        switch error {
        case let failure as SQLiteWriter.Failure:
            return [SQLITE_CORRUPT, SQLITE_NOTADB].contains(failure.code & 0xFF)
        case let error as SQLiteError:
            switch error.reason {
            case .corrupt, .corruptIndex, .corruptSequenceSchema, .corruptVirtualTable, .notADatabase: return true
            default: return false
            }
        default:
            return false
        }
    }

    /// Creates `path` empty with mode 0600 when nothing is there, and returns true; false when
    /// something already is. SQLite gives the WAL and journal the database file's mode, and fills an
    /// existing empty file in `VACUUM INTO`, so making the file first makes all of them private.
    static func createPrivate(_ path: String) throws(Problem) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
            return true
        }
        if errno == EEXIST { return false }
        throw Problem(path: path, kind: .cannotCreate(String(cString: strerror(errno))))
    }

    /// What can be told without SQLite: the file is there, not empty, and begins with SQLite's header.
    ///
    /// Read with a descriptor of its own, before any connection opens it: closing one drops every POSIX
    /// lock the process holds on the file, SQLite's included.
    static func checkHeader(_ path: String) throws(Problem) {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw Problem(path: path, kind: errno == ENOENT ? .missing : .unreadable(String(cString: strerror(errno))))
        }
        guard status.st_size > 0 else { throw Problem(path: path, kind: .empty) }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Problem(path: path, kind: .unreadable(String(cString: strerror(errno)))) }
        var bytes = [UInt8](repeating: 0, count: header.count)
        let count = read(descriptor, &bytes, bytes.count)
        close(descriptor)
        guard count == header.count, bytes == header else { throw Problem(path: path, kind: .notSQLite) }
    }

    /// Warns when the file is open to others than its owner: it holds identity data. It is left as it
    /// is: its mode may be the operator's choice (a backup agent's group, say).
    static func warnIfShared(_ path: String, logger: Logger) {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & 0o077 != 0 else { return }
        logger.warning(
            "The SQLite file can be read by other users of this host, and it holds identity data: chmod 600 it",
            metadata: ["file": .string(path), "mode": .string(String(status.st_mode & 0o777, radix: 8))])
    }

    /// Refuses, before the store opens it, an existing file the relay must not start on: empty, not
    /// SQLite's, failing `PRAGMA quick_check`, another program's, or of a newer schema. Only reads it.
    static func checkBeforeOpening(_ path: String, logger: Logger) async throws(Problem) {
        try checkHeader(path)
        try await withConnection(path) { connection in
            let lines = try await connection.query("PRAGMA quick_check(3)").compactMap {
                $0.column("quick_check")?.string
            }
            if lines != ["ok"] { throw Problem(path: path, kind: .corrupt(lines)) }
            try await checkSchema(connection, path)
        }
        warnIfShared(path, logger: logger)
    }

    /// `linkrelay store check`: the problems of the file at `path` (none when the relay would start on
    /// it), by SQLite's full `PRAGMA integrity_check`. Throws `Problem` (`.missing`, `.held`,
    /// `.unreadable`) when the file cannot be checked at all.
    public static func check(_ path: String) async throws(Problem) -> [String] {
        do {
            try checkHeader(path)
            try await withConnection(path) { connection in
                let lines = try await connection.query("PRAGMA integrity_check").compactMap {
                    $0.column("integrity_check")?.string
                }
                if lines != ["ok"] { throw Problem(path: path, kind: .corrupt(lines)) }
                try await checkSchema(connection, path)
            }
            return []
        } catch {
            switch error.kind {
            case .missing, .held, .unreadable, .exists, .cannotCreate: throw error
            case .corrupt(let lines): return lines
            default: return [error.reason]
            }
        }
    }

    /// `linkrelay store backup`: a consistent copy of the file at `path`, without any Pre-Fill individual,
    /// in a new file `output`, mode 0600 (`writeBackup`); returns its size. A failed copy leaves no file behind.
    public static func backup(_ path: String, to output: String) async throws(Problem) -> Int {
        try checkHeader(path)
        try await withConnection(path) { connection in
            try await writeBackup(connection, to: output)
        }
        return fileSize(output)
    }

    /// What a backup's file is called while it is written: a hidden name beside it, which neither the
    /// backups' listing nor a restore takes for a backup (`.linkrelay-….sqlite.partial-…`).
    static let partialMarker = ".partial-"

    /// Writes a backup of the database `connection` reads to the new file `output` (mode 0600), holding no
    /// Pre-Fill individual. A consistent copy (`VACUUM INTO`: one read transaction, which in WAL mode no
    /// write waits for) is made under a temporary name in `output`'s directory; its individuals are erased
    /// there (`eraseIndividuals`), it is synced, and only then does it take the name `output`. So a backup
    /// never holds an individual, even for a moment under its own name, and one that fails (a full disk)
    /// is removed with whatever SQLite left beside it: nothing is left behind.
    static func writeBackup(_ connection: SQLiteConnection, to output: String, erasedAt now: Date = Date()) async throws
    {
        var status = stat()
        guard lstat(output, &status) != 0 else { throw Problem(path: output, kind: .exists) }
        let directory = (output as NSString).deletingLastPathComponent
        let name = (output as NSString).lastPathComponent
        let partial =
            (directory.isEmpty ? "" : directory + "/") + "." + name + partialMarker
            + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        guard try createPrivate(partial) else { throw Problem(path: partial, kind: .exists) }
        do {
            _ = try await connection.query("VACUUM INTO ?", [.text(partial)])
            try await eraseIndividuals(inCopy: partial, erasedAt: now)
            try publish(partial, as: output, in: directory.isEmpty ? "." : directory)
        } catch {
            removeWithJournals(partial)
            throw error
        }
    }

    /// Erases every Pre-Fill individual in the copy at `path`, as the retention would (`individualErasedAt`
    /// says when), on a connection of its own. Its journal stays in memory, so no file beside the copy
    /// ever holds a page as it was; `secure_delete` zeroes what the erasure frees, so no byte of an
    /// individual stays in the copy.
    static func eraseIndividuals(inCopy path: String, erasedAt now: Date) async throws {
        try await onOwnConnection(path, busyTimeout: 0) { copy in
            for pragma in ["PRAGMA journal_mode=MEMORY", "PRAGMA secure_delete=ON", "PRAGMA temp_store=MEMORY"] {
                _ = try await copy.query(pragma)
            }
            let columns = Set(
                try await copy.query("SELECT name FROM pragma_table_info('sessions')").compactMap {
                    $0.column("name")?.string
                })
            // A new file has no table yet.
            guard columns.contains("data") else { return }
            // A file of a schema before the retention's column has the individual in its JSON only.
            let deadline = columns.contains("individual_until") ? ", individual_until = NULL" : ""
            // As the relay stores dates in a session's JSON: seconds since 2001.
            _ = try await copy.query(
                """
                UPDATE sessions SET data = json_set(
                    json_remove(data, '$.prefill.individual', '$.prefill.individualKeptUntil'),
                    '$.prefill.individualErasedAt', ?)\(deadline)
                WHERE json_type(data, '$.prefill.individual') IS NOT NULL
                """, [.float(now.timeIntervalSinceReferenceDate)])
        }
    }

    /// Syncs the finished copy `partial`, gives it the name `output` (a hard link: it fails rather than
    /// replace a file that appeared meanwhile), removes the temporary name, and syncs the directory.
    private static func publish(_ partial: String, as output: String, in directory: String) throws {
        try sync(partial)
        if link(partial, output) == 0 {
            unlink(partial)
        } else {
            let error = errno
            if error == EEXIST { throw Problem(path: output, kind: .exists) }
            // A file system without hard links: a rename, after one more look that the name is free.
            var status = stat()
            guard [EPERM, EOPNOTSUPP].contains(error), lstat(output, &status) != 0, rename(partial, output) == 0 else {
                throw Problem(path: output, kind: .cannotCreate(String(cString: strerror(error))))
            }
        }
        try? sync(directory)
    }

    private static func sync(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Problem(path: path, kind: .unreadable(String(cString: strerror(errno)))) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw Problem(path: path, kind: .unreadable(String(cString: strerror(errno))))
        }
    }

    /// Removes the file at `path` and the journals SQLite may leave beside it.
    static func removeWithJournals(_ path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(path + suffix) }
    }

    static func fileSize(_ path: String) -> Int {
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : 0
    }

    /// A file whose tables are not LinkRelay's, or whose schema is newer than this binary's, is refused.
    private static func checkSchema(_ connection: SQLiteConnection, _ path: String) async throws {
        let tables = try await connection.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).compactMap { $0.column("name")?.string }
        // No table at all: a new database (SQLite wrote its header, the relay stopped before migrating).
        guard !tables.isEmpty else { return }
        guard tables.contains("schema_version") else { throw Problem(path: path, kind: .foreign) }
        let row = try await connection.query("SELECT MAX(version) AS v FROM schema_version").first
        let version = row?.column("v")?.integer ?? 0
        if version > SQLiteMigrations.schemaVersion { throw Problem(path: path, kind: .newer(version: version)) }
    }

    /// `onOwnConnection`, with SQLite's errors as `Problem`s: busy is `.held` (reported at once),
    /// corruption `.corrupt`.
    private static func withConnection(
        _ path: String, _ body: (SQLiteConnection) async throws -> Void
    ) async throws(Problem) {
        do {
            try await onOwnConnection(path, busyTimeout: 0, body)
        } catch {
            throw problem(error, path)
        }
    }

    /// Runs `body` on a new connection to the existing file through the store's VFS, on a thread of its
    /// own (a long check or copy takes no thread that the relay's reads and writes use), and closes it
    /// whatever happens: SQLiteNIO stops the process when a connection is dropped unclosed.
    /// `busyTimeout` in milliseconds: SQLiteNIO would retry a busy file forever.
    static func onOwnConnection(
        _ path: String, busyTimeout: Int, _ body: (SQLiteConnection) async throws -> Void
    ) async throws {
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        var failure: (any Error)?
        do {
            let connection = try await SQLiteConnection.open(
                storage: .file(path: SQLiteSessionStore.uri(path)), threadPool: thread,
                on: MultiThreadedEventLoopGroup.singleton.any())
            do {
                _ = try await connection.query("PRAGMA busy_timeout=\(busyTimeout)")
                try await body(connection)
            } catch {
                failure = error
            }
            // In a task of its own: SQLiteNIO skips the work of a cancelled task, the close included.
            try? await Task { try await connection.close() }.value
        } catch {
            failure = error
        }
        try? await thread.shutdownGracefully()
        if let failure { throw failure }
    }

    private static func problem(_ error: any Error, _ path: String) -> Problem {
        if let problem = error as? Problem { return problem }
        if isCorruption(error) { return Problem(path: path, kind: .corrupt(["\(error)"])) }
        if let error = error as? SQLiteError, error.reason == .busy || error.reason == .busyTimeout {
            return Problem(path: path, kind: .held)
        }
        return Problem(path: path, kind: .unreadable("\(error)"))
    }
}
