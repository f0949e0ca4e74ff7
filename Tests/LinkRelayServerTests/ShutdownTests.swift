import AsyncHTTPClient
import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import ServiceLifecycle
import Testing

@testable import LinkRelayServer

/// Graceful shutdown: readiness fails first, every channel gets its documented ending, and after a
/// restart every client picks up where it left off.
@Suite("Shutdown", .timeLimit(.minutes(2)))
struct ShutdownTests {
    /// Runs a Drain service alone, as the relay's service group would.
    private func withDrain(
        timeout: Duration = .seconds(30), clock: any RelayClock = EventLoopClock(), delay: TimeInterval = 0,
        _ body: (ChannelHub, Draining, ServiceGroup) async throws -> Void
    ) async throws {
        let hub = ChannelHub()
        let draining = Draining()
        let logger = Logger(label: "test.drain")
        let drain = Drain(
            hub: hub, draining: draining, clock: clock, delay: delay, sandbox: nil, timeout: timeout, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [drain], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await body(hub, draining, group)
            try await tasks.waitForAll()
        }
    }

    @Test("The drain turns readiness off, tells every channel, then waits for them to go")
    func drainOrder() async throws {
        try await withDrain { hub, draining, group in
            let (openSignals, openContinuation) = AsyncStream<ChannelSignal>.makeStream()
            let open = hub.listen(sessionID: "ses_a", wakeAt: nil) { openContinuation.yield($0) }
            #expect(!draining.isDraining)
            await group.triggerGracefulShutdown()
            var signals = openSignals.makeAsyncIterator()
            guard case .shutdown = await signals.next() else {
                Issue.record("the open channel was not told to end")
                return
            }
            #expect(draining.isDraining, "/readyz says 503 before any channel is told")
            // A channel opened during the drain is told at once.
            let (lateStream, lateContinuation) = AsyncStream<ChannelSignal>.makeStream()
            let late = hub.listen(sessionID: "ses_b", wakeAt: nil) { lateContinuation.yield($0) }
            var lateSignals = lateStream.makeAsyncIterator()
            guard case .shutdown = await lateSignals.next() else {
                Issue.record("a channel opened during the drain was not told to end")
                return
            }
            #expect(hub.listenerCount == 2, "the drain waits while channels are open")
            open.finish()
            late.finish()
        }
    }

    @Test("For the drain delay, readiness is off and channels are left alone, so balancers move first")
    func drainDelay() async throws {
        let clock = ManualClock()
        try await withDrain(clock: clock, delay: 5) { hub, draining, group in
            let told = Locked(false)
            let (signals, continuation) = AsyncStream<ChannelSignal>.makeStream()
            let open = hub.listen(sessionID: "ses_d", wakeAt: nil) { signal in
                told.withLock { $0 = true }
                continuation.yield(signal)
            }
            await group.triggerGracefulShutdown()
            await clock.waitForSleepers(1)
            #expect(draining.isDraining, "/readyz answers 503 during the delay")
            #expect(!told.value, "no channel is told to go before the delay ends")
            clock.advance(by: 5)
            var iterator = signals.makeAsyncIterator()
            guard case .shutdown = await iterator.next() else {
                Issue.record("the channel was not told")
                return
            }
            open.finish()
        }
    }

    @Test("The drain is bounded: a channel that never goes does not hold the shutdown")
    func drainTimeout() async throws {
        try await withDrain(timeout: .milliseconds(50)) { hub, _, group in
            let stuck = hub.listen(sessionID: "ses_c", wakeAt: nil) { _ in }
            await group.triggerGracefulShutdown()
            _ = stuck
        }
    }

    @Test("SIGTERM with a drain delay: the relay keeps answering, /readyz 503, on new and kept-alive connections")
    func drainDelayKeepsAnswering() async throws {
        let (relay, port) = try await PersistenceTests.start(ready: "LinkRelay listening") {
            ["serve", "--drain-delay", "60", "--port", String($0), "--store", "memory", "--api-key", TestRelay.apiKey]
        }
        let kept = try RawConnection(port: port)
        kept.send("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try await kept.read(until: "ready\n")?.hasPrefix("HTTP/1.1 200") == true)
        relay.stop()
        #expect(await relay.waitFor("/readyz answers 503"))
        let fresh = try await TestRelay.fetch(
            .GET, "http://127.0.0.1:\(port)/readyz", headers: [("Connection", "close")])
        #expect(fresh.status == 503, "a new connection is still accepted, and told")
        kept.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try await kept.read(until: "ok\n")?.hasPrefix("HTTP/1.1 200") == true, "a kept-alive one is not cut")
        await relay.kill()
    }

