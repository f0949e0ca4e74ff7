import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import Testing

@testable import LinkRelayServer

/// The built `linkrelay` run to its end, its output read.
enum CLI {
    struct Run {
        var status: Int32?
        var standardOutput: String
        var standardError: String
    }

    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("linkrelay")
    }

    /// Runs `linkrelay` with `arguments` until it exits. Its output is read on threads of its own with
    /// blocking reads (no dispatch source outlives the run). `stopWhen`: a child that writes a line
    /// holding this to standard error is sent SIGTERM (a relay that should have refused to start).
    static func run(_ arguments: [String], stopWhen: String? = nil) async throws -> Run {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        // Read while it runs: a child that fills a pipe waits for it to be read.
        async let out = onOwnThread { output.fileHandleForReading.readDataToEndOfFile() }
        async let err = onOwnThread {
            var read = Data()
            while true {
                let chunk = error.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                read.append(chunk)
                if let stopWhen, String(decoding: read, as: UTF8.self).contains(stopWhen) { kill(pid, SIGTERM) }
            }
            return read
        }
        let status = await PersistenceTests.Child.exited(process)
        return Run(
            status: status, standardOutput: String(decoding: try await out, as: UTF8.self),
            standardError: String(decoding: try await err, as: UTF8.self))
    }
}

/// `linkrelay store check` and `store backup` on files no relay holds, and their refusal of a file a
/// running relay holds.
@Suite("linkrelay store check and backup", .timeLimit(.minutes(2)))
struct StoreCommandTests {
    @Test("check: exit 0 and ok for a good file; 1 with SQLite's problems for a damaged one, an empty one, a text file")
    func check() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let good = directory + "/good.sqlite"
        try await StoreFiles.makeDatabase(at: good)
        let ok = try await CLI.run(["store", "check", "--store", "sqlite:" + good])
        #expect(ok.status == 0, "\(ok.standardError)")
        #expect(ok.standardOutput == "ok\n")

        let damaged = directory + "/damaged.sqlite"
        try FileManager.default.copyItem(atPath: good, toPath: damaged)
        try await StoreFiles.damage("sessions", in: damaged)
        let before = StoreFiles.bytes(damaged)
        let bad = try await CLI.run(["store", "check", "--store", "sqlite:" + damaged])
        #expect(bad.status == 1)
        #expect(!bad.standardOutput.isEmpty && bad.standardOutput != "ok\n", "SQLite's problems are printed")
        #expect(bad.standardError.contains(damaged))
        #expect(StoreFiles.bytes(damaged) == before, "a check changes nothing")

        let empty = directory + "/empty.sqlite"
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let emptyRun = try await CLI.run(["store", "check", "--store", "sqlite:" + empty])
        #expect(emptyRun.status == 1)
        #expect(emptyRun.standardOutput.contains("empty"))
        #expect(StoreFiles.bytes(empty) == Data(), "not made into a database")

        let missing = try await CLI.run(["store", "check", "--store", "sqlite:" + directory + "/none.sqlite"])
        #expect(missing.status == 2)
        #expect(!FileManager.default.fileExists(atPath: directory + "/none.sqlite"), "no file made")
    }

    @Test("backup: a new file, mode 0600, that check passes and that holds the sessions; never over an existing file")
    func backup() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        let ids = try await StoreFiles.makeDatabase(at: path)
        let out = directory + "/copy.sqlite"
        let run = try await CLI.run(["store", "backup", "--store", "sqlite:" + path, out])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput.hasPrefix("backup written: \(out)"))
        #expect(try StoreFiles.mode(out) == 0o600)
        #expect(try await CLI.run(["store", "check", "--store", "sqlite:" + out]).status == 0)

        let copy = try await SQLiteSessionStore.open(path: out, logger: quietLogger(), checkpointInterval: nil)
        var found: [String?] = []
        for id in ids { found.append((try? await copy.session(id: id))?.id) }
        try await copy.close()
        #expect(found == ids.map(Optional.some))

        let again = try await CLI.run(["store", "backup", "--store", "sqlite:" + path, out])
        #expect(again.status == 2)
        #expect(again.standardError.contains("already exists"))

        // A damaged file's copy would be damaged too: refused, and nothing left behind.
        try await StoreFiles.damage("sessions", in: path)
        let refused = try await CLI.run(["store", "backup", "--store", "sqlite:" + path, directory + "/bad.sqlite"])
        #expect(refused.status == 1)
        #expect(!FileManager.default.fileExists(atPath: directory + "/bad.sqlite"))
    }

    @Test("A file a running relay holds is refused, saying so and pointing to SIGUSR1")
    func heldByARelay() async throws {
        let directory = try StoreFiles.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/relay.sqlite"
        let (relay, _) = try await PersistenceTests.start(ready: "LinkRelay listening") {
            [
                "serve", "--drain-delay", "0", "--port", String($0), "--store", "sqlite:" + path, "--api-key",
                TestRelay.apiKey,
            ]
        }
        defer { relay.stop() }
        let check = try await CLI.run(["store", "check", "--store", "sqlite:" + path])
        #expect(check.status == 2)
        #expect(check.standardError.contains("another process has this file open"), "\(check.standardError)")
        #expect(check.standardError.contains("SIGUSR1"))
        let out = directory + "/copy.sqlite"
        let backup = try await CLI.run(["store", "backup", "--store", "sqlite:" + path, out])
        #expect(backup.status == 2)
        #expect(backup.standardError.contains("another process has this file open"))
        #expect(!FileManager.default.fileExists(atPath: out))
        await relay.kill()
    }

    @Test("Only the SQLite store is a file to check")
    func otherStores() async throws {
        let run = try await CLI.run(["store", "check", "--store", "memory"])
        #expect(run.status == 2)
        #expect(run.standardError.contains("sqlite:PATH"))
    }
}
