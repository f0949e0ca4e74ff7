import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// A desktop's WebSocket is held to the relay's caps: every bad frame kind gets its own close code.
@Suite("WebSocket frame rules", .timeLimit(.minutes(1)))
struct WebSocketFrameTests {
    static let text: UInt8 = 0x1
    static let continuation: UInt8 = 0x0
    static let ping: UInt8 = 0x9

    static let cases: [(String, [UInt8], Int)] = [
        ("a frame over 4 KiB", RawWebSocket.clientFrame(opcode: text, Array(repeating: 0x61, count: 5000)), 1009),
        (
            "a message over 4 KiB in fragments",
            RawWebSocket.clientFrame(opcode: text, Array(repeating: 0x61, count: 3000), fin: false)
                + RawWebSocket.clientFrame(opcode: continuation, Array(repeating: 0x61, count: 3000)),
            1009
        ),
        ("an unmasked frame", RawWebSocket.clientFrame(opcode: text, Array("hello".utf8), masked: false), 1002),
        ("a text frame that is not UTF-8", RawWebSocket.clientFrame(opcode: text, [0x68, 0xC3, 0x28]), 1007),
        ("a ping over 125 bytes", RawWebSocket.clientFrame(opcode: ping, Array(repeating: 0x61, count: 126)), 1002),
        ("a fragmented ping", RawWebSocket.clientFrame(opcode: ping, [0x61], fin: false), 1002),
        ("a frame with RSV1 and no extension", rsv1(RawWebSocket.clientFrame(opcode: text, Array("hi".utf8))), 1002),
        ("a close with a 1-byte payload", RawWebSocket.clientFrame(opcode: close, [0x03]), 1002),
        ("a close with code 1005", RawWebSocket.clientFrame(opcode: close, [0x03, 0xED]), 1002),
        ("a close with code 1006", RawWebSocket.clientFrame(opcode: close, [0x03, 0xEE]), 1002),
        ("a close with code 999", RawWebSocket.clientFrame(opcode: close, [0x03, 0xE7]), 1002),
        ("a close with code 1015", RawWebSocket.clientFrame(opcode: close, [0x03, 0xF7]), 1002),
        ("a close with code 2999", RawWebSocket.clientFrame(opcode: close, [0x0B, 0xB7]), 1002),
        ("a close with code 5000", RawWebSocket.clientFrame(opcode: close, [0x13, 0x88]), 1002),
        ("a close whose reason is not UTF-8", RawWebSocket.clientFrame(opcode: close, [0x03, 0xE8, 0xC3, 0x28]), 1007),
    ]

    static let close: UInt8 = 0x8

    /// `frame` with its first reserved bit set.
    static func rsv1(_ frame: [UInt8]) -> [UInt8] { [frame[0] | 0x40] + frame.dropFirst() }

    @Test("Bad frames close the WebSocket with their code", arguments: cases)
    func badFrame(_ name: String, _ frames: [UInt8], _ code: Int) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let socket = try await RawWebSocket.open(
                created.channel.websocket + "?token=\(created.channel.token)", frames: frames)
            #expect(socket.upgraded)
            #expect(socket.closeCode == code, "\(name)")
            // The session is untouched: still waiting, and a new channel works.
            #expect(try await relay.session(created.sessionId).state == "waiting")
            // Counted as a security event (the count may land just after the close frame left).
            var counted = false
            for _ in 0..<200 where !counted {
                counted = try await relay.request(.GET, "/metrics").body.contains(
                    "linkrelay_security_events_total{event=\"websocket_protocol_error\"} 1")
            }
            #expect(counted, "\(name)")
        }
    }

    @Test("A well-formed message from the desktop is read and ignored")
    func goodMessage() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            // An ended session: the channel replays its events and closes with 1000, unless the
            // message broke a rule first.
            #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
            let socket = try await RawWebSocket.open(
                created.channel.websocket + "?token=\(created.channel.token)",
                frames: RawWebSocket.clientFrame(opcode: Self.text, Array("{\"hello\":1}".utf8)))
            #expect(socket.events.map(\.type) == ["waiting", "cancelled"])
            #expect(socket.closeCode == 1000)
        }
    }

    @Test("A desktop that leaves a ping unanswered until the next one is closed with 1001")
    func unansweredPing() async throws {
        let clock = ManualClock()
        try await TestRelay.run(socket: true, clock: clock) { relay in
            let created = try await relay.createSession()
            let (arrivals, arrived) = AsyncStream<UInt8>.makeStream()
            async let socket = RawWebSocket.open(
                created.channel.websocket + "?token=\(created.channel.token)", onFrame: { arrived.yield($0) })
            var opcodes = arrivals.makeAsyncIterator()
            #expect(await opcodes.next() == Self.text, "the waiting event: the channel is listening")
            // The expiry sweeper and the channel heartbeat wait on the clock; 20 s is the ping interval.
            await clock.waitForSleepers(2)
            clock.advance(by: 20)
            #expect(await opcodes.next() == Self.ping, "a ping, which this client never answers")
            await clock.waitForSleepers(2)
            clock.advance(by: 20)
            let closed = try await socket
            #expect(closed.closeCode == 1001)
            #expect(closed.opcodes == [Self.text, Self.ping, 0x8])
            #expect(try await relay.session(created.sessionId).state == "waiting", "the session goes on")
        }
    }

    @Test("Channels that open together get their first ping or keep-alive at different times, within the interval")
    func firstWakesSpread() {
        let now = Date()
        let offsets = (0..<200).map { _ in ChannelServices.firstWake(after: 20, from: now).timeIntervalSince(now) }
        #expect(offsets.allSatisfy { $0 >= 10 && $0 <= 20 })
        #expect(offsets.min()! < 12 && offsets.max()! > 18, "spread over the second half of the interval")
    }

    @Test(
        "The desktop's close is answered with its code when a peer may send it, and 1000 when it gave none",
        arguments: [([0x03, 0xE9], 1001), ([0x0B, 0xB8], 3000), ([0x11, 0x94, 0x62, 0x79, 0x65], 4500), ([], 1000)]
            as [([UInt8], Int)])
    func clientClose(_ payload: [UInt8], _ code: Int) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let socket = try await RawWebSocket.open(
                created.channel.websocket + "?token=\(created.channel.token)",
                frames: RawWebSocket.clientFrame(opcode: Self.close, payload))
            #expect(socket.upgraded)
            #expect(socket.closeCode == code)
            #expect(try await relay.session(created.sessionId).state == "waiting")
        }
    }

    @Test("permessage-deflate is never negotiated (compression can leak secrets)")
    func noCompression() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let socket = try await RawWebSocket.open(
                created.channel.websocket + "?token=\(created.channel.token)",
                headers: "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
                frames: RawWebSocket.clientFrame(opcode: 0x8, [0x03, 0xE8]))
            #expect(socket.upgraded)
            #expect(!socket.head.lowercased().contains("sec-websocket-extensions"))
        }
    }
}
