import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// Real disk failures under a running relay on SQLite: immutable files (as a disk remounted read-only
/// behaves), a full file system, a removed directory. The relay keeps running, says so on `/readyz`,
/// answers 503 (a page for the phone) without sending an SMS, and recovers by itself; nothing
/// committed is lost.
@Suite("Failing disks", .enabled(if: Disk.canFail, "needs root, chattr and mount"), .timeLimit(.minutes(2)))
struct StoreFailureTests {
    static let phone = #"{"phoneNumber":"2001004014"}"#

    func sent(_ relay: TestRelay) async throws -> Int {
        try await relay.request(.GET, "/sandbox/outbox?phoneNumber=2001004014").body.components(separatedBy: "\"link\"")
            .count - 1
    }

    func expectStoreDown(_ relay: TestRelay, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let before = try await sent(relay)
        let refused = try await relay.api(.POST, "/v1/sessions", body: Self.phone)
        #expect(refused.status == 503, "\(refused.body)", sourceLocation: sourceLocation)
        #expect(refused.header("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
        #expect(
            try await sent(relay) == before, "no SMS for a create that cannot be kept", sourceLocation: sourceLocation)
        #expect(try await relay.request(.GET, "/readyz").status == 503, sourceLocation: sourceLocation)
        #expect(try await relay.request(.GET, "/healthz").status == 200, sourceLocation: sourceLocation)
    }

    @Test("Files that stop being writable: 503 and /readyz 503, the cause logged once, and all back once they are")
    func immutableFiles() async throws {
        let directory = try Disk.directory()
        defer { Disk.remove(directory) }
        let path = directory + "/relay.sqlite"
        var kept: Created?
        try await TestRelay.run(store: "sqlite:" + path) { relay in
            let session = try await relay.createSession()
            kept = session
            let files = [directory, path, path + "-wal"].filter { FileManager.default.fileExists(atPath: $0) }
            #expect(!FileManager.default.fileExists(atPath: path + "-shm"), "no memory-mapped index to fault on")
            try Disk.run("chattr", ["+i"] + files)
            // Written back, a page of a mapped file faults at its next write (SIGBUS on an immutable file).
            try Disk.run("sync", [])
            do {
                try await expectStoreDown(relay)
                let (landing, _) = try await relay.tap()
                #expect(landing.status == 503, "the phone gets the friendly page")
                #expect(landing.header("Content-Type")?.hasPrefix("text/html") == true)
            } catch {
                try? Disk.run("chattr", ["-i"] + files)
                throw error
            }
            try Disk.run("chattr", ["-i"] + files)
            #expect(try await relay.request(.GET, "/readyz").status == 200)
            #expect(relay.logs.all.filter { $0.contains("The store cannot take writes") }.count == 1)
            #expect(relay.logs.all.contains { $0.contains("The store takes writes again") })
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 200)
            #expect(try await relay.pollUntilDone(session).map(\.type) == ["waiting", "tapped", "result"])
        }
        // Nothing committed was lost.
        let store = try await SQLiteSessionStore.open(path: path, logger: quietLogger(), checkpointInterval: nil)
        let reopened = try await store.session(id: try #require(kept).sessionId)
        try await store.close()
        #expect(reopened?.state == .verified)
    }

    @Test("A full file system: a create that cannot be kept answers 503 without an SMS, until there is room again")
    func fullDisk() async throws {
        let directory = try Disk.directory()
        defer { Disk.remove(directory) }
        try Disk.run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", directory])
        defer { try? Disk.run("umount", ["-l", directory]) }
        let filler = directory + "/filler"
        try await TestRelay.run(store: "sqlite:" + directory + "/relay.sqlite") { relay in
            let first = try await relay.createSession()
            // Fill what is left; the WAL's pages already on disk can still be written over, so creates
            // go through until the WAL must grow.
            try? Disk.run("dd", ["if=/dev/zero", "of=" + filler, "bs=64k"])
            var refused = false
            for _ in 0..<500 where !refused {
                let before = try await sent(relay)
                let answer = try await relay.api(.POST, "/v1/sessions", body: Self.phone)
                if answer.status == 503 {
                    refused = true
                    #expect(try await sent(relay) == before, "no SMS for a create that cannot be kept")
                } else {
                    #expect(answer.status == 201)
                }
            }
            #expect(refused)
            // (Readiness is left out here: a small write may still fit in WAL pages already on disk, and
            // then the store can take it. The other two tests check readiness.)
            try FileManager.default.removeItem(atPath: filler)
            #expect(try await relay.request(.GET, "/readyz").status == 200)
            #expect(try await relay.api(.POST, "/v1/sessions", body: Self.phone).status == 201)
            #expect(try await relay.session(first.sessionId).state == "waiting")
        }
    }

    @Test("A backup onto a full file system fails and leaves the directory as it was: no copy, no journal")
    func backupOnAFullDisk() async throws {
        let directory = try Disk.directory()
        defer { Disk.remove(directory) }
        let backups = directory + "/backups"
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
        try Disk.run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", backups])
        defer { try? Disk.run("umount", ["-l", backups]) }
        try await RetentionTests.with("sqlite") { harness in
            let sqlite = try #require(harness.store as? SQLiteSessionStore)
            _ = try await RetentionTests.challenged(harness)
            // A store larger than SQLite's page cache (2 MiB), as a relay's soon is: the copy then writes
            // pages before it commits, with its journal, and a full disk stops it half-way.
            for _ in 0..<2000 {
                _ = try await harness.service.create(
                    CreateSessionRequest(phoneNumber: "2001004014"), idempotencyKey: nil)
            }
            try await sqlite.checkpoint()
            #expect(SQLiteFile.fileSize(sqlite.path) > 2 << 20)
            let made = SQLiteBackups(directory: backups, store: sqlite)
            // Full from the start, and full part of the way through the copy (pages of 4 KiB left).
            for room in [0, 16, 256] {
                if room > 0 {
                    try Disk.run("dd", ["if=/dev/zero", "of=" + backups + "/room", "bs=4k", "count=\(room)"])
                }
                try? Disk.run("dd", ["if=/dev/zero", "of=" + backups + "/filler", "bs=4k"])
                if room > 0 { try FileManager.default.removeItem(atPath: backups + "/room") }
                await #expect(throws: (any Error).self, "\(room) pages free") { try await made.make() }
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: backups) == ["filler"], "\(room) pages free")
                try FileManager.default.removeItem(atPath: backups + "/filler")
            }
            // With room again, the next backup is written, and nothing else.
            let written = try await made.make()
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: backups) == [
                    (written.path as NSString).lastPathComponent
                ])
        }
    }

    @Test("The database's directory removed: /readyz 503 and no create answered 201 for a session that would vanish")
    func removedDirectory() async throws {
        let directory = try Disk.directory()
        defer { Disk.remove(directory) }
        try await TestRelay.run(store: "sqlite:" + directory + "/relay.sqlite") { relay in
            let first = try await relay.createSession()
            try FileManager.default.removeItem(atPath: directory)
            try await expectStoreDown(relay)
            #expect(try await relay.session(first.sessionId).state == "waiting", "what was read stays readable")
        }
    }
}

/// The test's access to real file-system failures; all of it needs root.
enum Disk {
    /// Whether `chattr` and `mount` work here (root on ext4, or a container that allows them).
    static let canFail: Bool = {
        guard getuid() == 0, let directory = try? directory() else { return false }
        defer { remove(directory) }
        let probe = directory + "/probe"
        guard FileManager.default.createFile(atPath: probe, contents: nil),
            (try? run("chattr", ["+i", probe])) != nil
        else { return false }
        try? run("chattr", ["-i", probe])
        guard (try? run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", directory])) != nil else { return false }
        try? run("umount", [directory])
        return true
    }()

    static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("lr-disk-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func remove(_ path: String) {
        try? run("chattr", ["-R", "-i", path])
        try? FileManager.default.removeItem(atPath: path)
    }

    struct Failed: Error { let command: String }

    /// Runs a system tool (from /usr/bin or /bin); throws unless it exits 0.
    static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failed(command: tool) }
    }
}
