import Foundation
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import NIOCore
import ProveAPI
import Testing

/// The outbound policy on Prove's calls, against fake upstreams on loopback: a Prove that redirects (to a
/// second server that would answer as Prove does), and answers too large, plain or inflating.
@Suite(.timeLimit(.minutes(1))) struct ProveOutboundPolicyTests {
    static let secret = "client-SECRET-0001"

    /// A second origin that answers as Prove would: a client that followed a redirect there would succeed.
    final class Thief: Sendable {
        let requests = Locked<[String]>([])

        var handler: TestHTTPServer.Handler {
            { [requests] request in
                requests.withLock { $0.append("\(request.method) \(request.path) \(String(buffer: request.body))") }
                let body =
                    request.path.hasSuffix("/token")
                    ? #"{"access_token":"eyJthief","token_type":"Bearer","expires_in":3600}"#
                    : ScriptedProve.okStatusBody
                return ScriptedProve.response(200, nil, body)
            }
        }
    }

    /// Serves a `Thief` and a Prove whose handler `prove` makes from the thief's base URL, named
    /// `localhost` (Prove is `127.0.0.1`), so that a log can be searched for it; `body` gets Prove's base URL.
    func withRedirectingProve<T: Sendable>(
        _ thief: Thief,
        prove: @escaping @Sendable (_ thiefBase: String) -> TestHTTPServer.Handler,
        _ body: @escaping @Sendable (_ proveBase: String) async throws -> T
    ) async throws -> T {
        try await TestHTTPServer.serve(thief.handler) { thiefPort in
            try await TestHTTPServer.serve(prove("http://localhost:\(thiefPort)")) { provePort in
                try await body("http://127.0.0.1:\(provePort)")
            }
        }
    }

    func makeClient(
        _ baseURL: String, _ http: ProviderHTTPClient, observer: ObserverRecorder,
        logger: Logger = quietLogger(), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) -> HTTPProveClient {
        HTTPProveClient(
            baseURL: baseURL, credentials: .init(clientID: "client-id", clientSecret: Self.secret), httpClient: http,
            retry: RetryPolicy(attemptTimeout: .seconds(patientSeconds), sleep: SleepRecorder().sleep),
            observer: observer, logger: logger, now: now)
    }

    /// "answered", "unavailable" or the error.
    func outcome(_ call: () async throws -> some Any) async -> String {
        do {
            _ = try await call()
            return "answered"
        } catch ProveClientError.unavailable {
            return "unavailable"
        } catch {
            return "\(error)"
        }
    }

    // MARK: Redirects

    @Test(arguments: [301, 302, 303, 307, 308])
    func aRedirectFromTheTokenEndpointSendsNothingToItsTarget(status: Int) async throws {
        let thief = Thief()
        let observer = ObserverRecorder()
        let tokenRequests = Locked(0)
        let result = try await withRedirectingProve(thief) { thiefBase in
            { request in
                guard request.path == "/token" else {
                    return ScriptedProve.response(200, nil, ScriptedProve.okStatusBody)
                }
                tokenRequests.withLock { $0 += 1 }
                return TestHTTPServer.redirect(status, to: thiefBase + "/token")
            }
        } _: { proveBase in
            try await withProviderHTTPClient { http in
                await outcome {
                    try await makeClient(proveBase, http, observer: observer)
                        .unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
                }
            }
        }
        // Nothing of the request (no client_id, no client_secret, no request at all) reached the other origin.
        #expect(thief.requests.value == [])
        // The provider's failure, as a 5xx is (the breaker counts `unavailable`), asked once, counted with
        // its status.
        #expect(result == "unavailable")
        #expect(tokenRequests.value == 1)
        #expect(observer.calls.value == ["token \(status)"])
    }

    @Test func aRedirectFromAnAPICallSendsNeitherTheBearerNorTheBodyOnAndIsNotRetried() async throws {
        let thief = Thief()
        let observer = ObserverRecorder()
        let apiRequests = Locked(0)
        let results = try await withRedirectingProve(thief) { thiefBase in
            { request in
                if request.path == "/token" {
                    return ScriptedProve.response(
                        200, nil, #"{"access_token":"eyJtoken","token_type":"Bearer","expires_in":3600}"#)
                }
                apiRequests.withLock { $0 += 1 }
                return TestHTTPServer.redirect(request.path == "/v3/unify" ? 308 : 307, to: thiefBase + request.path)
            }
        } _: { proveBase in
            try await withProviderHTTPClient { http in
                let client = makeClient(proveBase, http, observer: observer)
                // unify sends an SMS; unify-status is idempotent, and a redirect is not retried either.
                let unify = await outcome {
                    try await client.unify(
                        .init(possessionType: "desktop", clientRequestId: "r-1", phoneNumber: "2001004014"),
                        deadline: deadline())
                }
                let status = await outcome {
                    try await client.unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
                }
                return [unify, status]
            }
        }
        #expect(thief.requests.value == [])
        #expect(results == ["unavailable", "unavailable"])
        #expect(apiRequests.value == 2)
        #expect(observer.calls.value == ["token 200", "unify 308", "unify-status 307"])
    }

    @Test func aRedirectIsLoggedAtMostOnceEvery10SecondsNamingTheHostOnly() async throws {
        let thief = Thief()
        let capture = LogCapture()
        // Time moves only when the test moves it: a loaded machine's slow answers cannot end the 10 s.
        let clock = OffsetClock(frozen: true)
        try await withRedirectingProve(thief) { thiefBase in
            { _ in TestHTTPServer.redirect(307, to: thiefBase + "/steal/here?query=QUERY-SECRET") }
        } _: { proveBase in
            try await withProviderHTTPClient { http in
                let client = makeClient(
                    proveBase, http, observer: ObserverRecorder(), logger: capture.logger(), now: clock.now)
                func ask() async {
                    _ = await outcome {
                        try await client.unifyStatus(.init(correlationId: "c-1"), deadline: deadline(now: clock.now()))
                    }
                }
                await ask()
                await ask()
                clock.offset.withLock { $0 += .seconds(9) }
                await ask()
                #expect(capture.all.filter { $0.contains("answered with a redirect") }.count == 1)
                clock.offset.withLock { $0 += .seconds(1) }
                await ask()
            }
        }
        let lines = capture.all.filter { $0.contains("answered with a redirect") }
        #expect(lines.count == 2)
        #expect(
            lines.allSatisfy { $0.contains(#""provider.host": 127.0.0.1"#) && $0.contains(#""provider.status": 307"#) })
        // The second line stands for the two answers that got none and its own.
        #expect(lines.last?.contains(#""provider.answers": 3"#) == true)
        for line in capture.all {
            for secret in ["localhost", "/steal", "QUERY-SECRET", "/token", Self.secret, "client-id", "Location"] {
                #expect(!line.contains(secret), "a log line carries \(secret): \(line)")
            }
        }
        #expect(thief.requests.value == [])
    }

    // MARK: Size

    /// Prove with a working `/token` whose unify-status answers `answer`; returns the call's outcome and the
    /// unify-status requests Prove saw.
    func statusCall(answering answer: @escaping @Sendable () -> TestHTTPServer.Response, observer: ObserverRecorder)
        async throws -> (outcome: String, requests: Int)
    {
        let requests = Locked(0)
        let handler: TestHTTPServer.Handler = { request in
            if request.path == "/token" {
                return ScriptedProve.response(
                    200, nil, #"{"access_token":"eyJtoken","token_type":"Bearer","expires_in":3600}"#)
            }
            requests.withLock { $0 += 1 }
            return answer()
        }
        let result = try await TestHTTPServer.serve(handler) { port in
            try await withProviderHTTPClient { http in
                await outcome {
                    try await makeClient("http://127.0.0.1:\(port)", http, observer: observer)
                        .unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
                }
            }
        }
        return (result, requests.value)
    }

    /// unify-status's answer padded with leading spaces to `size` bytes.
    static func padded(to size: Int) -> ByteBuffer {
        let json = ScriptedProve.okStatusBody
        return ByteBuffer(string: String(repeating: " ", count: size - json.utf8.count) + json)
    }

    @Test func anAnswerOf1MiBIsTaken() async throws {
        let observer = ObserverRecorder()
        let (result, _) = try await statusCall(
            answering: {
                .init(
                    status: .ok, headers: ["Content-Type": "application/json"], body: .bytes(Self.padded(to: 1 << 20)))
            },
            observer: observer)
        #expect(result == "answered")
    }

    @Test func anAnswerOver1MiBDeclaredOrStreamedFailsOnceAndIsNotRetried() async throws {
        let declared = ObserverRecorder()
        let (declaredResult, declaredRequests) = try await statusCall(
            answering: {
                .init(
                    status: .ok, headers: ["Content-Type": "application/json"],
                    body: .bytes(Self.padded(to: (1 << 20) + 1)))
            }, observer: declared)
        #expect(declaredResult == "unavailable")
        #expect(declaredRequests == 1)
        #expect(declared.calls.value == ["token 200", "unify-status error"])

        // Chunked, no length declared: the bytes collected reach the cap.
        let streamed = ObserverRecorder()
        let (streamedResult, streamedRequests) = try await statusCall(
            answering: {
                .init(
                    status: .ok, headers: ["Content-Type": "application/json"],
                    body: .stream { writer in
                        for _ in 0..<17 {
                            try await writer.write(ByteBuffer(repeating: UInt8(ascii: " "), count: 64 << 10))
                        }
                        try await writer.write(ByteBuffer(string: ScriptedProve.okStatusBody))
                    })
            }, observer: streamed)
        #expect(streamedResult == "unavailable")
        #expect(streamedRequests == 1)
        #expect(streamed.calls.value == ["token 200", "unify-status error"])
    }

    @Test func aGzipAnswerIsInflatedUpTo1MiBAndFailsPastIt() async throws {
        let small = ObserverRecorder()
        let (smallResult, _) = try await statusCall(
            answering: { TestHTTPServer.gzipAnswer(TestHTTPServer.Gzipped.halfMiB) }, observer: small)
        #expect(smallResult == "answered")

        // About 1 KiB on the wire, over 1 MiB inflated.
        let bomb = ObserverRecorder()
        let (bombResult, bombRequests) = try await statusCall(
            answering: { TestHTTPServer.gzipAnswer(TestHTTPServer.Gzipped.overOneMiB) }, observer: bomb)
        #expect(bombResult == "unavailable")
        #expect(bombRequests == 1)
        #expect(bomb.calls.value == ["token 200", "unify-status error"])
    }
}
