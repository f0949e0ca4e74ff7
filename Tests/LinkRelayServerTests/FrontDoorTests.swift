import Foundation
import LinkRelayTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// One connection's front door on NIO's `EmbeddedChannel`: the relay's own pipeline
/// (`FrontDoor.configure`) on an `EmbeddedEventLoop`, whose clock the front door reads, so that a
/// timeout passes with `advanceTime(by:)` in no time.
final class EmbeddedConnection {
    let loop = EmbeddedEventLoop()
    let channel: EmbeddedChannel

    init(_ relay: LinkRelay) throws {
        channel = EmbeddedChannel(loop: loop)
        try FrontDoor.configure(channel, services: relay.frontDoor).wait()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
    }

    /// Sends `text` as one read.
    func send(_ text: String) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    /// What the relay wrote since the last call.
    func received() throws -> String {
        String(decoding: try receivedBytes(), as: UTF8.self)
    }

    func receivedBytes() throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let part = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let buffer) = part { bytes += buffer.readableBytesView }
        }
        return bytes
    }

    var isOpen: Bool { channel.isActive }

    func advance(by amount: TimeAmount) {
        loop.advanceTime(by: amount)
    }
}

/// The front door's bounds and timeouts, without a socket: what is refused from a request's head before
/// its body is read, the head's size, chunked bodies, `Transfer-Encoding` and `Expect` (RFC 9112,
/// RFC 9110 §10.1.1), and the header, body and idle timeouts in test time.
@Suite("Front door")
struct FrontDoorTests {
    static let api = "Authorization: Bearer \(TestRelay.apiKey)\r\n"

    static func relay(_ flags: [String: [String]] = [:], logs: LogCapture? = nil) async throws -> LinkRelay {
        try await TestRelay.unstarted(flags: flags, logs: logs)
    }

    static func securityEvents(_ relay: LinkRelay, _ event: String) async throws -> Double {
        let answer = try #require(await relay.respond(to: RelayRequest(.GET, "/metrics")))
        let sample = "linkrelay_security_events_total{event=\"\(event)\"} "
        return String(buffer: answer.body).split(separator: "\n").first { $0.hasPrefix(sample) }
            .flatMap { Double($0.dropFirst(sample.count)) } ?? 0
    }

    /// The status line of the one answer in `text`, and that it says `Connection: close`.
    static func expectRefused(_ text: String, _ status: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(text.hasPrefix("HTTP/1.1 \(status)"), "\(text.prefix(300))", sourceLocation: sourceLocation)
        #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer", sourceLocation: sourceLocation)
        #expect(text.contains("Connection: close"), sourceLocation: sourceLocation)
    }

    // MARK: - timeouts (moved from HostilePeerTests, where they waited real seconds)

    @Test("A head that never completes is closed after the header timeout, and counted")
    func slowHead() async throws {
        let logs = LogCapture()
        let relay = try await Self.relay(["header-timeout": ["1"]], logs: logs)
        let connection = try EmbeddedConnection(relay)
        try connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n")
        connection.advance(by: .milliseconds(999))
        #expect(connection.isOpen)
        connection.advance(by: .milliseconds(1))
        #expect(!connection.isOpen)
        #expect(try connection.received() == "", "closed without an answer")
        #expect(try await Self.securityEvents(relay, "header_timeout") == 1)
        #expect(logs.all.contains { $0.contains("header_timeout") && $0.hasPrefix("notice") })
    }

    @Test("A body that stops arriving is closed after the body timeout, on every route that reads one")
    func stalledBody() async throws {
        let relay = try await Self.relay(["body-timeout": ["1"]])
        // The API, the sandbox, and a channel's finish hook.
        for path in ["/v1/sessions", "/sandbox/prove/token", "/v1/sessions/s-1/finish"] {
            let connection = try EmbeddedConnection(relay)
            try connection.send(
                "POST \(path) HTTP/1.1\r\nHost: x\r\n\(Self.api)Content-Type: application/json\r\n"
                    + "Content-Length: 100\r\n\r\n{\"pho")
            connection.advance(by: .milliseconds(500))
            try connection.send("ne")
            connection.advance(by: .milliseconds(999))
            #expect(connection.isOpen, "\(path): each read gives the body another timeout")
            connection.advance(by: .milliseconds(1))
            #expect(!connection.isOpen)
            #expect(try connection.received() == "", "\(path): closed without an answer")
        }
        #expect(try await Self.securityEvents(relay, "body_timeout") == 3)
    }

