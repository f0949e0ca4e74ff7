import AsyncHTTPClient
import Foundation
import LinkRelayServer
import LinkRelayTestSupport
import Logging
import NIOCore
import ProveAPI
import Testing

@testable import ProveSandbox

@Suite(.timeLimit(.minutes(1))) struct SandboxFaultSpecTests {
    struct Good: Sendable, CustomTestStringConvertible {
        var spec: String
        var endpoint: String
        var fault: SandboxFault
        var testDescription: String { spec }
    }

    @Test(arguments: [
        Good(spec: "unify-status:error=1,status=503", endpoint: "unify-status", fault: .error(rate: 1, status: 503)),
        Good(spec: "unify:latency=2s", endpoint: "unify", fault: .latency(.seconds(2))),
        Good(spec: "unify:latency=250ms", endpoint: "unify", fault: .latency(.milliseconds(250))),
        Good(
            spec: "start:latency=1.5s,error=0.25", endpoint: "start",
            fault: .init(latency: .seconds(1.5), errorRate: 0.25)),
        Good(spec: "*:retry-after=2", endpoint: "*", fault: .init(retryAfter: 2)),
        Good(spec: "unify:retry-after=0,status=503", endpoint: "unify", fault: .init(status: 503, retryAfter: 0)),
        Good(spec: "token:drop", endpoint: "token", fault: .drop),
        Good(spec: "validate:hang", endpoint: "validate", fault: .hang),
        Good(
            spec: "challenge:malformed,error=0.5", endpoint: "challenge", fault: .init(errorRate: 0.5, malformed: true)),
        Good(
            spec: " unify-bind : latency=0ms , drop ", endpoint: "unify-bind", fault: .init(latency: .zero, drop: true)),
        Good(spec: "complete:error=0", endpoint: "complete", fault: .init(errorRate: 0)),
    ])
    func goodSpecsParse(_ good: Good) throws {
        let (endpoint, fault) = try ProveSandbox.parseFault(good.spec)
        #expect(endpoint == good.endpoint)
        #expect(fault == good.fault)
        // The description is the items again.
        #expect(try SandboxFault.parse(items: fault.description) == fault)
    }

    @Test(arguments: [
        ("unify", "expected ENDPOINT:ITEM"),
        ("outbox:drop", #"unknown endpoint "outbox""#),
        ("link:drop", #"unknown endpoint "link""#),
        ("unify:", "no fault items"),
        ("unify:explode", #"unknown item "explode""#),
        ("unify:latency=2s,,drop", "empty item"),
        ("unify:error=1.5", "between 0 and 1"),
        ("unify:error=-0.1", "between 0 and 1"),
        ("unify:error=lots", "between 0 and 1"),
        ("unify:error=", "error needs a value"),
        ("unify:latency=-5ms", "must not be negative"),
        ("unify:latency=-1s", "must not be negative"),
        ("unify:latency=250", "needs a unit"),
        ("unify:latency=soon", "needs a unit"),
        ("unify:latency=601s", "at most"),
        ("unify:status=200", "400…599"),
        ("unify:status=five", "400…599"),
        ("unify:retry-after=-1", "retry-after must be"),
        ("unify:hang,drop", "choose one failure"),
        ("unify:status=503,malformed", "choose one failure"),
        ("unify:retry-after=1,drop", "choose one failure"),
        ("unify:drop=1", "drop takes no value"),
        ("unify:error=0.5,error=1", #"item "error" given twice"#),
    ])
    func badSpecsNameTheProblem(_ spec: String, _ expected: String) {
        #expect {
            _ = try ProveSandbox.parseFault(spec)
        } throws: { error in
            guard let error = error as? SandboxFaultError else { return false }
            let message = error.description
            return message.hasPrefix("fault \"\(spec)\": ") && message.contains(expected) && !message.contains("\n")
        }
    }

    @Test func errorRateIsDeterministic() {
        func failing(_ fault: SandboxFault, upTo count: Int = 12) -> [Int] {
            (1...count).filter { fault.fails(requestNumber: $0) }
        }
        #expect(failing(.error(rate: 0.5)) == [2, 4, 6, 8, 10, 12])
        #expect(failing(.error(rate: 1)) == Array(1...12))
        #expect(failing(.error(rate: 0)) == [])
        #expect(failing(.error(rate: 0.25)) == [4, 8, 12])
        #expect(failing(.error(rate: 1.0 / 3)) == [3, 6, 9, 12])
        #expect(failing(.error(rate: 0.29), upTo: 100).count == 29)
        // Latency alone fails nothing; a failure without a rate fails everything.
        #expect(failing(.latency(.milliseconds(5))) == [])
        #expect(failing(.drop) == Array(1...12))
        #expect(SandboxFault(retryAfter: 3).failure == .status(429, retryAfter: 3))
        #expect(SandboxFault(errorRate: 0.5).failure == .status(500, retryAfter: nil))
    }

    @Test func jsonRoundTripsAndRefusesUnknownKeys() throws {
        let fault = SandboxFault(latency: .milliseconds(250), errorRate: 0.5, status: 503, retryAfter: 2)
        let json = String(decoding: try JSONEncoder().encode(fault), as: UTF8.self)
        #expect(json.contains(#""latencyMs":250"#))
        #expect(!json.contains("hang"))
        #expect(try JSONDecoder().decode(SandboxFault.self, from: Data(json.utf8)) == fault)
        #expect(try JSONDecoder().decode(SandboxFault.self, from: Data(#"{"drop":true}"#.utf8)) == .drop)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(SandboxFault.self, from: Data(#"{"latency":250}"#.utf8))
        }
    }

    @Test func actorRefusesBadEndpointsAndFaults() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        await #expect(throws: SandboxFaultError.self) { try await sandbox.setFault(.drop, for: "outbox") }
        await #expect(throws: SandboxFaultError.self) { try await sandbox.setFault(.error(rate: 2), for: "unify") }
        await #expect(throws: SandboxFaultError.self) {
            try await sandbox.setFault(SandboxFault(hang: true, drop: true), for: .unify)
        }
        try await sandbox.setFault(.latency(.milliseconds(10)), for: "unify")
        try await sandbox.setFault(.error(rate: 0.5, status: 502), for: .all)
        #expect(
            await sandbox.faults == ["unify": .latency(.milliseconds(10)), "*": .error(rate: 0.5, status: 502)]
        )
        // An empty fault clears.
        try await sandbox.setFault(SandboxFault(), for: "unify")
        #expect(await sandbox.faults == ["*": .error(rate: 0.5, status: 502)])
        await sandbox.clearFaults()
        #expect(await sandbox.faults.isEmpty)
    }
}

