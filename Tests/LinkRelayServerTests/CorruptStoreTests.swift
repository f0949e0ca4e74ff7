import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import SQLiteNIO
import Testing

@testable import LinkRelayServer

/// Real SQLite files, made through the store and then damaged as a disk or a careless copy damages
/// them: a page of a table overwritten with garbage, a file cut to 0 bytes, a text file in its place.
enum StoreFiles {
    /// A new empty directory's path; the caller removes it.
    static func directory() throws -> String { try SQLiteStoreTests.temporaryDirectory().path }

    /// A database made by the store at `path`, closed: `count` sessions, the first with a webhook
    /// message still queued. Returns the sessions' ids.
    @discardableResult
    static func makeDatabase(at path: String, sessions count: Int = 3) async throws -> [String] {
        let store = try await SQLiteSessionStore.open(path: path, logger: quietLogger(), checkpointInterval: nil)
        var ids: [String] = []
        var failure: (any Error)?
        do {
            ids.append(try await WebhookFixtures.enqueue(store, at: Date()).sessionId)
            for index in 1..<count {
                let session = SQLiteStoreTests.session(index)
                try await store.insert(
                    session, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date()))
                ids.append(session.id)
            }
        } catch {
            failure = error
        }
        try await store.close()
        if let failure { throw failure }
        return ids
    }

    /// The first page of `table` (its root) and the file's page size, read through the store's VFS.
    static func rootPage(of table: String, in path: String) async throws -> (page: Int, size: Int) {
        let connection = try await SQLiteConnection.open(storage: .file(path: SQLiteSessionStore.uri(path)))
        let root = try? await connection.query("SELECT rootpage FROM sqlite_master WHERE name = ?", [.text(table)])
        let size = try? await connection.query("PRAGMA page_size")
        try await connection.close()
        return (
            try #require(root?.first?.column("rootpage")?.integer),
            try #require(size?.first?.column("page_size")?.integer)
        )
    }

    /// Overwrites one page of the file with garbage, as a bad sector or a stray write does.
    static func overwrite(page: Int, size: Int, in path: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64((page - 1) * size))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: size))
    }

    /// Overwrites the root page of `table`.
    static func damage(_ table: String, in path: String) async throws {
        let (page, size) = try await rootPage(of: table, in: path)
        try overwrite(page: page, size: size, in: path)
    }

    static func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    static func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    /// Makes a database at `path` with a table of another program's, or of a schema newer than this one.
    static func makeForeign(at path: String) async throws {
        let other = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try? await other.query("CREATE TABLE contacts (name TEXT)")
        _ = try? await other.query("INSERT INTO contacts VALUES ('kept')")
        try await other.close()
    }

    static func makeNewer(at path: String) async throws {
        try await makeDatabase(at: path, sessions: 1)
        let connection = try await SQLiteConnection.open(storage: .file(path: SQLiteSessionStore.uri(path)))
        _ = try? await connection.query(
            "INSERT INTO schema_version (version) VALUES (?)", [.integer(SQLiteMigrations.schemaVersion + 1)])
        try await connection.close()
    }
}

/// An existing file the relay must not trust stops the start with one line that names it, and is
/// left exactly as it was; a new file is made only where none exists (API.md v1.2, "A store that
/// knows it is broken").
@Suite("Corrupt store: refused at start", .timeLimit(.minutes(2)))
struct CorruptStoreStartTests {
    enum Bad: String, CaseIterable, CustomTestStringConvertible {
        case empty, text, sessionsPage, webhookQueuePage, foreign, newer

        var testDescription: String { rawValue }

        /// Words the refusal's line must hold, besides the file's path.
        var expected: [String] {
            switch self {
            case .empty: ["empty", "backup"]
            case .text: ["not a SQLite database", "backup"]
            case .sessionsPage, .webhookQueuePage: ["corrupt", "backup"]
            case .foreign: ["not LinkRelay's", "move the file away"]
            case .newer: ["newer than this linkrelay knows", "backup"]
            }
        }

        func make(at path: String) async throws {
            switch self {
            case .empty: #expect(FileManager.default.createFile(atPath: path, contents: Data()))
            case .text:
                #expect(FileManager.default.createFile(atPath: path, contents: Data("sessions, I promise\n".utf8)))
            case .sessionsPage:
                try await StoreFiles.makeDatabase(at: path)
                try await StoreFiles.damage("sessions", in: path)
            case .webhookQueuePage:
                try await StoreFiles.makeDatabase(at: path)
                try await StoreFiles.damage("webhook_queue", in: path)
            case .foreign: try await StoreFiles.makeForeign(at: path)
            case .newer: try await StoreFiles.makeNewer(at: path)
            }
        }
    }

    @Test(
        "The store refuses the file with one line naming it, and leaves every byte as it was", arguments: Bad.allCases)
    func storeRefuses(_ bad: Bad) async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        try await bad.make(at: path)
        let before = try #require(StoreFiles.bytes(path))