    /// Reads an SSE response with a plain socket until the server ends the chunked body.
    private func rawEvents(port: Int, _ url: String) async throws -> String {
        let components = try #require(URLComponents(string: url))
        let target = components.percentEncodedPath + "?" + (components.percentEncodedQuery ?? "")
        let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
        let bytes = try await rawExchangeBytes(port: port, Array(request.utf8)) { received in
            String(decoding: received, as: UTF8.self).hasSuffix("\r\n0\r\n\r\n")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func openChannels(_ base: String) async throws -> Double {
        // A connection of its own each time: a pooled one may belong to the relay that was stopped.
        let metrics = try await TestRelay.fetch(.GET, base + "/metrics", headers: [("Connection", "close")]).body
        return metrics.split(separator: "\n").filter { $0.hasPrefix("linkrelay_open_channels{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    @Test("SIGTERM: WebSocket 1012, SSE a retry hint, the held poll answers; after restart each resumes in order")
    func sigtermAndRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "linkrelay-" + Secrets.token(length: 8))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (sandbox, sandboxPort) = try await PersistenceTests.start(ready: "listening") {
            ["sandbox", "--port", String($0)]
        }
        defer { sandbox.stop() }
        let credentials = ["PROVE_CLIENT_ID": "sandbox-client", "PROVE_CLIENT_SECRET": "sandbox-secret"]
        func relayArguments(_ port: Int) -> [String] {
            [
                "serve", "--drain-delay", "0", "--port", String(port), "--store",
                "sqlite:" + directory.appendingPathComponent("relay.sqlite").path, "--api-key", TestRelay.apiKey,
                "--prove", "http://127.0.0.1:\(sandboxPort)/sandbox/prove", "--drain-timeout", "5",
            ]
        }
        let (first, port) = try await PersistenceTests.start(ready: "LinkRelay listening", environment: credentials) {
            relayArguments($0)
        }
        // A test that throws before its SIGTERM below leaves no relay running.
        defer { if first.process.isRunning { first.stop() } }
        let base = "http://127.0.0.1:\(port)"
        let created = try await TestRelay.fetch(
            .POST, base + "/v1/sessions",
            headers: [
                ("Authorization", "Bearer \(TestRelay.apiKey)"), ("Content-Type", "application/json"),
                ("Connection", "close"),
            ],
            body: #"{"phoneNumber":"2001004014"}"#
        ).json(Created.self)
        let token = "token=\(created.channel.token)"

        async let webSocket = RawWebSocket.open(created.channel.websocket + "?" + token)
        async let serverSentEvents = rawEvents(port: port, created.channel.events + "?" + token)
        async let poll = TestRelay.fetch(
            .GET, created.channel.poll + "?after=1&timeout=50&" + token, headers: [("Connection", "close")])
        var attempts = 0
        while try await openChannels(base) < 3 {
            attempts += 1
            try #require(attempts < 2000, "the three channels did not open")
            await Task.yield()
        }

        first.process.terminate()  // SIGTERM
        let socket: RawWebSocket
        do { socket = try await webSocket } catch {
            Issue.record("ws: \(error)")
            throw error
        }
        #expect(socket.events.map(\.seq) == [1])
        #expect(socket.closeCode == 1012)
        let stream = try await serverSentEvents
        #expect(stream.contains("id: 1\nevent: waiting\n"))
        let hint = stream.components(separatedBy: "retry: ").last.flatMap { Int($0.prefix { $0.isNumber }) }
        #expect(stream.components(separatedBy: "retry: ").count == 3, "the opening hint and the shutdown hint")
        #expect(hint.map { (1000...5000).contains($0) } == true)
        let held: HTTPAnswer
        do { held = try await poll } catch {
            Issue.record("poll: \(error)")
            throw error
        }
        #expect(held.status == 200)
        let answer = try held.json(PollAnswer.self)
        #expect(answer.events.isEmpty && answer.after == 1 && !answer.done)
        #expect(await first.exited() == 0, "a clean exit")

        let second = try PersistenceTests.Child(relayArguments(port), environment: credentials)
        defer { second.stop() }
        #expect(await second.waitFor("LinkRelay listening"))
        // Each client reconnects with its cursor before the tap, then gets the rest.
        let resumedSocket = ChannelClient.webSocket(created.channel.websocket + "?after=1&" + token, origin: base)
        let resumedStream = ChannelClient.serverSentEvents(
            TestRelay.client, url: created.channel.events + "?" + token, headers: [("Last-Event-ID", "1")])
        while try await openChannels(base) < 2 {
            attempts += 1
            try #require(attempts < 4000, "the channels did not reopen")
            await Task.yield()
        }
        struct Outbox: Decodable {
            struct Message: Decodable { var link: String }
            var messages: [Message]
        }
        let outbox = try await TestRelay.fetch(
            .GET, "http://127.0.0.1:\(sandboxPort)/sandbox/outbox?phoneNumber=2001004014"
        ).json(Outbox.self)
        let link = try #require(outbox.messages.last?.link)
        let landing = try #require(try await TestRelay.fetch(.GET, link).header("Location"))
        #expect(try await TestRelay.fetch(.GET, landing).status == 200)

        var socketEvents: [WireEvent] = []
        for try await event in resumedSocket { socketEvents.append(event) }
        #expect(socketEvents.map(\.seq) == [2, 3])
        var streamIDs: [String?] = []
        for try await message in resumedStream { streamIDs.append(message.id) }
        #expect(streamIDs == ["2", "3"])
        let polled = try await TestRelay.fetch(.GET, created.channel.poll + "?after=1&" + token).json(PollAnswer.self)
        #expect(polled.events.map(\.type) == ["tapped", "result"])
        #expect(polled.done)
    }
}
