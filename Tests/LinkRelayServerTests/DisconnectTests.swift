import AsyncHTTPClient
import Foundation
import Testing

@testable import LinkRelayServer

/// A desktop that goes away frees its channel at once: the open-channel gauge falls back to 0
/// while the session is still waiting (nothing ended the channel but the client leaving).
@Suite("Disconnects", .timeLimit(.minutes(1)))
struct DisconnectTests {
    /// Reads `linkrelay_open_channels{transport=...}` until it equals `expected` (bounded; each try is a request).
    func waitForOpenChannels(_ relay: TestRelay, _ transport: String, _ expected: Int) async throws -> Bool {
        for _ in 0..<500 {
            let metrics = try await relay.request(.GET, "/metrics").body
            let line = metrics.split(separator: "\n").first {
                $0.hasPrefix("linkrelay_open_channels{transport=\"\(transport)\"}")
            }
            if let line, let value = Double(line.split(separator: " ").last ?? ""), Int(value) == expected {
                return true
            }
            await Task.yield()
        }
        return false
    }

    @Test("Server-Sent Events: the client leaving closes the channel")
    func sseDisconnect() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let stream = ChannelClient.serverSentEvents(
                relay.http, url: created.channel.events + "?token=\(created.channel.token)")
            let (seen, seeing) = AsyncStream<String>.makeStream()
            let reader = Task {
                for try await message in stream { seeing.yield(message.event ?? "") }
            }
            var iterator = seen.makeAsyncIterator()
            #expect(await iterator.next() == "waiting")
            #expect(try await waitForOpenChannels(relay, "sse", 1))
            reader.cancel()
            #expect(try await waitForOpenChannels(relay, "sse", 0))
            #expect(try await relay.session(created.sessionId).state == "waiting")
        }
    }

    @Test("Long-poll: a held poll whose client leaves closes the channel")
    func longPollDisconnect() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let held = Task {
                try await relay.request(
                    .GET, created.channel.poll + "?after=1&timeout=50&token=\(created.channel.token)")
            }
            #expect(try await waitForOpenChannels(relay, "longpoll", 1))
            held.cancel()
            #expect(try await waitForOpenChannels(relay, "longpoll", 0))
            #expect(try await relay.session(created.sessionId).state == "waiting")
        }
    }

    @Test("WebSocket: the client leaving closes the channel")
    func webSocketDisconnect() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let socket = ChannelClient.webSocket(created.channel.websocket + "?token=\(created.channel.token)")
            let (seen, seeing) = AsyncStream<String>.makeStream()
            let reader = Task {
                for try await event in socket { seeing.yield(event.type) }
            }
            var iterator = seen.makeAsyncIterator()
            #expect(await iterator.next() == "waiting")
            #expect(try await waitForOpenChannels(relay, "websocket", 1))
            reader.cancel()
            #expect(try await waitForOpenChannels(relay, "websocket", 0))
            #expect(try await relay.session(created.sessionId).state == "waiting")
        }
    }
}
