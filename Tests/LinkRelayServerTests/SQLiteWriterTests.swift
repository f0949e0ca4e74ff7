import Dispatch
import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOPosix
import SQLiteNIO
import Testing

@testable import LinkRelayServer

@Suite("SQLite writer", .timeLimit(.minutes(1)))
struct SQLiteWriterTests {
    struct Refused: Error {}

    /// Runs `body` with a writer on a new file that has table `t (columns)`, closes the writer, and
    /// returns what `query` (one column, `r`) reads back from the file, a string per row.
    func withWriter(table columns: String, readBack query: String, _ body: (SQLiteWriter) async throws -> Void)
        async throws -> [String]
    {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("w.sqlite").path
        let writer = try await SQLiteWriter.open(path: path, pragmas: ["PRAGMA journal_mode=WAL"])
        _ = try await writer.write { try $0.step("CREATE TABLE t (\(columns))") }
        try await body(writer)
        try await writer.close()
        let reader = try await SQLiteConnection.open(storage: .file(path: path), logger: Logger(label: "test"))
        let rows = try await reader.query(query).map { $0.column("r")?.string ?? "" }
        try await reader.close()
        return rows
    }

    @Test("Writes that queue while a commit runs commit together, in order, each with its own answer")
    func groupCommit() async throws {
        let rows = try await withWriter(
            table: "k TEXT PRIMARY KEY, v INTEGER NOT NULL", readBack: "SELECT k || '=' || v AS r FROM t ORDER BY k"
        ) { writer in
            let commitsBefore = writer.commits

            // Hold the writer's thread, so that the writes below queue up behind it.
            let gate = DispatchSemaphore(value: 0)
            let holding = Locked(false)
            let hold = Task {
                try await writer.alone { _ in
                    holding.withLock { $0 = true }
                    gate.wait()
                }
            }
            while !holding.withLock({ $0 }) { await Task.yield() }

            let committed = Locked<[String]>([])
            func queue(_ name: String, _ body: @escaping @Sendable (SQLiteWriter.Connection) throws -> Bool) async
                -> Task<Bool, any Error>
            {
                let queued = writer.waiting + 1
                let task = Task {
                    try await writer.write(body, committed: { _ in committed.withLock { $0.append(name) } })
                }
                while writer.waiting < queued { await Task.yield() }
                return task
            }
            let insertA = await queue("a") { try $0.step("INSERT INTO t VALUES ('a', 1) RETURNING 1") }
            let insertB = await queue("b") {
                try $0.step("INSERT INTO t VALUES (?, ?) RETURNING 1", [.text("b"), .integer(2)])
            }
            let duplicate = await queue("a again") { try $0.step("INSERT INTO t VALUES ('a', 3)") }
            let changedThenThrew = await queue("c, then refused") {
                _ = try $0.step("INSERT INTO t VALUES ('c', 4)")
                throw Refused()
            }
            let missing = await queue("z") { try $0.step("UPDATE t SET v = 9 WHERE k = 'z' RETURNING 1") }
            gate.signal()
            try await hold.value

            #expect(try await insertA.value)
            #expect(try await insertB.value)
            await #expect(throws: SQLiteWriter.Failure.self) { try await duplicate.value }
            await #expect(throws: Refused.self) { try await changedThenThrew.value }
            #expect(try await missing.value == false)
            #expect(writer.commits == commitsBefore + 1, "the five writes shared one commit")
            #expect(committed.withLock { $0 } == ["a", "b", "a again", "c, then refused", "z"])
        }
        #expect(rows == ["a=1", "b=2"], "the write that threw left nothing behind")
    }

