import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import SQLiteNIO
import Testing

@testable import LinkRelayServer

@Suite("SQLite store", .timeLimit(.minutes(1)))
struct SQLiteStoreTests {
    static func session(_ index: Int) -> Session {
        let now = Date()
        var session = Session(
            id: "ses_\(index)", linkKey: "key\(index)", channelToken: "token", createdAt: now,
            expiresAt: now.addingTimeInterval(180), correlationId: "c\(index)", authToken: nil,
            clientRequestId: "r\(index)", phoneNumber: "2001004014", finalTargetUrl: "http://relay/l/key\(index)",
            idempotencyKey: nil, requestFingerprint: "f")
        session.record(.waiting(expiresAt: session.expiresAt), at: now)
        return session
    }

    /// A new empty directory; the caller removes it.
    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The verifier reads a session right after a landing committed its tap. SQLite lets statements
    /// that run at once on one connection share a read transaction, so a read that overlapped a
    /// longer one saw the row as it was before the commit: the verifier thought nothing was landed,
    /// and the session never got its result (2 of 15,000 in the benchmark).
    @Test("A read after a commit sees it, while other reads run at the same time")
    func readAfterCommit() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let writer = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        for index in 0..<50 {
            let session = Self.session(index)
            try await writer.insert(
                session, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date()))
        }
        try await writer.close()
        // Reopened, the store has not seen these sessions' events: it reads them from the file.
        let store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        var current = try #require(try await store.session(id: "ses_0"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Long reads that keep the connection busy meanwhile.
            let done = Locked(false)
            for _ in 0..<2 {
                group.addTask {
                    while !done.withLock({ $0 }) { _ = try await store.activeSessions() }
                }
            }
            var stale = 0
            for _ in 0..<100 {
                var next = current
                let event = next.record(.tapped(asc: true), at: Date())
                next.version += 1
                #expect(try await store.update(next, expectedVersion: current.version, appending: [event]))
                if try await store.events(sessionID: "ses_0", after: 0).count != next.lastSeq { stale += 1 }
                current = next
            }
            done.withLock { $0 = true }
            try await group.waitForAll()
            #expect(stale == 0, "reads that missed a commit before them")
        }
        try await store.close()
    }

    /// Live sessions are read from memory, the others from the file: both must always show the last commit.
    @Test("Reads show the last commit: live, refused, ended, and after reopening the file")
    func readsShowTheLastCommit() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let created = Self.session(1)
        var store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let waiting = SessionEvent(seq: 1, kind: .waiting(expiresAt: created.expiresAt), at: created.createdAt)
        try await store.insert(created, event: waiting)

        // The relay announces events from `committed`: by then a channel reads them from memory.
        let announced = Locked<[[SessionEvent]?]>([])
        let opened = store
        let announce: @Sendable () -> Void = {
            announced.withLock { $0.append(opened.eventsInMemory(sessionID: "ses_1", after: 1)) }
        }
        var tapped = created
        let tap = tapped.record(.tapped(asc: true), at: Date())
        tapped.version += 1
        #expect(
            try await store.update(tapped, expectedVersion: created.version, appending: [tap], committed: announce))
        #expect(try await store.session(linkKey: "key1")?.state == .tapped)
        #expect(try await store.session(id: "ses_1")?.version == tapped.version)

        // A write from a stale version is refused, changes nothing and announces nothing.
        var stale = created
        stale.version = created.version + 5
        #expect(try await !store.update(stale, expectedVersion: created.version, appending: [], committed: announce))
        #expect(try await store.session(id: "ses_1")?.version == tapped.version)
        #expect(announced.withLock { $0 } == [[tap]])

        #expect(try await store.events(sessionID: "ses_1", after: 1) == [tap])

        // After a restart the live session is read from the file, and then ends.
        try await store.close()
        store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let reopened = try #require(try await store.session(linkKey: "key1"))
        #expect(reopened == tapped)
        var ended = reopened
        ended.result = SessionResult(outcome: .verified, proveSuccess: "true")
        let result = ended.record(.result(.verified), at: Date())
        ended.version += 1
        #expect(try await store.update(ended, expectedVersion: reopened.version, appending: [result]))
        #expect(try await store.session(id: "ses_1")?.state == .verified)
        #expect(try await store.session(linkKey: "key1") == ended)
        #expect(try await store.events(sessionID: "ses_1", after: 0) == [waiting, tap, result])
        try await store.close()
    }
}