    @Test("A new connection that sends nothing, and a kept-alive one between requests, close quietly")
    func idle() async throws {
        let relay = try await Self.relay(["header-timeout": ["3"]])
        let silent = try EmbeddedConnection(relay)
        silent.advance(by: .seconds(3))
        #expect(!silent.isOpen)
        let kept = try EmbeddedConnection(relay)
        try kept.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try kept.received().hasPrefix("HTTP/1.1 200"))
        kept.advance(by: .seconds(74))
        #expect(kept.isOpen, "kept alive for 75 s")
        kept.advance(by: .seconds(1))
        #expect(!kept.isOpen)
        #expect(try await Self.securityEvents(relay, "header_timeout") == 0)
    }

    // MARK: - the head

    @Test(
        "A head past 32 KiB, in many lines or in one, or more than 100 header lines is answered 431 and closed",
        arguments: [
            // 33 lines of 1 KiB: within each line's limit, past the head's.
            (0..<33).map { "X-Pad-\($0): " + String(repeating: "a", count: 1000) + "\r\n" }.joined(),
            "Cookie: " + String(repeating: "c", count: 33 * 1024) + "\r\n",
            (0..<101).map { "X\($0): y\r\n" }.joined(),
            // Whitespace that NIO's decoder neither counts nor drops: the head's bytes on the wire count.
            "A:" + String(repeating: " ", count: 33 * 1024),
        ])
    func headTooLarge(_ lines: String) async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines)
        Self.expectRefused(try connection.received(), "431")
        #expect(!connection.isOpen)
    }

    @Test("A head just under 32 KiB, sent a few bytes at a time, is served")
    func headAtLimit() async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        let head =
            "GET /healthz HTTP/1.1\r\nHost: x\r\n"
            + (0..<31).map { "X-Pad-\($0): " + String(repeating: "a", count: 1000) + "\r\n" }.joined() + "\r\n"
        #expect(head.utf8.count < 32 * 1024)
        var rest = Substring(head)
        while !rest.isEmpty {
            try connection.send(String(rest.prefix(700)))
            rest = rest.dropFirst(700)
        }
        #expect(try connection.received().hasPrefix("HTTP/1.1 200"))
        #expect(connection.isOpen)
    }

    /// Runs the relay's request decoder on each read, as `ByteToMessageHandler` does, and keeps what it
    /// leaves behind.
    final class DecoderProbe: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var decoder = RequestDecoder(limits: FrontDoor.headLimits)
        var left: ByteBuffer?

        func handlerAdded(context: ChannelHandlerContext) { decoder.decoderAdded(context: context) }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            _ = try? decoder.decode(context: context, buffer: &buffer)
            left = buffer
        }
    }

    @Test("A head that has not ended keeps its unfinished line, not the read it came in")
    func waitingHeadKeepsItsBytes() throws {
        let probe = DecoderProbe()
        let channel = EmbeddedChannel(handler: probe)
        var read = ByteBuffer()
        read.reserveCapacity(4096)
        read.writeString("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Unfinished: abc")
        try channel.writeInbound(read)
        let left = try #require(probe.left)
        #expect(String(buffer: left).hasSuffix("abc"))
        #expect(left.capacity < 64, "\(left.capacity) bytes kept for \(left.readableBytes)")
    }

    // MARK: - bodies, before they are read

    @Test(
        "A declared body past the route's maximum, or any body on a route that takes none, is 413 before it is read",
        arguments: [
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n\(api)Content-Type: application/json\r\nContent-Length: 4097\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3300000000\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST /v1/sessions/s-1/cancel HTTP/1.1\r\nHost: x\r\n\(api)Content-Length: 1\r\n\r\n",
        ])
    func declaredTooLarge(_ head: String) async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send(head)
        let answer = try connection.received()
        Self.expectRefused(answer, "413")
        #expect(answer.contains("application/problem+json"))
        #expect(!connection.isOpen)
    }

    @Test("A HEAD refused from its head gets the head of the refusal, without its body")
    func headRefused() async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send("HEAD /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        let answer = try connection.received()
        Self.expectRefused(answer, "413")
        #expect(answer.hasSuffix("\r\n\r\n") && !answer.contains("Content Too Large"), "\(answer)")
    }

    @Test("A chunked body is cut at the route's maximum: 413, and the rest is not read")
    func chunkedTooLarge() async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send(
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n\(Self.api)Content-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n")
        for _ in 0..<4 { try connection.send("400\r\n" + String(repeating: " ", count: 1024) + "\r\n") }
        #expect(try connection.received() == "", "4,096 bytes are within the limit")
        try connection.send("1\r\n \r\n")
        Self.expectRefused(try connection.received(), "413")
        #expect(!connection.isOpen)
    }

    @Test(
        "Chunk framing past a body's need (long extensions, 1-byte chunks) is refused",
        arguments: [
            "1;" + String(repeating: "e", count: 40 * 1024),
            String(repeating: "1\r\n \r\n", count: 1000),
        ])
    func chunkFraming(_ chunks: String) async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send(
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n\(Self.api)Content-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n")
        try connection.send(chunks)
        Self.expectRefused(try connection.received(), "400")
        #expect(!connection.isOpen)
    }

    // MARK: - Transfer-Encoding (RFC 9112 §6.1)

    @Test(
        "HTTP/1.0 with Transfer-Encoding is 400, a coding the relay does not decode 501, both closed",
        arguments: [
            ("GET /healthz HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400"),
            ("POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "501"),
            (
                "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
                "501"
            ),
            ("POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "400"),
        ])
    func transferEncoding(_ request: String, _ status: String) async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send(request + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        Self.expectRefused(try connection.received(), status)
        #expect(!connection.isOpen)
    }

    // MARK: - Expect: 100-continue

    @Test("Expect: 100-continue gets 100 when the body fits, and the request goes on")
    func expectContinue() async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send(
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n\(Self.api)Content-Type: application/json\r\n"
                + "Content-Length: 20\r\nExpect: 100-continue\r\n\r\n")
        #expect(try connection.received() == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(connection.isOpen)
    }

    @Test("Expect: 100-continue with a body past the limit gets 413 and no 100; another expectation 417")
    func expectRefused() async throws {
        let relay = try await Self.relay()
        for (expect, length, status) in [("100-continue", 5000, "413"), ("something-else", 20, "417")] {
            let connection = try EmbeddedConnection(relay)
            try connection.send(
                "POST /v1/sessions HTTP/1.1\r\nHost: x\r\n\(Self.api)Content-Type: application/json\r\n"
                    + "Content-Length: \(length)\r\nExpect: \(expect)\r\n\r\n")
            let answer = try connection.received()
            Self.expectRefused(answer, status)
            #expect(!answer.contains("100 Continue"))
            #expect(!connection.isOpen)
        }
    }

    @Test("An HTTP/1.0 request's expectation is ignored (RFC 9110 §10.1.1)")
    func expectIgnoredOnHTTP10() async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send(
            "POST /v1/sessions HTTP/1.0\r\n\(Self.api)Content-Type: application/json\r\nContent-Length: 20\r\n"
                + "Expect: 100-continue\r\n\r\n")
        #expect(try connection.received() == "")
        #expect(connection.isOpen)
    }

    @Test("A request to no route with a body is answered 404 at once, without reading the body")
    func unmatchedWithBody() async throws {
        let connection = try EmbeddedConnection(try await Self.relay())
        try connection.send("POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        Self.expectRefused(try connection.received(), "404")
        #expect(!connection.isOpen)
    }
}