        let logs = LogCapture()
        var refusal: ConfigurationError?
        do {
            let store = try await SQLiteSessionStore.open(path: path, logger: logs.logger(), checkpointInterval: nil)
            try await store.close()
        } catch let error as ConfigurationError {
            refusal = error
        }
        let line = try #require(refusal?.description, "the store opened the \(bad) file")
        #expect(line.hasPrefix("--store sqlite:\(path): "))
        #expect(!line.contains("\n"))
        for word in bad.expected { #expect(line.contains(word), "\(line)") }
        #expect(StoreFiles.bytes(path) == before, "the refused file is left byte for byte")
        #expect(logs.all.isEmpty, "nothing but the one line")
    }

    @Test("linkrelay serve exits 2 with that one line on standard error", arguments: [Bad.empty, .sessionsPage])
    func serveExitsTwo(_ bad: Bad) async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        try await bad.make(at: path)
        let before = try #require(StoreFiles.bytes(path))
        // A relay that starts on the file is the defect: it is stopped rather than waited for.
        let run = try await CLI.run(
            ["serve", "--drain-delay", "0", "--port", "0", "--store", "sqlite:" + path, "--api-key", TestRelay.apiKey],
            stopWhen: "LinkRelay listening")
        #expect(run.status == 2)
        let lines = run.standardError.split(separator: "\n")
        #expect(lines.count == 1, "\(run.standardError)")
        #expect(lines.first?.hasPrefix("linkrelay: --store sqlite:\(path): ") == true)
        #expect(StoreFiles.bytes(path) == before)
    }

    @Test("A new file is made only where none exists, mode 0600, and so is its WAL")
    func newFileIsPrivate() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        let logs = LogCapture()
        let store = try await SQLiteSessionStore.open(path: path, logger: logs.logger(), checkpointInterval: nil)
        let session = SQLiteStoreTests.session(1)
        // Nothing may throw before the store closes (SQLiteNIO stops a process whose connections are dropped).
        let inserted =
            (try? await store.insert(
                session, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date()))) != nil
        let modes = (try? StoreFiles.mode(path), try? StoreFiles.mode(path + "-wal"))
        try await store.close()
        #expect(inserted)
        #expect(modes.0 == 0o600)
        #expect(modes.1 == 0o600, "SQLite gives the WAL the database file's mode")
        #expect(!logs.all.contains { $0.contains("can be read by other users") })
    }

    @Test("An existing file that others can read is opened with a warning, and its mode left alone")
    func sharedFileWarns() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        try await StoreFiles.makeDatabase(at: path, sessions: 1)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        let logs = LogCapture()
        let store = try await SQLiteSessionStore.open(path: path, logger: logs.logger(), checkpointInterval: nil)
        try await store.close()
        #expect(logs.all.filter { $0.hasPrefix("warning") && $0.contains("can be read by other users") }.count == 1)
        #expect(try StoreFiles.mode(path) == 0o644)
    }

    @Test(
        "Restore: a backup of a good file, the file damaged and refused, the backup copied back: every session is there"
    )
    func restoreFromBackup() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        let backup = directory + "/backup.sqlite"
        let ids = try await StoreFiles.makeDatabase(at: path)
        // The running relay's way (SIGUSR1): a copy while the store is open.
        let store = try await SQLiteSessionStore.open(path: path, logger: quietLogger(), checkpointInterval: nil)
        let copied = (try? await store.backup(to: backup)) != nil
        try await store.close()
        #expect(copied)
        #expect(try StoreFiles.mode(backup) == 0o600)

        try await StoreFiles.damage("sessions", in: path)
        do {
            let opened = try await SQLiteSessionStore.open(path: path, logger: quietLogger(), checkpointInterval: nil)
            try? await opened.close()
            Issue.record("the damaged file was opened")
        } catch {
            #expect(error is ConfigurationError)
        }
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: backup, toPath: path)

        let restored = try await SQLiteSessionStore.open(path: path, logger: quietLogger(), checkpointInterval: nil)
        var found: [String?] = []
        for id in ids { found.append((try? await restored.session(id: id))?.id) }
        let queued = try? await restored.webhookMessages(tenant: Tenant.defaultName, state: .pending, limit: 10)
        try await restored.close()
        #expect(found == ids.map(Optional.some))
        #expect(queued?.map(\.sessionId) == [ids[0]], "the queued webhook message came back too")
    }
}

/// A file damaged under a running relay: the first statement that meets the damage marks the store
/// corrupt until restart. `/readyz` says so, everything that needs the store answers 503, and the log
/// holds one critical line however many requests follow.
@Suite("Corrupt store: found at run time", .timeLimit(.minutes(2)))
struct CorruptStoreRunTimeTests {
    static let phone = #"{"phoneNumber":"2001004014"}"#