extension SQLiteStoreTests {
    /// The relay closes the store in its teardown, which the service group may have cancelled. A
    /// connection left open keeps the WAL beside the file, and SQLiteNIO stops the process when it goes.
    @Test("Closing closes every connection, also when the caller is cancelled, and a second close is harmless")
    func closeFromACancelledTask() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let session = Self.session(1)
        try await store.insert(
            session, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: session.createdAt))
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))

        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await store.close()
        }
        try await cancelled.value
        try await store.close()
        // The last connection to close copies the WAL into the file and removes it.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))

        let reopened = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        #expect(try await reopened.session(id: "ses_1") == session)
        try await reopened.close()
    }

    /// `--store sqlite:PATH` naming another program's database: the relay says why it cannot start.
    @Test("A file whose tables are another program's fails to open, its tables and rows as they were")
    func foreignFileFailsToOpen() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("other.sqlite").path
        let other = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try await other.query("CREATE TABLE sessions (name TEXT)")
        _ = try await other.query("INSERT INTO sessions VALUES ('kept')")
        try await other.close()

        await #expect(throws: (any Error).self) {
            try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        }
        let check = try await SQLiteConnection.open(storage: .file(path: path))
        let rows = try await check.query("SELECT name FROM sessions")
        let tables = try await check.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        try await check.close()
        #expect(rows.map { $0.column("name")?.string } == ["kept"])
        #expect(tables.map { $0.column("name")?.string } == ["sessions"])
    }

    /// A file written by an earlier relay (schema 1: events in their own table) opens with its sessions
    /// and events intact, and takes new writes.
    @Test("A schema-1 file is upgraded with its sessions and events")
    func upgradesSchemaOne() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        var session = Self.session(7)
        let waiting = SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: session.createdAt)
        let tapped = session.record(.tapped(asc: false), at: Date())
        session.version = 1

        let old = try await SQLiteConnection.open(storage: .file(path: path), logger: Logger(label: "test"))
        _ = try await old.query("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for statement in SQLiteMigrations.steps[0] { _ = try await old.query(statement) }
        _ = try await old.query("INSERT INTO schema_version (version) VALUES (1)")
        let encoder = JSONEncoder()
        let data = String(decoding: try encoder.encode(session), as: UTF8.self)
        _ = try await old.query(
            "INSERT INTO sessions (id, link_key, state, version, data) VALUES (?, ?, ?, ?, ?)",
            [.text(session.id), .text(session.linkKey), .text("tapped"), .integer(1), .text(data)])
        for event in [tapped, waiting] {  // out of order on purpose: the upgrade orders by seq
            _ = try await old.query(
                "INSERT INTO events (session_id, seq, data) VALUES (?, ?, ?)",
                [
                    .text(session.id), .integer(event.seq),
                    .text(String(decoding: try encoder.encode(event), as: UTF8.self)),
                ])
        }
        try await old.close()

        let store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        #expect(try await store.session(linkKey: "key7") == session)
        #expect(try await store.events(sessionID: "ses_7", after: 0) == [waiting, tapped])
        #expect(try await store.events(sessionID: "ses_7", after: 1) == [tapped])
        var ended = session
        let result = ended.record(.result(.failed), at: Date())
        ended.version += 1
        #expect(try await store.update(ended, expectedVersion: 1, appending: [result]))
        #expect(try await store.events(sessionID: "ses_7", after: 0) == [waiting, tapped, result])
        try await store.close()

        let check = try await SQLiteConnection.open(storage: .file(path: path), logger: Logger(label: "test"))
        let version = try await check.query("SELECT MAX(version) AS v FROM schema_version").first?.column("v")?.integer
        #expect(version == SQLiteMigrations.schemaVersion)
        try await check.close()
    }
}