@Suite(.timeLimit(.minutes(1))) struct SandboxFaultRouterTests {
    @Test func errorRateHalfFailsExactlyEverySecondRequest() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let unify = try decode(UnifyResponse.self, try await client.unifyDesktop(token: token, phone: "2001004014"))
            try await sandbox.setFault(.error(rate: 0.5, status: 503), for: "unify-status")
            var failed: [Int] = []
            for n in 1...6 {
                let response = try await client.post(
                    "unify-status",
                    token: token,
                    body: UnifyStatusRequest(correlationId: unify.correlationId)
                )
                if response.status == .serviceUnavailable {
                    failed.append(n)
                    let error = try decode(ProveErrorBody.self, response)
                    #expect(error.code == 8000)
                    #expect(response.headers[.retryAfter] == nil)
                } else {
                    #expect(response.status == .ok)
                    #expect(try decode(UnifyStatusResponse.self, response).success == "pending")
                }
            }
            #expect(failed == [2, 4, 6])
            // Setting the fault again restarts the count.
            try await sandbox.setFault(.error(rate: 0.5, status: 503), for: "unify-status")
            let body = UnifyStatusRequest(correlationId: unify.correlationId)
            #expect(try await client.post("unify-status", token: token, body: body).status == .ok)
            #expect(try await client.post("unify-status", token: token, body: body).status == .serviceUnavailable)
        }
        #expect(await sandbox.callCount("unify-status") == 8)
    }

    @Test func faultIsCheckedBeforeAuthorizationAndValidation() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.error(), for: .unifyStatus)
        let client = SandboxClient(sandbox)
        do {
            let response = try await client.post("unify-status", token: nil, json: "{not json")
            #expect(response.status == .internalServerError)
            #expect(
                try decode(ProveErrorBody.self, response)
                    == .init(code: 8000, message: "internal error (sandbox fault)"))
        }
    }

    @Test func rateLimitAnswers429WithRetryAfterOnEveryProveEndpoint() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let (endpoint, fault) = try ProveSandbox.parseFault("*:retry-after=2")
        try await sandbox.setFault(fault, for: endpoint)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.requestToken()
            #expect(token.status == .tooManyRequests)
            #expect(token.headers[.retryAfter] == "2")
            #expect(try decode(ProveErrorBody.self, token).code == 8000)
            for path in SandboxEndpoint.allCases.dropFirst().dropLast().map(\.rawValue) {
                let response = try await client.post(path, token: "eyJwhatever", json: "{}")
                #expect(response.status == .tooManyRequests, "\(path)")
                #expect(response.headers[.retryAfter] == "2", "\(path)")
                #expect(response.headers[.contentType] == "application/json")
            }
            // Never the outbox, the Instant Link page or the fault controls.
            #expect(try await client.execute(uri: "/sandbox/outbox", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/sandbox/link/nope", method: .get).status == .notFound)
            #expect(try await client.execute(uri: "/sandbox/faults", method: .get).status == .ok)
        }
        #expect(await sandbox.tokensIssued == 0)
    }

    @Test func malformedAnswerIsNotJSON() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            try await sandbox.setFault(.malformed, for: "token")
            try await sandbox.setFault(.malformed, for: "unify")
            for response in [
                try await client.requestToken(),
                try await client.unifyDesktop(token: token, phone: "2001004014"),
            ] {
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/json")
                #expect(response.body.readableBytes > 0)
                #expect(throws: (any Error).self) {
                    try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))
                }
            }
        }
        #expect(await sandbox.tokensIssued == 1)
        #expect(await sandbox.outbox(phoneNumber: nil).isEmpty)
        #expect(await sandbox.activeUnifySessions == 0)
    }

    @Test func faultedUnifySendsNoSMS() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            try await sandbox.setFault(try ProveSandbox.parseFault("unify:error=1,status=502").fault, for: "unify")
            let response = try await client.unifyDesktop(token: token, phone: "2001004014")
            #expect(response.status == .badGateway)
            #expect(try decode(ProveErrorBody.self, response).code == 8000)
            #expect(try await client.outbox("2001004014").isEmpty)

            await sandbox.clearFaults()
            #expect(try await client.unifyDesktop(token: token, phone: "2001004014").status == .ok)
            #expect(try await client.outbox("2001004014").count == 1)
        }
        #expect(await sandbox.callCount("unify") == 2)
        #expect(await sandbox.activeUnifySessions == 1)
    }

    @Test func latencyDelaysTheNormalAnswer() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.latency(.milliseconds(20)), for: .unify)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let response = try await client.unifyDesktop(token: token, phone: "2001004014")
            #expect(response.status == .ok)
            #expect(try decode(UnifyResponse.self, response).success == "pending")
            #expect(try await client.outbox("2001004014").count == 1)
        }
        #expect(await sandbox.faults == ["unify": .latency(.milliseconds(20))])
    }

    @Test func endpointFaultWinsOverTheWildcard() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.error(status: 503), for: .all)
        try await sandbox.setFault(.latency(.zero), for: .token)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            #expect(try await client.unifyDesktop(token: token, phone: "2001004014").status == .serviceUnavailable)
            await sandbox.clearFault(for: .all)
            #expect(try await client.unifyDesktop(token: token, phone: "2001004014").status == .ok)
        }
    }

    /// In process there is no connection to close: `respond` asks for the drop, and the client throws.
    @Test func dropAsksTheServerToCloseTheConnection() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.drop, for: .token)
        let client = SandboxClient(sandbox)
        do {
            await #expect(throws: ConnectionDropped.self) { try await client.requestToken() }
        }
        #expect(await sandbox.tokensIssued == 0)
    }
}

