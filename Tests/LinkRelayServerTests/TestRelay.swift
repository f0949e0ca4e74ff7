import AsyncHTTPClient
import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import ServiceLifecycle
import Testing

@testable import LinkRelayServer

/// What `POST /v1/sessions` answered.
struct Created: Decodable {
    struct Channel: Decodable {
        var token: String
        var websocket: String
        var events: String
        var poll: String
    }

    var sessionId: String
    var state: String
    var finalTargetUrl: String
    var authToken: String?
    var correlationId: String
    var expiresAt: String
    var channel: Channel
}

/// One event as a channel delivers it.
struct WireEvent: Decodable, Equatable {
    var seq: Int
    var type: String
    var asc: Bool?
    var outcome: String?
    var expiresAt: String?
}

struct PollAnswer: Decodable {
    var events: [WireEvent]
    var after: Int
    var done: Bool
}

struct SessionBody: Decodable {
    struct Result: Decodable {
        var outcome: String
        var success: Bool
        var proveSuccess: String?
        var phoneNumber: String?
        var proveId: String?
        var clientRequestId: String?
    }

    var sessionId: String
    var state: String
    var tappedAt: String?
    var result: Result?
    var events: [WireEvent]
}

struct HTTPAnswer {
    var status: Int
    var headers: [(String, String)]
    var body: String

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    func json<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(type, from: Data(body.utf8)) }

    /// The problem+json body.
    func problem() throws -> ProblemBody { try json(ProblemBody.self) }
}

/// A problem+json body (RFC 9457) as the relay writes it.
struct ProblemBody: Decodable {
    struct FieldError: Decodable {
        var field: String
        var message: String
    }

    var type: String
    var code: String
    var title: String
    var status: Int
    var detail: String
    var errors: [FieldError]?
}