extension SQLiteStoreTests {
    /// Puts `session` in the cache as its creation's commit does: waiting, with its first event.
    static func create(_ session: Session, in cache: inout SQLiteSessionCache) {
        cache.inserted(session, SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date()))
    }

    /// Ends `session` (expired) in the cache, as the commit of that update does.
    static func end(_ session: Session, in cache: inout SQLiteSessionCache) {
        var ended = session
        let event = ended.record(.expired, at: Date())
        ended.version += 1
        cache.updated(ended, appending: [event])
    }

    @Test("The cache keeps live sessions up to its capacity and the ones that ended last")
    func cacheCapacities() {
        var cache = SQLiteSessionCache(liveCapacity: 2, endedCapacity: 2)
        let sessions = (0..<4).map { Self.session($0) }
        for session in sessions { Self.create(session, in: &cache) }
        #expect(sessions.map { cache.entry(id: $0.id) != nil } == [true, true, false, false], "two live at most")

        // Three end: the two that ended last stay, found by id and by link key; the first is dropped.
        for index in [0, 1, 2] { Self.end(sessions[index], in: &cache) }
        #expect(cache.entry(id: "ses_0") == nil && cache.entry(linkKey: "key0") == nil)
        #expect(cache.entry(linkKey: "key1")?.session.state == .expired)
        #expect(cache.entry(id: "ses_1")?.events?.count == 2)
        #expect(cache.entry(id: "ses_2")?.events == nil, "not inserted here: its earlier events are the file's")
        #expect(cache.entry(id: "ses_2")?.session.state == .expired)
    }

    @Test("An ended session leaves the cache at the second release after it ended; live ones stay")
    func cacheRelease() {
        var cache = SQLiteSessionCache(liveCapacity: 10, endedCapacity: 10)
        let sessions = (0..<3).map { Self.session($0) }
        for session in sessions { Self.create(session, in: &cache) }
        func end(_ index: Int) { Self.end(sessions[index], in: &cache) }
        func cached() -> [Bool] {
            sessions.map { cache.entry(id: $0.id) != nil && cache.entry(linkKey: $0.linkKey) != nil }
        }

        end(0)
        cache.release()
        #expect(cached() == [true, true, true], "ended just now: kept")
        end(1)
        cache.release()
        #expect(cached() == [false, true, true])
        cache.release()
        #expect(cached() == [false, false, true], "the live one stays")
        #expect(cache.entry(id: "ses_2")?.events?.count == 1)
    }

    @Test("Once every ended session has left the cache, the ring that kept their order gives back its room")
    func cacheReleasesEndedRoom() {
        var cache = SQLiteSessionCache(liveCapacity: 3_000, endedCapacity: 2_048)
        let sessions = (0..<3_000).map { Self.session($0) }
        for session in sessions {
            Self.create(session, in: &cache)
            Self.end(session, in: &cache)
        }
        #expect(cache.endedRoom >= 2_048)
        cache.release()
        #expect(cache.entry(id: "ses_2999") != nil, "ended since the last release: kept")
        cache.release()
        #expect(cache.entry(id: "ses_2999") == nil)
        #expect(cache.endedRoom < 16)

        // The ring works on: the next session to end is kept until the second release after.
        let next = Self.session(3_000)
        Self.create(next, in: &cache)
        Self.end(next, in: &cache)
        cache.release()
        #expect(cache.entry(linkKey: next.linkKey)?.session.state == .expired)
        cache.release()
        #expect(cache.entry(id: next.id) == nil)
    }

    @Test("releaseMemory keeps reads right: from memory, then from the file")
    func releaseMemory() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let session = Self.session(5)
        let waiting = SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date())
        try await store.insert(session, event: waiting)
        var ended = session
        let expired = ended.record(.expired, at: Date())
        ended.version += 1
        #expect(try await store.update(ended, expectedVersion: session.version, appending: [expired]))
        for _ in 0..<3 {
            await store.releaseMemory()
            #expect(try await store.session(linkKey: session.linkKey)?.state == .expired)
            #expect(try await store.events(sessionID: session.id, after: 0) == [waiting, expired])
        }
        try await store.close()
    }

    /// The checkpointer, not a commit, copies the WAL into the database file, so no write waits for
    /// that copy and its fsyncs. SQLite's own rule would have a commit do it at 1,000 WAL pages.
    @Test(
        "Commits leave the WAL to the checkpointer, which starts it over; the database file alone then holds every session"
    )
    func checkpointer() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let store = try await SQLiteSessionStore.open(
            path: path, logger: Logger(label: "test"), checkpointInterval: nil)
        func insert(_ index: Int) async throws {
            let session = Self.session(index)
            try await store.insert(
                session, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date()))
        }
        for index in 0..<1500 { try await insert(index) }
        // The WAL file keeps its size when it starts over, so this is the most it ever held.
        let walBytes = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        #expect(walBytes > SQLiteSessionStore.restartPages * 4096, "no commit checkpointed on its own")
        // Writes go on while it copies, as under load.
        let stop = Locked(false)
        let writing = Task {
            var index = 1500
            while !stop.withLock({ $0 }) {
                try await insert(index)
                index += 1
            }
            return index
        }
        try await store.checkpoint()
        stop.withLock { $0 = true }
        var count = try await writing.value
        let (walPages, copied) = try await store.checkpoint()
        #expect(copied == walPages, "with no write meanwhile, a checkpoint copies all of the WAL")
        // Once a checkpoint has copied all of it, the next write starts the WAL over.
        try await insert(count)
        count += 1
        #expect(
            try await store.checkpoint().walPages < SQLiteSessionStore.restartPages,
            "the write after the checkpoint started the WAL over")

        // The database file without its WAL, as a backup that copies only it would have it.
        let copy = directory.appendingPathComponent("copy.sqlite").path
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let reopened = try await SQLiteConnection.open(storage: .file(path: copy))
        let rows = try await reopened.query("SELECT count(*) AS n FROM sessions")
        #expect(rows.first?.column("n")?.integer == count)
        try await reopened.close()
        try await store.close()
    }
}

