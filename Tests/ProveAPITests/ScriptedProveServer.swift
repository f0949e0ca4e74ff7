import Foundation
import LinkRelayTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// A tiny scripted stand-in for a faulty Prove: `/token` always works; each `/v3/*` request takes the next
/// scripted step, and when the script is spent answers 200 with the endpoint's success body.
actor ScriptedProve {
    enum Step: Sendable {
        case respond(status: Int, retryAfter: String? = nil, body: String = "")
        /// Never answers (until `release()`).
        case hang
        /// Answers 200 and the start of a body, and never the rest (until `release()`).
        case hangInBody
    }

    static let okStatusBody = #"{"success":"true","proveId":"p-1","phoneNumber":"2001004014"}"#
    static let okUnifyBody = #"{"success":"pending","correlationId":"c-1","authToken":"eyJa.b.c"}"#
    static let okPrefillBodies = [
        "/v3/start": #"{"next":{"v3-validate":"/v3/validate"},"authToken":"eyJa.b.c","correlationId":"c-1"}"#,
        "/v3/validate": #"{"success":true,"challengeMissing":true,"next":{"v3-challenge":"/v3/challenge"}}"#,
        "/v3/challenge": #"{"success":true,"next":{"v3-complete":"/v3/complete"},"individual":{"firstName":"A"}}"#,
        "/v3/complete": #"{"success":true,"next":{"done":"done"}}"#,
    ]

    private var steps: [Step]
    private(set) var apiRequests = 0
    private(set) var tokenRequests = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var released = false

    init(_ steps: [Step]) {
        self.steps = steps
    }

    func nextStep(path: String) -> Step {
        apiRequests += 1
        if !steps.isEmpty { return steps.removeFirst() }
        if let body = Self.okPrefillBodies[path] { return .respond(status: 200, body: body) }
        return .respond(status: 200, body: path.hasSuffix("/unify") ? Self.okUnifyBody : Self.okStatusBody)
    }

    func tokenRequested() -> Int {
        tokenRequests += 1
        return tokenRequests
    }

    func waitForRelease() async {
        if released { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        released = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }

    /// Serves the script live; `body` gets the base URL. Hanging requests are released before shutdown.
    func serve<T: Sendable>(_ body: @escaping @Sendable (String) async throws -> T) async throws -> T {
        let paths = Set(["/v3/unify", "/v3/unify-status", "/v3/unify-bind"] + Self.okPrefillBodies.keys)
        let answer: TestHTTPServer.Handler = { request in
            guard request.method == .POST else { return .init(status: .notFound) }
            if request.path == "/token" {
                let n = await self.tokenRequested()
                return Self.response(
                    200, nil, #"{"access_token":"eyJtoken\#(n)","token_type":"Bearer","expires_in":3600}"#)
            }
            guard paths.contains(request.path) else { return .init(status: .notFound) }
            switch await self.nextStep(path: request.path) {
            case .respond(let status, let retryAfter, let body):
                return Self.response(status, retryAfter, body)
            case .hang:
                await self.waitForRelease()
                return Self.response(503, nil, "")
            case .hangInBody:
                return .init(
                    status: .ok, headers: ["Content-Type": "application/json"],
                    body: .stream { writer in
                        try await writer.write(ByteBuffer(string: #"{"success":"#))
                        await self.waitForRelease()
                    })
            }
        }
        return try await TestHTTPServer.serve(answer) { port in
            do {
                let result = try await body("http://127.0.0.1:\(port)")
                await self.release()
                return result
            } catch {
                await self.release()
                throw error
            }
        }
    }

    static func response(_ status: Int, _ retryAfter: String?, _ body: String) -> TestHTTPServer.Response {
        var headers = HTTPHeaders()
        if let retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
        if !body.isEmpty {
            headers.add(name: "Content-Type", value: body.hasPrefix("{") ? "application/json" : "text/html")
        }
        return .init(
            status: HTTPResponseStatus(statusCode: status), headers: headers, body: .bytes(ByteBuffer(string: body)))
    }
}