    /// Runs a write on an event loop (the writer is idle, so on the loop's thread, as a landing's does),
    /// during which `queue` is called once for each of `names` and must queue one piece of work; returns
    /// the loop's thread and, by name, the thread each piece ran or was answered on, once all are done.
    func threads(
        of writer: SQLiteWriter, queuing names: [String],
        _ queue: @escaping @Sendable (String, Locked<[String: pthread_t]>) async throws -> Void
    ) async throws -> (caller: pthread_t, queued: [String: pthread_t]) {
        let threads = Locked<[String: pthread_t]>([:])
        let tasks = Locked<[Task<Void, any Error>]>([])
        let loop = EventLoopTaskExecutor(MultiThreadedEventLoopGroup.singleton.next())
        let caller = try await Task(executorPreference: loop) {
            try await writer.write { connection in
                for name in names {
                    let waiting = writer.waiting
                    tasks.withLock { $0.append(Task.detached { try await queue(name, threads) }) }
                    // The loop's thread waits here, as on a long write; the work queues from Swift's pool.
                    while writer.waiting == waiting { sched_yield() }
                }
                _ = try connection.step("INSERT INTO t VALUES ('first')")
                return pthread_self()
            }
        }.value
        for task in tasks.withLock({ $0 }) { try await task.value }
        return (caller, threads.withLock { $0 })
    }

    @Test("Writes that queue behind a write on its caller's thread commit there next, together, in order")
    func queuedBehindCallersWrite() async throws {
        let rows = try await withWriter(table: "k TEXT PRIMARY KEY", readBack: "SELECT k AS r FROM t ORDER BY rowid") {
            writer in
            let commitsBefore = writer.commits
            let (caller, queued) = try await threads(of: writer, queuing: ["b", "c"]) { name, threads in
                _ = try await writer.write(
                    { try $0.step("INSERT INTO t VALUES (?)", [.text(name)]) },
                    committed: { _ in threads.withLock { $0[name] = pthread_self() } })
            }
            #expect(queued["b"] == caller && queued["c"] == caller, "no hand-off to another thread")
            #expect(writer.commits == commitsBefore + 2)
        }
        #expect(rows == ["first", "b", "c"])
    }

    @Test("Work that runs alone never runs on a write's caller's thread; writes queued with it wait their turn")
    func aloneGoesToThePool() async throws {
        let rows = try await withWriter(table: "k TEXT PRIMARY KEY", readBack: "SELECT k AS r FROM t ORDER BY rowid") {
            writer in
            let (caller, queued) = try await threads(of: writer, queuing: ["alone", "b"]) { name, threads in
                if name == "alone" {
                    try await writer.alone { _ in threads.withLock { $0[name] = pthread_self() } }
                } else {
                    _ = try await writer.write(
                        { try $0.step("INSERT INTO t VALUES (?)", [.text(name)]) },
                        committed: { _ in threads.withLock { $0[name] = pthread_self() } })
                }
            }
            #expect(queued["alone"] != nil && queued["alone"] != caller)
            #expect(queued["b"] == queued["alone"], "the write queued after it ran after it, on the same thread")
        }
        #expect(rows == ["first", "b"])
    }

    @Test("A write that asks not to run on its caller's thread commits on the pool's, even with the writer idle")
    func notOnCallersThread() async throws {
        let rows = try await withWriter(table: "k TEXT PRIMARY KEY", readBack: "SELECT k AS r FROM t") { writer in
            let threads = try await Task(
                executorPreference: EventLoopTaskExecutor(MultiThreadedEventLoopGroup.singleton.next())
            ) {
                let caller = pthread_self()
                let committer = try await writer.write(onCallersThread: false) { connection in
                    _ = try connection.step("INSERT INTO t VALUES ('background')")
                    return pthread_self()
                }
                return (caller, committer)
            }.value
            #expect(pthread_equal(threads.0, threads.1) == 0)
        }
        #expect(rows == ["background"])
    }

    @Test("A write that throws alone changes nothing; the next one commits")
    func lonelyFailure() async throws {
        let rows = try await withWriter(table: "k TEXT PRIMARY KEY", readBack: "SELECT k AS r FROM t") { writer in
            await #expect(throws: Refused.self) {
                try await writer.write { connection -> Void in
                    _ = try connection.step("INSERT INTO t VALUES ('gone')")
                    throw Refused()
                }
            }
            _ = try await writer.write { try $0.step("INSERT INTO t VALUES ('kept')") }
        }
        #expect(rows == ["kept"])
    }
}
