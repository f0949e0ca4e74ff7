import AsyncHTTPClient
import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Logging
import NIOCore
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
}

/// A relay running on a free loopback port for one test, with the sandbox as Prove.
struct TestRelay {
    static let apiKey = "test-api-key-0123456789abcdef"
    /// One client for every test, kept for the life of the test process: it never follows redirects,
    /// so a test sees Prove's 302 as the phone's browser does.
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))

    let relay: LinkRelay
    let base: String
    let logs: LogCapture
    var http: HTTPClient { Self.client }

    /// Builds and runs a relay for the duration of `body`, then shuts it down gracefully.
    ///
    /// Tests run in parallel, so the free port a relay picked can be taken before it binds; then the
    /// relay is built again on another port (up to 5 times).
    ///
    /// `flags` are `serve` flags without dashes, e.g. `["limits": ["off"]]`.
    static func run(
        store: String = "memory", hold: Int? = nil, clock: any RelayClock = EventLoopClock(),
        flags: [String: [String]] = [:], environment: [String: String] = [:], _ body: (TestRelay) async throws -> Void
    ) async throws {
        for attempt in 1...5 {
            if try await runOnce(
                store: store, hold: hold, clock: clock, flags: flags, environment: environment, body)
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
        store: String, hold: Int?, clock: any RelayClock, flags extra: [String: [String]],
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
        let group = relay.serviceGroup(handlingSignals: false, logger: logger)
        var started = false
        do {
            try await withThrowingTaskGroup(of: Bool.self) { tasks in
                tasks.addTask {
                    try await group.run()
                    return false
                }
                tasks.addTask {
                    await relay.waitUntilRunning()
                    return true
                }
                // Either the server runs, or the group ended (or threw) because it could not start.
                guard try await tasks.next() == true else { throw StartFailure() }
                started = true
                // Requests go to the listening port even when the public URL names another (https) origin.
                let test = TestRelay(relay: relay, base: "http://127.0.0.1:\(configuration.port)", logs: logs)
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
        try await Self.fetch(
            method, pathOrURL.hasPrefix("http") ? pathOrURL : base + pathOrURL, headers: headers, body: body)
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