/// A relay for one test, with the sandbox as Prove: in process by default, each request written to the
/// relay's own front door pipeline on an `NIOAsyncTestingChannel`; with `socket: true`, listening on a
/// free loopback port.
struct TestRelay {
    static let apiKey = "test-api-key-0123456789abcdef"
    /// One client for every test, kept for the life of the test process: it never follows redirects,
    /// so a test sees Prove's 302 as the phone's browser does.
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))

    let relay: LinkRelay
    /// The relay's origin: where it listens, or, in process, the public URL it would listen on.
    let base: String
    let logs: LogCapture
    /// Listening on `base`; otherwise requests go through `FrontDoor` on a testing channel.
    let socket: Bool
    var http: HTTPClient { Self.client }

    /// Builds and runs a relay for the duration of `body`, then shuts it down gracefully.
    ///
    /// In process (the default), its background services run but no listener binds. With `socket`,
    /// it listens; tests run in parallel, so the free port a relay picked can be taken before it
    /// binds: then the relay is built again on another port (up to 5 times).
    ///
    /// `flags` are `serve` flags without dashes, e.g. `["limits": ["off"]]`.
    static func run(
        socket: Bool = false, store: String = "memory", hold: Int? = nil, clock: any RelayClock = EventLoopClock(),
        flags: [String: [String]] = [:], environment: [String: String] = [:], _ body: (TestRelay) async throws -> Void
    ) async throws {
        for attempt in 1...5 {
            if try await runOnce(
                socket: socket, store: store, hold: hold, clock: clock, flags: flags, environment: environment, body)
            {
                return
            }
            FileHandle.standardError.write(Data("the relay did not start (attempt \(attempt)); another port\n".utf8))
        }
        Issue.record("the relay did not start in 5 attempts")
    }

    private struct StartFailure: Error {}

    /// False when the server could not start (its port was taken meanwhile).
    private static func runOnce(
        socket: Bool, store: String, hold: Int?, clock: any RelayClock, flags extra: [String: [String]],
        environment: [String: String], _ body: (TestRelay) async throws -> Void
    ) async throws -> Bool {
        let logs = LogCapture()
        let logger = logs.logger()
        var flags: [String: [String]] = ["port": ["0"], "store": [store], "api-key": [apiKey], "drain-delay": ["0"]]
        flags.merge(extra) { $1 }
        if let hold { flags["hold"] = [String(hold)] }
        var configuration = try RelayConfiguration.resolve(flags: flags, environment: environment)
        // WSClient, unlike a browser, sends the WebSocket URL's own scheme and host as its Origin.
        configuration.allowedOrigins.append("ws://127.0.0.1")
        let relay = try await buildLinkRelay(configuration, logger: logger, clock: clock)
        let group = relay.serviceGroup(handlingSignals: false, listening: socket, logger: logger)
        var started = false
        do {
            try await withThrowingTaskGroup(of: Bool.self) { tasks in
                tasks.addTask {
                    try await group.run()
                    return false
                }
                if socket {
                    tasks.addTask {
                        await relay.waitUntilRunning()
                        return true
                    }
                    // Either the server runs, or the group ended (or threw) because it could not start.
                    guard try await tasks.next() == true else { throw StartFailure() }
                }
                started = true
                // Requests go to the listening port even when the public URL names another (https) origin.
                let test = TestRelay(
                    relay: relay, base: "http://127.0.0.1:\(configuration.port)", logs: logs, socket: socket)
                do {
                    try await body(test)
                } catch {
                    await group.triggerGracefulShutdown()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        } catch {
            if started { throw error }
            return false
        }
        return true
    }

    /// A relay built as `run` builds it, on the memory store, but not started: `LinkRelay.respond(to:)`
    /// answers requests through its route table without a socket. It logs to `logs`, when given.
    static func unstarted(
        clock: any RelayClock = ManualClock(), flags: [String: [String]] = [:], environment: [String: String] = [:],
        logs: LogCapture? = nil
    ) async throws -> LinkRelay {
        var all: [String: [String]] = ["port": ["8080"], "store": ["memory"], "api-key": [apiKey]]
        all.merge(flags) { $1 }
        return try await buildLinkRelay(
            try RelayConfiguration.resolve(flags: all, environment: environment),
            logger: logs?.logger() ?? quietLogger(), clock: clock)
    }

    func request(
        _ method: HTTPMethod, _ pathOrURL: String, headers: [(String, String)] = [], body: String? = nil
    ) async throws -> HTTPAnswer {
        let url = pathOrURL.hasPrefix("http") ? pathOrURL : base + pathOrURL
        // Another origin (a sandbox of its own, a webhook receiver) is reached over the network.
        let own = [base, relay.configuration.publicURL].contains { url == $0 || url.hasPrefix($0 + "/") }
        guard socket || !own else {
            return try await InProcess.exchange(method, url, headers: headers, body: body, relay)
        }
        return try await Self.fetch(method, url, headers: headers, body: body)
    }

    /// Writes `request`'s bytes as they are (several requests, a malformed one) on one connection and
    /// returns what the relay sent until it closed the connection. `halfClose`: the client then closes
    /// its sending side, as `shutdown(SHUT_WR)` does.
    func rawExchange(_ request: String, halfClose: Bool = false) async throws -> String {
        guard !socket else {
            return try await LinkRelayServerTests.rawExchange(
                port: try #require(URLComponents(string: base)?.port), request, halfClose: halfClose)
        }
        let channel = try await InProcess.connect(relay)
        try await channel.writeInbound(ByteBuffer(string: request))
        if halfClose {
            // What a socket with `allowRemoteHalfClosure` (as `RelayServer` sets it) reports at end of input.
            try await channel.testingEventLoop.executeInContext {
                channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        var received = ByteBuffer()
        do {
            while true {
                if case .byteBuffer(var bytes) = try await channel.waitForOutboundWrite(as: IOData.self) {
                    received.writeBuffer(&bytes)
                }
            }
        } catch let error as ChannelError where error == .ioOnClosedChannel {}
        return String(buffer: received)
    }

    /// One request with the shared test client, its whole answer read.
    static func fetch(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], body: String? = nil
    ) async throws -> HTTPAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return HTTPAnswer(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
            body: String(buffer: bytes))
    }

    func api(_ method: HTTPMethod, _ path: String, body: String? = nil, headers: [(String, String)] = [])
        async throws -> HTTPAnswer
    {
        var all = [("Authorization", "Bearer \(Self.apiKey)")] + headers
        if body != nil { all.append(("Content-Type", "application/json")) }
        return try await request(method, path, headers: all, body: body)
    }

    func createSession(phone: String = "2001004014", extra: String = "", headers: [(String, String)] = [])
        async throws -> Created
    {
        let answer = try await api(
            .POST, "/v1/sessions", body: "{\"phoneNumber\":\"\(phone)\"\(extra)}", headers: headers)
        #expect(answer.status == 201, "create answered \(answer.status): \(answer.body)")
        return try answer.json(Created.self)
    }

    func session(_ id: String) async throws -> SessionBody {
        try await api(.GET, "/v1/sessions/\(id)").json(SessionBody.self)
    }

    /// The newest Instant Link the sandbox "sent" to `phone`.
    func latestLink(phone: String = "2001004014") async throws -> String {
        let outbox = try await request(.GET, "/sandbox/outbox?phoneNumber=\(phone)")
        struct Outbox: Decodable {
            struct Message: Decodable { var link: String }
            var messages: [Message]
        }
        let link = try outbox.json(Outbox.self).messages.last?.link
        return try #require(link)
    }

    /// Does what the phone does: opens the Instant Link (Prove's page), follows its redirect to the
    /// relay's landing, and returns the landing's answer and the URL it landed on.
    func tap(phone: String = "2001004014", decline: Bool = false) async throws -> (HTTPAnswer, String) {
        let link = try await latestLink(phone: phone) + (decline ? "?decline=1" : "")
        let prove = try await request(.GET, link)
        #expect(prove.status == 302)
        let landing = try #require(prove.header("Location"))
        return (try await request(.GET, landing), landing)
    }

    func poll(_ created: Created, after: Int = 0, timeout: Int = 5) async throws -> PollAnswer {
        try await request(
            .GET, created.channel.poll + "?after=\(after)&timeout=\(timeout)&token=\(created.channel.token)"
        )
        .json(PollAnswer.self)
    }

    /// Long-polls until a terminal event, collecting every event in order.
    func pollUntilDone(_ created: Created, after: Int = 0) async throws -> [WireEvent] {
        var events: [WireEvent] = []
        var cursor = after
        for _ in 0..<20 {
            let answer = try await poll(created, after: cursor, timeout: 10)
            events += answer.events
            cursor = answer.after
            if answer.done { return events }
        }
        Issue.record("no terminal event after 20 polls")
        return events
    }
}

/// One connection to a relay's front door without a socket: the relay's own pipeline
/// (`FrontDoor.configure`) on a fresh `NIOAsyncTestingChannel`, the request's bytes written inbound and
/// the answer's bytes read outbound, so that everything the front door does (long-polls, HEAD, headers,
/// error pages) runs as it does for a client on a socket.
enum InProcess {
    /// The peer every in-process connection comes from, as `RelayRequest(.GET, ...)` has it.
    static let peer = try! SocketAddress(ipAddress: "127.0.0.1", port: 40000)

    struct Closed: Error {}

    /// A new connection to `relay`'s front door, as `RelayServer` sets one up.
    static func connect(_ relay: LinkRelay) async throws -> NIOAsyncTestingChannel {
        let channel = NIOAsyncTestingChannel()
        channel.localAddress = try SocketAddress(ipAddress: "127.0.0.1", port: relay.configuration.port)
        let services = relay.frontDoor
        // Set up in the loop's own context, with no future to hand back: ThreadSanitizer does not see the
        // testing loop's hand-over of a future's value to the awaiting task as ordering.
        try await channel.testingEventLoop.executeInContext {
            try channel.pipeline.syncOperations.addHandler(HalfCloseAsClose())
            try FrontDoor.addHandlers(channel, services: services)
        }
        try await channel.connect(to: peer).get()
        return channel
    }

    /// Sends one request, as AsyncHTTPClient would frame it, and reads its whole answer.
    static func exchange(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)], body: String?, _ relay: LinkRelay
    ) async throws -> HTTPAnswer {
        let components = try #require(URLComponents(string: url), "a URL: \(url)")
        let target =
            (components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath)
            + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let authority = (components.host ?? "127.0.0.1") + (components.port.map { ":\($0)" } ?? "")
        var head = "\(method.rawValue) \(target) HTTP/1.1\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { head += "Host: \(authority)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.utf8.count)\r\n" }
        head += "\r\n"

        let channel = try await connect(relay)
        try await channel.writeInbound(ByteBuffer(string: head + (body ?? "")))
        var reader = ResponseReader(head: method == .HEAD)
        do {
            while true {
                if try reader.answer() != nil { break }
                switch try await channel.waitForOutboundWrite(as: IOData.self) {
                case .byteBuffer(var bytes): reader.bytes.writeBuffer(&bytes)
                case .fileRegion: Issue.record("the front door wrote a file region")
                }
            }
        } catch let error as ChannelError where error == .ioOnClosedChannel {
            reader.closed = true
        }
        let answer = try #require(try reader.answer(), "the connection closed before a whole answer")
        try? await channel.close()
        return answer
    }
}