extension SQLiteStoreTests {
    /// An update splices its events into the row's JSON array as text; read back from the file (a new
    /// store, nothing in memory) they are the events written, in order: one, two at once, and the first
    /// of a row that had none (a schema-1 session without event rows comes out of the upgrade with `[]`).
    @Test("Events appended by updates read back from the file in order, also to a row that had none")
    func appendedEventsReadBack() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path

        var session = Self.session(1)
        session.phoneNumber = ""  // empty text is stored as '', not as NULL
        let waiting = SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: session.createdAt)
        var bare = Self.session(2)
        bare.clientRequestId = "rêquête ✓"
        let store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        try await store.insert(session, event: waiting)
        try await store.insert(bare, event: waiting)
        let other = try await SQLiteConnection.open(storage: .file(path: path), logger: Logger(label: "test"))
        _ = try await other.query("UPDATE sessions SET events = '[]' WHERE id = 'ses_2'")
        try await other.close()

        // Nothing below may throw before the stores close (SQLiteNIO stops a test process whose
        // connections were not closed): a failure is an expectation that fails.
        let tapped = session.record(.tapped(asc: true), at: Date())
        session.version = 1
        #expect((try? await store.update(session, expectedVersion: 0, appending: [tapped])) == true)
        let result = session.record(.result(.verified), at: Date())
        let cancelled = session.record(.cancelled(reason: .rejected), at: Date())
        session.version = 2
        #expect((try? await store.update(session, expectedVersion: 1, appending: [result, cancelled])) == true)
        session.version = 3
        #expect((try? await store.update(session, expectedVersion: 2, appending: [])) == true)
        let expired = bare.record(.expired, at: Date())
        bare.version = 1
        #expect((try? await store.update(bare, expectedVersion: 0, appending: [expired])) == true)
        try await store.close()

        let reopened = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let read = (
            events: (try? await reopened.events(sessionID: "ses_1", after: 0)),
            session: (try? await reopened.session(id: "ses_1")),
            bareEvents: (try? await reopened.events(sessionID: "ses_2", after: 0)),
            bare: (try? await reopened.session(id: "ses_2"))
        )
        try await reopened.close()
        #expect(read.events == [waiting, tapped, result, cancelled])
        #expect(read.session == session)
        #expect(read.bareEvents == [expired])
        #expect(read.bare == bare)
    }
}