    /// Damages `table` under the relay's store: the WAL emptied into the file first (so that reads of
    /// the page go to the file), then the page overwritten, then every copy in memory dropped.
    static func damage(_ table: String, under relay: TestRelay) async throws -> SQLiteSessionStore {
        let store = try #require(relay.relay.store as? SQLiteSessionStore)
        try await store.writer.alone { try $0.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        let root = try #require(
            try await store.read("SELECT rootpage FROM sqlite_master WHERE name = ?", [.text(table)]).first?
                .column("rootpage")?.integer)
        let size = try #require(try await store.read("PRAGMA page_size").first?.column("page_size")?.integer)
        try StoreFiles.overwrite(page: root, size: size, in: store.path)
        store.dropCachedSessions()
        await store.releaseMemory()  // SQLite's page caches
        return store
    }

    static func criticalLines(_ relay: TestRelay) -> [String] { relay.logs.all.filter { $0.hasPrefix("critical") } }

    @Test(
        "A page of the sessions table overwritten: /readyz 503 store corrupt, creates and reads 503, one critical line")
    func sessionsPage() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await TestRelay.run(store: "sqlite:" + directory + "/relay.sqlite") { relay in
            let first = try await relay.createSession()
            let second = try await relay.createSession()
            #expect(try await relay.request(.GET, "/readyz").status == 200)
            let store = try await Self.damage("sessions", under: relay)

            let read = try await relay.api(.GET, "/v1/sessions/\(first.sessionId)")
            #expect(read.status == 503, "\(read.body)")
            #expect(read.header("Content-Type") == "application/problem+json")
            #expect(read.body.contains("Store corrupt"))
            #expect(store.isCorrupt)

            let readiness = try await relay.request(.GET, "/readyz")
            #expect(readiness.status == 503)
            #expect(readiness.body == "store corrupt\n")
            #expect(try await relay.request(.GET, "/healthz").status == 200)

            // Creates, reads (also of a session that was in memory), the phone's tap: all 503, and
            // no later success clears it.
            for _ in 0..<5 {
                let created = try await relay.api(.POST, "/v1/sessions", body: Self.phone)
                #expect(created.status == 503, "\(created.body)")
                #expect(created.header("Content-Type") == "application/problem+json")
                #expect(try await relay.api(.GET, "/v1/sessions/\(second.sessionId)").status == 503)
                #expect(try await relay.request(.GET, "/readyz").body == "store corrupt\n")
            }
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 503, "the phone gets the friendly page")
            #expect(landing.header("Content-Type")?.hasPrefix("text/html") == true)

            #expect(Self.criticalLines(relay).count == 1, "\(Self.criticalLines(relay))")
            #expect(Self.criticalLines(relay).first?.contains(store.path) == true, "the line names the file")
            #expect(!relay.logs.all.contains { $0.contains("The store takes writes again") }, "no flapping")
            #expect(!relay.logs.all.contains { $0.contains("The store cannot take writes") })
        }
    }

    @Test("A page of the webhook queue overwritten: the cancel that meets it is 503, and so is everything after")
    func webhookQueuePage() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A receiver that is not there: messages wait in the queue.
        let flags = ["webhook-url": ["http://127.0.0.1:9/hook"], "webhook-secret": [WebhookFixtures.secret]]
        try await TestRelay.run(store: "sqlite:" + directory + "/relay.sqlite", flags: flags) { relay in
            let session = try await relay.createSession()
            _ = try await Self.damage("webhook_queue", under: relay)

            let cancel = try await relay.api(.POST, "/v1/sessions/\(session.sessionId)/cancel")
            #expect(cancel.status == 503, "\(cancel.body)")
            #expect(try await relay.request(.GET, "/readyz").body == "store corrupt\n")
            #expect(try await relay.api(.POST, "/v1/sessions", body: Self.phone).status == 503)
            #expect(try await relay.api(.GET, "/v1/sessions/\(session.sessionId)").status == 503)
            #expect(Self.criticalLines(relay).count == 1, "\(Self.criticalLines(relay))")
        }
    }

    @Test("Corrupt is for good: neither a success nor another failure clears it, and it is logged once")
    func healthStaysCorrupt() {
        let logs = LogCapture()
        let health = StorageHealth(logger: logs.logger(), path: "/data/relay.sqlite")
        health.failed(StoreError.unavailable)
        #expect(health.corrupted(StoreError.corrupt))
        #expect(!health.corrupted(StoreError.corrupt))
        health.succeeded()
        health.failed(StoreError.unavailable)
        #expect(health.isCorrupt && health.isFailing)
        #expect(logs.all.filter { $0.hasPrefix("critical") }.count == 1)
        #expect(!logs.all.contains { $0.contains("takes writes again") })
    }
}
