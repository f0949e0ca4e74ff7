import AsyncHTTPClient
import Dispatch
import Foundation
import LinkRelayCore
import LinkRelaySupport
import Testing

@testable import LinkRelayServer

/// A real `linkrelay` process on SQLite, killed with SIGKILL between create and tap.
@Suite("Persistence", .timeLimit(.minutes(2)))
struct PersistenceTests {
    /// A child process whose standard error is read line by line.
    final class Child: Sendable {
        let process: Process
        let lines: AsyncStream<String>

        /// Runs `linkrelay` (or `executable`) in the package's directory.
        init(_ arguments: [String], environment: [String: String] = [:], executable: URL? = nil) throws {
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("linkrelay")
            process = Process()
            process.executableURL = executable ?? binary
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            process.currentDirectoryURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent()
            let pipe = Pipe()
            process.standardError = pipe
            process.standardOutput = FileHandle.nullDevice
            let (lines, continuation) = AsyncStream<String>.makeStream()
            self.lines = lines
            let buffer = Locked("")
            pipe.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                if data.isEmpty {
                    handle.readabilityHandler = nil
                    continuation.finish()
                    return
                }
                let complete = buffer.withLock { buffer -> [String] in
                    buffer += String(decoding: data, as: UTF8.self)
                    var parts = buffer.components(separatedBy: "\n")
                    buffer = parts.removeLast()
                    return parts
                }
                for line in complete { continuation.yield(line) }
            }
            try process.run()
        }

        /// Waits for a line containing `text`; false if the process ended first.
        func waitFor(_ text: String) async -> Bool { await waitFor(all: [text]) }

        /// Waits for lines containing each of `texts`, in any order; false if the process ended first.
        func waitFor(all texts: [String]) async -> Bool {
            var missing = texts
            for await line in lines {
                missing.removeAll { line.contains($0) }
                if missing.isEmpty { return true }
            }
            return false
        }

        /// Returns once the process has exited (the blocking wait runs on a thread of its own), with
        /// its exit code, or nil when a signal ended it.
        ///
        /// `waitid` with `WNOWAIT` asks the kernel and leaves the child for Foundation to reap.
        /// `Process.waitUntilExit` learns of an exit from a socket the child holds, which a child
        /// started meanwhile by another test can inherit too; the wait then lasts until that one ends
        /// (swift-corelibs-foundation#4795). `Process.terminationStatus` may not know of the exit yet
        /// when `waitid` does (it traps while it thinks the child runs); if Foundation has reaped the
        /// child first, `waitid` finds none, and the status is Foundation's, once it has set it.
        @discardableResult
        func exited() async -> Int32? { await Self.exited(process) }

        /// `exited()` for any child process.
        static func exited(_ process: Process) async -> Int32? {
            let pid = id_t(process.processIdentifier)
            let seen = try? await onOwnThread { () -> siginfo_t? in
                var info = siginfo_t()
                while waitid(P_PID, pid, &info, WEXITED | WNOWAIT) == -1 {
                    if errno != EINTR { return nil }
                }
                return info
            }
            if let info = seen ?? nil {
                return info.si_code == CLD_EXITED ? info._sifields._sigchld.si_status : nil
            }
            while process.isRunning { await Task.yield() }
            return process.terminationReason == .exit ? process.terminationStatus : nil
        }

        func kill() async {
            Foundation.kill(process.processIdentifier, SIGKILL)
            await exited()
        }

        /// Sends SIGTERM and lets the process end on its own (cleanup in a `defer`, which cannot wait).
        func stop() {
            process.terminate()
        }
    }

    /// Starts a child on a free port, trying other ports when another test took the first one meanwhile.
    static func start(
        ready: String..., environment: [String: String] = [:], _ arguments: (Int) -> [String]
    ) async throws -> (Child, Int) {
        for _ in 0..<5 {
            let port = try freePort()
            let child = try Child(arguments(port), environment: environment)
            if await child.waitFor(all: ready) { return (child, port) }
            child.stop()
            await child.exited()
        }
        throw StartFailure()
    }

    struct StartFailure: Error {}

    static func freePort() throws -> Int {
        try RelayConfiguration.resolve(flags: ["port": ["0"]], environment: [:]).port
    }

    @Test("kill -9 between create and tap loses nothing; after restart the tap verifies and the channel replays from 1")
    func killBetweenCreateAndTap() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "linkrelay-" + Secrets.token(length: 8))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Prove (the simulator) runs apart, as in production, so it outlives the relay.
        let (sandbox, sandboxPort) = try await Self.start(ready: "listening") { ["sandbox", "--port", String($0)] }
        defer { sandbox.stop() }

        let credentials = ["PROVE_CLIENT_ID": "sandbox-client", "PROVE_CLIENT_SECRET": "sandbox-secret"]
        func relayArguments(_ port: Int) -> [String] {
            [
                "serve", "--drain-delay", "0", "--port", String(port), "--store",
                "sqlite:" + directory.appendingPathComponent("relay.sqlite").path,
                "--api-key", TestRelay.apiKey, "--prove", "http://127.0.0.1:\(sandboxPort)/sandbox/prove",
            ]
        }
        let (first, relayPort) = try await Self.start(ready: "LinkRelay listening", environment: credentials) {
            relayArguments($0)
        }
        let base = "http://127.0.0.1:\(relayPort)"
        func get(_ url: String) async throws -> HTTPAnswer { try await TestRelay.fetch(.GET, url) }

        let response = try await TestRelay.fetch(
            .POST, base + "/v1/sessions",
            headers: [
                ("Authorization", "Bearer \(TestRelay.apiKey)"), ("Content-Type", "application/json"),
                // This relay is killed next: keep no pooled connection to it.
                ("Connection", "close"),
            ],
            body: #"{"phoneNumber":"2001004014"}"#)
        #expect(response.status == 201)
        let created = try response.json(Created.self)
        await first.kill()

        let second = try Child(relayArguments(relayPort), environment: credentials)
        defer { second.stop() }
        #expect(await second.waitFor("LinkRelay listening"))
        // The phone taps the link Prove sent before the crash.
        struct Outbox: Decodable {
            struct Message: Decodable { var link: String }
            var messages: [Message]
        }
        let outbox = try JSONDecoder().decode(
            Outbox.self,
            from: Data(try await get("http://127.0.0.1:\(sandboxPort)/sandbox/outbox?phoneNumber=2001004014").body.utf8)
        )
        let link = try #require(outbox.messages.last?.link)
        let landing = try #require(try await get(link).header("Location"))
        #expect(landing.hasPrefix(created.finalTargetUrl))
        #expect(try await get(landing).status == 200)

        var events: [WireEvent] = []
        var cursor = 0
        for _ in 0..<10 where events.last.map({ $0.type != "result" }) ?? true {
            let answer = try JSONDecoder().decode(
                PollAnswer.self,
                from: Data(
                    try await get(created.channel.poll + "?after=\(cursor)&timeout=10&token=\(created.channel.token)")
                        .body.utf8))
            events += answer.events
            cursor = answer.after
        }
        #expect(events.map(\.seq) == [1, 2, 3])
        #expect(events.map(\.type) == ["waiting", "tapped", "result"])
        #expect(events.last?.outcome == "verified")
    }
}
