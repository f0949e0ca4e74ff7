import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import Testing

@testable import LinkRelayServer

/// A running relay's backups: SIGUSR1 to a real `linkrelay` process (signals go to a process, and the
/// tests share theirs), and the backup function itself on an in-process relay.
@Suite("Backups on SIGUSR1", .timeLimit(.minutes(2)))
struct BackupTests {
    @Test(
        "SIGUSR1 writes a consistent 0600 copy into --backup-dir, one line each, the newest 3 kept; a failure is logged and the relay runs on"
    )
    func signal() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let backups = directory + "/backups"
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
        let path = directory + "/relay.sqlite"
        let (relay, port) = try await PersistenceTests.start(ready: "LinkRelay listening", "SIGUSR1 writes a backup") {
            [
                "serve", "--drain-delay", "0", "--port", String($0), "--store", "sqlite:" + path, "--api-key",
                TestRelay.apiKey, "--backup-dir", backups,
            ]
        }
        defer { relay.stop() }
        let base = "http://127.0.0.1:\(port)"
        let created = try await TestRelay.fetch(
            .POST, base + "/v1/sessions",
            headers: [("Authorization", "Bearer \(TestRelay.apiKey)"), ("Content-Type", "application/json")],
            body: #"{"phoneNumber":"2001004014"}"#)
        #expect(created.status == 201)
        let id = try created.json(Created.self).sessionId

        for _ in 0..<4 {
            kill(relay.process.processIdentifier, SIGUSR1)
            #expect(await relay.waitFor(all: ["Backup written", "bytes=", "duration_ms="]))
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: backups).sorted()
        #expect(names.count == 3, "\(names)")
        #expect(names.allSatisfy { $0.hasPrefix("linkrelay-") && $0.hasSuffix("Z.sqlite") })
        let newest = backups + "/" + (names.last ?? "")
        #expect(try StoreFiles.mode(newest) == 0o600)
        #expect(try await SQLiteFile.check(newest).isEmpty, "store check passes on it")
        let copy = try await SQLiteSessionStore.open(path: newest, logger: quietLogger(), checkpointInterval: nil)
        let kept = (try? await copy.session(id: id))?.id
        try await copy.close()
        #expect(kept == id)

        // The directory gone: the backup fails, is logged, and the relay answers on.
        try FileManager.default.removeItem(atPath: backups)
        kill(relay.process.processIdentifier, SIGUSR1)
        #expect(await relay.waitFor("Backup failed"))
        #expect(try await TestRelay.fetch(.GET, base + "/readyz").status == 200)
        await relay.kill()
    }

    @Test("Without --backup-dir, SIGUSR1 is logged as writing no backup, and the relay runs on")
    func signalWithoutDirectory() async throws {
        let (relay, port) = try await PersistenceTests.start(
            ready: "LinkRelay listening", "SIGUSR1 handled", environment: ["LOG_LEVEL": "debug"]
        ) {
            ["serve", "--drain-delay", "0", "--port", String($0), "--store", "memory", "--api-key", TestRelay.apiKey]
        }
        defer { relay.stop() }
        kill(relay.process.processIdentifier, SIGUSR1)
        #expect(await relay.waitFor("no backup written: no --backup-dir is set"))
        #expect(try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/healthz").status == 200)
        await relay.kill()
    }

    @Test("The backup function: named by UTC time, the newest 3 kept, other files left alone, while the relay answers")
    func backupFunction() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let backups = directory + "/backups"
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
        #expect(FileManager.default.createFile(atPath: backups + "/notes.txt", contents: Data("mine".utf8)))
        try await TestRelay.run(store: "sqlite:" + directory + "/relay.sqlite", flags: ["backup-dir": [backups]]) {
            relay in
            let session = try await relay.createSession()
            let made = try #require(relay.relay.backups)
            let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
            var written: [SQLiteBackups.Made] = []
            for minute in 0..<4 {
                written.append(try await made.make(at: start.addingTimeInterval(Double(minute) * 60)))
            }
            #expect(written.first?.path == backups + "/linkrelay-20260101T000000.000Z.sqlite")
            #expect(written.allSatisfy { $0.bytes > 0 })
            #expect(made.backups() == written.dropFirst().map { ($0.path as NSString).lastPathComponent })
            #expect(FileManager.default.fileExists(atPath: backups + "/notes.txt"))
            #expect(try await relay.session(session.sessionId).state == "waiting")

            let copy = try await SQLiteSessionStore.open(
                path: try #require(written.last?.path), logger: quietLogger(), checkpointInterval: nil)
            let kept = (try? await copy.session(id: session.sessionId))?.id
            try await copy.close()
            #expect(kept == session.sessionId)
        }
    }

    @Test("A backup holds no Pre-Fill individual, not a byte of one, while the live session keeps its own")
    func backupWithoutIndividuals() async throws {
        try await RetentionTests.with("sqlite") { harness in
            let sqlite = try #require(harness.store as? SQLiteSessionStore)
            let sessions = [try await RetentionTests.challenged(harness), try await RetentionTests.challenged(harness)]
            let directory = try StoreFiles.directory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let made = try await SQLiteBackups(directory: directory, store: sqlite).make()

            let bytes = try Data(contentsOf: URL(fileURLWithPath: made.path))
            for value in [RetentionTests.ssn, "Birchwood"] + RetentionTests.identity {
                #expect(bytes.range(of: Data(value.utf8)) == nil, "\(value) in the backup")
            }
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: directory) == [
                    (made.path as NSString).lastPathComponent
                ])
            for session in sessions {
                #expect(
                    try await sqlite.session(id: session.id)?.prefill?.individual?.ssn == RetentionTests.ssn,
                    "live: kept")
            }
            // Restored, the sessions are there, their individuals erased as the retention erases them.
            let copy = try await SQLiteSessionStore.open(
                path: made.path, logger: quietLogger(), checkpointInterval: nil)
            var restored: [Session?] = []
            for session in sessions { restored.append(try? await copy.session(id: session.id)) }
            let due = try? await copy.sessionsWithIndividual(keptUntil: .distantFuture, limit: 10)
            try await copy.close()
            for (session, copied) in zip(sessions, restored) {
                #expect(copied?.state == session.state)
                #expect(copied?.prefill?.next == session.prefill?.next)
                #expect(copied?.prefill?.individual == nil)
                #expect(copied?.prefill?.individualKeptUntil == nil)
                #expect(copied?.prefill?.individualErasedAt != nil)
            }
            #expect(due == [], "nothing left for the retention to erase")
        }
    }

    @Test("--backup-dir is refused at start unless the store is SQLite and the directory writable")
    func settings() throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        func refusal(_ flags: [String: [String]]) -> String? {
            do {
                _ = try RelayConfiguration.resolve(flags: flags, environment: [:])
                return nil
            } catch {
                return error.description
            }
        }
        let sqlite = "sqlite:" + directory + "/relay.sqlite"
        #expect(
            refusal(["store": ["memory"], "backup-dir": [directory]])?.hasPrefix("--backup-dir: only with") == true)
        #expect(refusal(["store": [sqlite], "backup-dir": [directory + "/none"]])?.contains("not a directory") == true)
        #expect(refusal(["store": [sqlite], "backup-dir": [file]])?.contains("not a directory") == true)
        #expect(refusal(["store": [sqlite], "backup-dir": [directory + "/"]]) == nil)
        let fromEnvironment = try RelayConfiguration.resolve(
            flags: ["store": [sqlite]], environment: ["LINKRELAY_BACKUP_DIR": directory])
        #expect(fromEnvironment.backupDirectory == directory)
    }
}
