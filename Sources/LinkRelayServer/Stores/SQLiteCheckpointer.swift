import Foundation
import LinkRelaySupport
import SQLiteNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The SQLite store's checkpoint: its own connection, on a thread of its own (see `SQLiteSessionStore`).
struct SQLiteCheckpointer: Sendable {
    let connection: SQLiteConnection
    let thread: NIOThreadPool
    let files: SyncedFiles
    let writer: SQLiteWriter
    /// One checkpoint at a time: SQLite refuses a second one at once (`SQLITE_BUSY`) rather than wait.
    let turn = AsyncMutex()

    /// The copy runs while writes go on. But the WAL starts over only at a write that finds all of it
    /// copied, and under load a write always lands while the copy runs. So once the WAL has
    /// `restartPages`, writes wait while what was appended meanwhile is copied too (SQLite's
    /// `RESTART`), and the next write starts the WAL over.
    ///
    /// That wait is two syncs: of the WAL before its copy, of the database file after. But SQLite syncs
    /// the file only after a copy that reached the WAL's end, so none of the copy below has been synced,
    /// and the `RESTART`'s sync would flush all of it with every write held (docs/checkpoint.md). Both
    /// files are synced first, here, so it flushes only what came since. Should that fail, the `RESTART`
    /// syncs them itself.
    @discardableResult
    func run() async throws -> (walPages: Int, copied: Int) {
        try await turn.withLock {
            let copied = try await passive()
            guard copied.walPages >= SQLiteSessionStore.restartPages else { return copied }
            try? await thread.runIfActive { files.sync() }
            return try await writer.alone { try $0.restartWAL() }
        }
    }

    /// Copies the whole WAL into the file and cuts it to 0 bytes (SQLite's `TRUNCATE`), so that the earlier
    /// versions of pages it held (an erased individual's, a deleted row's) leave the disk. As in `run()`,
    /// most of the copy and both syncs come first, while writes go on; writes then wait only for what
    /// came since, and the WAL's truncation.
    func truncate() async throws {
        try await turn.withLock {
            _ = try await passive()
            try? await thread.runIfActive { files.sync() }
            _ = try await writer.alone { try $0.truncateWAL() }
        }
    }

    /// Copies what it can without holding up writes (SQLite's `PASSIVE`).
    private func passive() async throws -> (walPages: Int, copied: Int) {
        let row = try await connection.query("PRAGMA wal_checkpoint(PASSIVE)").first
        return (walPages: row?.column("log")?.integer ?? 0, copied: row?.column("checkpointed")?.integer ?? 0)
    }
}

/// Files opened only to be synced (`fsync`), each at its first sync; one that cannot be opened is left out.
final class SyncedFiles: Sendable {
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