/// The desktop's channels on an `EmbeddedChannel`: the front door admits them, `HTTPChannel` answers a
/// long-poll and streams SSE, and the WebSocket handler takes over the connection, each without a socket.
@Suite("Channels without a socket")
struct EmbeddedChannelTests {
    static let api: HTTPHeaders = ["Authorization": "Bearer \(TestRelay.apiKey)", "Content-Type": "application/json"]

    /// A relay with one session, and the target of its channel `kind` (`poll`, `events`, `ws`) with its token.
    static func session(_ kind: String) async throws -> (LinkRelay, String) {
        let relay = try await TestRelay.unstarted()
        let answer = try #require(
            await relay.respond(
                to: RelayRequest(.POST, "/v1/sessions", headers: api, body: #"{"phoneNumber":"2001004014"}"#)))
        #expect(answer.status == .created)
        let created = try JSONDecoder().decode(Created.self, from: Data(String(buffer: answer.body).utf8))
        return (relay, "/v1/sessions/\(created.sessionId)/\(kind)?token=\(created.channel.token)")
    }

    @Test("A long-poll with timeout 0 is answered from the store, and its connection takes the next request")
    func longPoll() async throws {
        let (relay, target) = try await Self.session("poll")
        let connection = try EmbeddedConnection(relay)
        try connection.send("GET \(target)&after=0&timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n")
        // The gate's verdict and the store's events come from the loop's queue.
        connection.loop.run()
        let answer = try connection.received()
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        let body = try #require(answer.components(separatedBy: "\r\n\r\n").last)
        let poll = try JSONDecoder().decode(PollAnswer.self, from: Data(body.utf8))
        #expect(poll.events.first?.seq == 1 && !poll.done)
        try connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try connection.received().hasPrefix("HTTP/1.1 200"))
    }

    @Test("An SSE stream writes its head, its retry hint and the stored events, and ends when the client goes")
    func eventStream() async throws {
        let (relay, target) = try await Self.session("events")
        let connection = try EmbeddedConnection(relay)
        try connection.send("GET \(target) HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        connection.loop.run()
        let stream = try connection.received()
        #expect(stream.hasPrefix("HTTP/1.1 200") && stream.contains("Content-Type: text/event-stream"), "\(stream)")
        #expect(stream.contains("retry: 2000\n\n") && stream.contains("id: 1\n"))
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(!connection.isOpen)
    }

    /// While a channel holds the connection it keeps no HTTP decoder: the memory each waiting desktop
    /// costs (docs/memory.md).
    static func expectNoDecoder(_ connection: EmbeddedConnection, sourceLocation: SourceLocation = #_sourceLocation) {
        let pipeline = connection.channel.pipeline.syncOperations
        #expect(
            (try? pipeline.handler(type: ByteToMessageHandler<RequestDecoder>.self)) == nil
                && (try? pipeline.handler(type: HTTPServerPipelineHandler.self)) == nil,
            sourceLocation: sourceLocation)
    }

    @Test(
        "A held SSE stream or long-poll reads no more requests: a byte, or a request sent behind the channel's, closes it",
        arguments: ["events", "poll"], [false, true])
    func heldChannelTakesNoMoreRequests(kind: String, pipelined: Bool) async throws {
        let (relay, target) = try await Self.session(kind)
        let connection = try EmbeddedConnection(relay)
        let request = "GET \(target)&after=1 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
        try connection.send(request + (pipelined ? "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" : ""))
        connection.loop.run()
        if pipelined {
            // Only the stream's own head went out (a held long-poll has sent none): the pipelined request
            // got no answer.
            #expect(!connection.isOpen)
            let heads = try connection.received().components(separatedBy: "HTTP/1.1 ").count - 1
            #expect(heads == (kind == "events" ? 1 : 0))
            return
        }
        #expect(connection.isOpen)
        Self.expectNoDecoder(connection)
        _ = try connection.received()
        try connection.send("G")
        connection.loop.run()
        #expect(!connection.isOpen)
        #expect(!(try connection.received()).contains("HTTP/1.1"))
    }

    @Test(
        "A held long-poll's answer gives its connection back its decoder, or closes it after a graceful shutdown began",
        arguments: [false, true])
    func heldLongPollAnswered(quiescing: Bool) async throws {
        let (relay, target) = try await Self.session("poll")
        let connection = try EmbeddedConnection(relay)
        try connection.send("GET \(target)&after=1&timeout=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        connection.loop.run()
        #expect(try connection.received().isEmpty)
        Self.expectNoDecoder(connection)
        if quiescing { connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        // The poll's timeout passes (the hub's clock, as its heartbeat ticks it): an empty answer, after
        // which the connection takes the next request, or closes once a shutdown has begun.
        _ = relay.hub.tick(now: relay.clock.now().addingTimeInterval(2))
        connection.loop.run()
        let answer = try connection.received()
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.contains(#""events":[]"#), "\(answer)")
        #expect(connection.isOpen == !quiescing)
        if quiescing { return }
        try connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try connection.received().hasPrefix("HTTP/1.1 200"))
    }

    @Test(
        "A WebSocket takes over the connection: 101, the stored events as text, and a frame RFC 6455 forbids closes with 1002"
    )
    func webSocket() async throws {
        let (relay, target) = try await Self.session("ws")
        let connection = try EmbeddedConnection(relay)
        try connection.send(
            "GET \(target) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        connection.loop.run()
        // The 101, then the events the store holds, as text frames.
        let written = try connection.receivedBytes()
        let handshake = try #require(String(decoding: written, as: UTF8.self).components(separatedBy: "\r\n\r\n").first)
        let frames = Array(written.dropFirst(handshake.utf8.count + 4))
        #expect(handshake.hasPrefix("HTTP/1.1 101"), "\(handshake)")
        #expect(handshake.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        #expect(frames.first == 0x81, "a text frame")
        #expect(String(decoding: frames, as: UTF8.self).contains("\"seq\":1"))
        // FIN, RSV1 and text, masked, empty: no extension was negotiated, so RSV1 has no meaning.
        try connection.channel.writeInbound(ByteBuffer(bytes: [0xC1, 0x80, 0, 0, 0, 0]))
        var close = ByteBuffer()
        while var frame = try connection.channel.readOutbound(as: ByteBuffer.self) { close.writeBuffer(&frame) }
        #expect(close.getBytes(at: 0, length: 4) == [0x88, 0x02, 0x03, 0xEA], "a close frame with 1002")
        #expect(try await FrontDoorTests.securityEvents(relay, "websocket_protocol_error") == 1)
    }
}