@Suite(.timeLimit(.minutes(1))) struct SandboxFaultControlTests {
    @Test func controlEndpointsSetListAndClearFaults() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            func put(_ endpoint: String, _ body: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/sandbox/faults/\(endpoint)",
                    method: .put,
                    headers: [.contentType: body.hasPrefix("{") ? "application/json" : "text/plain"],
                    body: ByteBuffer(string: body)
                )
            }
            func list() async throws -> [String: SandboxFault] {
                let response = try await client.execute(uri: "/sandbox/faults", method: .get)
                #expect(response.status == .ok)
                return try decode(SandboxFaultList.self, response).faults
            }
            #expect(try await list().isEmpty)

            #expect(
                try await put("unify-status", #"{"errorRate":0.5,"status":503,"latencyMs":5}"#).status == .noContent)
            #expect(try await put("token", "drop").status == .noContent)
            #expect(try await put("*", "retry-after=3").status == .noContent)
            #expect(try await put("%2A", "retry-after=4").status == .noContent)
            #expect(
                try await list() == [
                    "unify-status": .init(latency: .milliseconds(5), errorRate: 0.5, status: 503),
                    "token": .drop,
                    "*": .init(retryAfter: 4),
                ]
            )
            #expect(await sandbox.faults.count == 3)
            let raw = try await client.execute(uri: "/sandbox/faults", method: .get)
            #expect(String(buffer: raw.body).contains(#""unify-status":{"errorRate":0.5,"latencyMs":5,"status":503}"#))

            for (endpoint, body, expected) in [
                ("outbox", "drop", #"unknown endpoint "outbox""#),
                ("unify", "error=7", "between 0 and 1"),
                ("unify", #"{"errorRate":7}"#, "between 0 and 1"),
                ("unify", #"{"latency":250}"#, #"unknown key "latency""#),
                ("unify", #"{"status":"503"}"#, "status has the wrong type"),
                ("unify", #"{"drop":true"#, "neither a JSON fault nor fault items"),
                ("unify", "", "no fault items"),
            ] {
                let response = try await put(endpoint, body)
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.headers[.contentType] == "application/json")
                let error = try decode([String: String].self, response)["error"] ?? ""
                #expect(error.contains(expected), "\(error)")
            }
            #expect(await sandbox.faults.count == 3)

            let deleteOne = try await client.execute(uri: "/sandbox/faults/token", method: .delete)
            #expect(deleteOne.status == .noContent)
            #expect(try await list().keys.sorted() == ["*", "unify-status"])
            #expect(try await client.execute(uri: "/sandbox/faults/nope", method: .delete).status == .badRequest)
            #expect(try await client.execute(uri: "/sandbox/faults", method: .delete).status == .noContent)
            #expect(try await list().isEmpty)
            #expect(try await client.requestToken().status == .ok)
        }
    }
}

/// Faults as a client over TCP sees them: these need a live server, the front door as `linkrelay sandbox`
/// serves the simulator.
@Suite(.timeLimit(.minutes(1))) struct SandboxFaultLiveTests {
    static let quietLogger = LinkRelayTestSupport.quietLogger("sandbox-faults")

    static func server(_ sandbox: ProveSandbox) -> SandboxServer {
        SandboxServer(sandbox: sandbox, host: "127.0.0.1", port: 0, logger: quietLogger)
    }

    struct Request: Sendable {
        var path: String
        var contentType: String
        var body: String
    }

    static let tokenRequest = Request(
        path: "/sandbox/prove/token",
        contentType: "application/x-www-form-urlencoded",
        body: "client_id=\(ProveSandbox.clientID)&client_secret=\(ProveSandbox.clientSecret)"
            + "&grant_type=client_credentials"
    )

    /// What a client saw of one request.
    enum Outcome: Sendable {
        case response(TestResponse)
        /// The connection failed (closed, reset) before a response.
        case connectionError(any Error)
        /// Nothing came before the client's deadline.
        case noAnswer
    }

    /// POSTs `request` on a connection of its own and waits for the answer until `deadline` has passed since
    /// `afterSending` returned; then the client gives up and closes the connection.
    static func send(
        _ request: Request,
        port: Int,
        deadline: Duration = .seconds(10),
        afterSending: @escaping @Sendable () async -> Void = {}
    ) async -> Outcome {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let outcome = await withTaskGroup(of: Outcome?.self) { group in
            group.addTask {
                do {
                    var post = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(request.path)")
                    post.method = .POST
                    post.headers.add(name: "Content-Type", value: request.contentType)
                    post.body = .bytes(ByteBuffer(string: request.body))
                    let response = try await client.execute(post, timeout: .seconds(600))
                    return .response(
                        TestResponse(
                            status: response.status, headers: Fields(response.headers.map { ($0.name, $0.value) }),
                            body: try await response.body.collect(upTo: 1 << 20)))
                } catch {
                    return .connectionError(error)
                }
            }
            group.addTask {
                await afterSending()
                do {
                    try await Task.sleep(for: deadline)
                } catch {
                    return nil
                }
                return .noAnswer
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .noAnswer
        }
        // Shutting the client down closes its connection: a request still waiting ends.
        try? await client.shutdown()
        return outcome
    }

    /// Whether the sandbox's hang counts meet `condition` within `timeout` (a bound, not a wait for work).
    static func hangCounts(
        of sandbox: ProveSandbox,
        within timeout: Duration = .seconds(30),
        _ condition: @escaping @Sendable (HangCounts) -> Bool
    ) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await counts in await sandbox.hangCountUpdates() where condition(counts) { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let met = await group.next() ?? false
            group.cancelAll()
            return met
        }
    }

    @Test func dropClosesTheConnectionWithoutAResponse() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.drop, for: .token)
        try await Self.server(sandbox).serving { port in
            switch await Self.send(Self.tokenRequest, port: port) {
            case .response(let response): Issue.record("dropped request got a response: \(response.status)")
            case .noAnswer: Issue.record("dropped request was left open")
            case .connectionError: break
            }
            // The server keeps serving: the fault controls, and the token once the fault is gone.
            let faults = try await LiveSandboxClient(port: port).execute(uri: "/sandbox/faults", method: .get)
            #expect(faults.status == .ok)
            await sandbox.clearFaults()
            guard case .response(let response) = await Self.send(Self.tokenRequest, port: port) else {
                Issue.record("no token after the fault was cleared")
                return
            }
            #expect(response.status == .ok)
        }
        #expect(await sandbox.tokensIssued == 1)
        #expect(await sandbox.callCount("token") == 2)
    }

    @Test func hangNeverAnswersAndEndsWhenTheClientGivesUp() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(try ProveSandbox.parseFault("unify:hang").fault, for: "unify")
        try await Self.server(sandbox).serving { port in
            let unify = Request(
                path: "/sandbox/prove/v3/unify",
                contentType: "application/json",
                body: #"{"possessionType":"desktop","clientRequestId":"r","phoneNumber":"2001004014"}"#
            )
            // A client with a 1 s deadline, counted from when the sandbox holds the request.
            let outcome = await Self.send(unify, port: port, deadline: .seconds(1)) {
                #expect(await Self.hangCounts(of: sandbox) { $0.started == 1 })
                #expect(await sandbox.hangingRequests == 1)
                // Other requests are served meanwhile.
                let faults = try? await LiveSandboxClient(port: port).execute(uri: "/sandbox/faults", method: .get)
                #expect(faults?.status == .ok)
            }
            guard case .noAnswer = outcome else {
                Issue.record("a hung request was answered or dropped: \(outcome)")
                return
            }
            // The client gave up and closed its connection: the handler ends.
            #expect(await Self.hangCounts(of: sandbox) { $0.ended == 1 })
            #expect(await sandbox.hangingRequests == 0)
        }
        #expect(await sandbox.outbox(phoneNumber: nil).isEmpty)
        #expect(await sandbox.callCount("unify") == 1)
    }

    @Test func clearingAHangDropsTheHeldRequest() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.hang, for: .token)
        try await Self.server(sandbox).serving { port in
            async let held = Self.send(Self.tokenRequest, port: port, deadline: .seconds(20))
            #expect(await Self.hangCounts(of: sandbox) { $0.started == 1 })
            await sandbox.clearFaults()
            switch await held {
            case .response(let response): Issue.record("hung request got a response: \(response.status)")
            case .noAnswer: Issue.record("hung request was not dropped")
            case .connectionError: break
            }
            #expect(await Self.hangCounts(of: sandbox) { $0.ended == 1 })
        }
        #expect(await sandbox.tokensIssued == 0)
    }

    /// SIGTERM's graceful shutdown waits for requests in progress: a hang must not hold it for its 600 s.
    @Test func aShutdownDropsTheHeldRequest() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.hang, for: .token)
        let held = try await Self.server(sandbox).serving { port in
            let held = Task { await Self.send(Self.tokenRequest, port: port, deadline: .seconds(50)) }
            #expect(await Self.hangCounts(of: sandbox) { $0.started == 1 })
            return held
        }
        switch await held.value {
        case .response(let response): Issue.record("hung request got a response: \(response.status)")
        case .noAnswer: Issue.record("hung request was not dropped")
        case .connectionError: break
        }
        #expect(await sandbox.hangingRequests == 0)
        #expect(await sandbox.tokensIssued == 0)
    }

    @Test func errorAndRetryAfterOverTheWire() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        try await sandbox.setFault(.rateLimited(retryAfter: 3), for: .token)
        try await Self.server(sandbox).serving { port in
            let response = try await LiveSandboxClient(port: port).requestToken()
            #expect(response.status == .tooManyRequests)
            #expect(response.headers[.retryAfter] == "3")
            #expect(try decode(ProveErrorBody.self, response).code == 8000)
        }
    }
}