/// A testing channel cannot close only its output, as the front door does after an early answer (to
/// read and drop what the client still sends): closed whole instead, the client sees the end of the
/// answer as it would on a socket, and the test sends nothing after.
final class HalfCloseAsClose: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = Any

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        context.close(mode: mode == .output ? .all : mode, promise: promise)
    }
}

/// Reads one HTTP/1.1 answer from bytes as they arrive: the status line, the headers, and a body framed by
/// `Content-Length`, `chunked`, or the connection's close. Interim (1xx) answers are skipped.
struct ResponseReader {
    /// The request was a HEAD: the answer has no body, whatever its headers say.
    let head: Bool
    var bytes = ByteBuffer()
    /// The connection has closed: a body without a length ends here.
    var closed = false

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// The whole answer, or nil while more bytes are needed.
    mutating func answer() throws -> HTTPAnswer? {
        var view = bytes
        while true {
            guard let headEnd = view.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
            let headLength = headEnd.upperBound - view.readerIndex
            let text = view.readString(length: headLength)!
            var lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
            guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
                throw Malformed(description: "status line: \(text)")
            }
            let headers = try lines.map { line -> (String, String) in
                guard let colon = line.firstIndex(of: ":") else { throw Malformed(description: "header: \(line)") }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            if (100..<200).contains(status) && status != 101 { continue }
            func value(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
            var body = ByteBuffer()
            if head || status == 204 || status == 304 || (100..<200).contains(status) {
            } else if value("transfer-encoding")?.lowercased().contains("chunked") == true {
                while true {
                    guard let lineEnd = view.readableBytesView.firstRange(of: Array("\r\n".utf8)) else { return nil }
                    let sizeLine = view.getString(at: view.readerIndex, length: lineEnd.lowerBound - view.readerIndex)!
                    guard
                        let size = Int(
                            sizeLine.split(separator: ";")[0].trimmingCharacters(in: .whitespaces), radix: 16)
                    else { throw Malformed(description: "chunk size: \(sizeLine)") }
                    guard view.readableBytes >= lineEnd.upperBound - view.readerIndex + size + 2 else { return nil }
                    view.moveReaderIndex(to: lineEnd.upperBound)
                    if size == 0 {
                        // Trailers, if any, end with an empty line.
                        guard let end = view.readableBytesView.firstRange(of: Array("\r\n".utf8)) else { return nil }
                        view.moveReaderIndex(to: end.upperBound)
                        break
                    }
                    var chunk = view.readSlice(length: size)!
                    body.writeBuffer(&chunk)
                    view.moveReaderIndex(forwardBy: 2)
                }
            } else if let length = value("content-length").flatMap({ Int($0) }) {
                guard view.readableBytes >= length else { return nil }
                body = view.readSlice(length: length)!
            } else {
                guard closed else { return nil }
                body = view
            }
            return HTTPAnswer(status: status, headers: headers, body: String(buffer: body))
        }
    }
}
