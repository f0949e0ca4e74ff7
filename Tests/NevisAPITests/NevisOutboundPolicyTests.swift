import Foundation
import LinkRelaySupport
import LinkRelayTestSupport
import NIOCore
import NevisAPI
import ProveAPI
import Testing

/// The outbound policy on both Nevis backends' calls, against fake upstreams on loopback: a Nevis that
/// redirects (to a second server that would answer `succeeded`), and answers too large, plain or inflating.
@Suite(.timeLimit(.minutes(1))) struct NevisOutboundPolicyTests {
    static let succeeded =
        #"{"transactionId":"tx-1","status":"succeeded","createdAt":"x","lastUpdatedAt":"y","userId":"u-1"}"#

    /// A second origin that answers every call as Nevis would, an operation `succeeded`: a client that
    /// followed a redirect there would take its word.
    final class Thief: Sendable {
        let requests = Locked<[String]>([])

        var handler: TestHTTPServer.Handler {
            { [requests] request in
                requests.withLock {
                    $0.append("\(request.method) \(request.path) \(request.headers) \(String(buffer: request.body))")
                }
                let body =
                    request.path.hasSuffix("/approval")
                    ? Fixture.approvalBody
                    : request.path.hasSuffix("/dispatch/authentication") ? Fixture.dispatchBody() : succeeded
                return .init(
                    status: .ok, headers: ["Content-Type": "application/json"], body: .bytes(ByteBuffer(string: body)))
            }
        }
    }

    /// Serves a `Thief` and a Nevis whose handler `nevis` makes from the thief's base URL, named `localhost`
    /// (Nevis is `127.0.0.1`), so that a log can be searched for it; `body` gets Nevis's base URL.
    func withRedirectingNevis<T: Sendable>(
        _ thief: Thief,
        nevis: @escaping @Sendable (_ thiefBase: String) -> TestHTTPServer.Handler,
        _ body: @escaping @Sendable (_ nevisBase: String) async throws -> T
    ) async throws -> T {
        try await TestHTTPServer.serve(thief.handler) { thiefPort in
            try await TestHTTPServer.serve(nevis("http://localhost:\(thiefPort)")) { nevisPort in
                try await body("http://127.0.0.1:\(nevisPort)")
            }
        }
    }

    /// "pending", "succeeded", … for a status, "started" for a start, "unavailable", or the error.
    func outcome(_ call: () async throws -> Any) async -> String {
        do {
            switch try await call() {
            case let status as NevisStatus: return "\(status.progress)"
            default: return "started"
            }
        } catch NevisClientError.unavailable {
            return "unavailable"
        } catch {
            return "\(error)"
        }
    }

    // MARK: Redirects

    @Test(arguments: [301, 302, 303, 307, 308])
    func anAuthCloudStatusThatRedirectsIsNotSucceeded(status: Int) async throws {
        let thief = Thief()
        let observer = ObserverRecorder()
        let requests = Locked(0)
        let result = try await withRedirectingNevis(thief) { thiefBase in
            { request in
                requests.withLock { $0 += 1 }
                return TestHTTPServer.redirect(status, to: thiefBase + request.path)
            }
        } _: { nevisBase in
            try await withProviderHTTPClient { http in
                await outcome {
                    try await authCloudClient(nevisBase, http, observer: observer)
                        .status(Fixture.statusToken, deadline: patientDeadline())
                }
            }
        }
        // The other origin's `succeeded` was never asked for: the status token went nowhere else.
        #expect(result == "unavailable")
        #expect(thief.requests.value == [])
        #expect(requests.value == 1)
        #expect(observer.calls.value == ["status \(status)"])
    }

    @Test func anAuthCloudApprovalThatRedirectsSendsNeitherTheAccessKeyNorTheMessageOn() async throws {
        let thief = Thief()
        let observer = ObserverRecorder()
        let result = try await withRedirectingNevis(thief) { thiefBase in
            { request in TestHTTPServer.redirect(308, to: thiefBase + request.path) }
        } _: { nevisBase in
            try await withProviderHTTPClient { http in
                await outcome {
                    try await authCloudClient(nevisBase, http, observer: observer)
                        .start(
                            NevisApproval(username: "alice", message: Fixture.message, channel: .app),
                            deadline: patientDeadline())
                }
            }
        }
        #expect(result == "unavailable")
        #expect(thief.requests.value == [])
        #expect(observer.calls.value == ["approval 308"])
    }

    @Test func nevisFIDOsDispatchAndStatusThatRedirectSendNothingOn() async throws {
        let thief = Thief()
        let observer = ObserverRecorder()
        let results = try await withRedirectingNevis(thief) { thiefBase in
            { request in TestHTTPServer.redirect(307, to: thiefBase + request.path) }
        } _: { nevisBase in
            try await withProviderHTTPClient { http in
                let client = try fidoClient(nevisBase, http, observer: observer)
                let started = await outcome {
                    try await client.start(
                        NevisApproval(username: "alice", channel: .app), deadline: patientDeadline())
                }
                let status = await outcome {
                    try await client.status(Fixture.sessionId, deadline: patientDeadline())
                }
                return [started, status]
            }
        }
        #expect(results == ["unavailable", "unavailable"])
        #expect(thief.requests.value == [])
        #expect(observer.calls.value == ["dispatch 307", "fido-status 307"])
    }

    @Test func aRedirectIsLoggedAtMostOnceEvery10SecondsNamingTheHostOnly() async throws {
        let thief = Thief()
        let capture = LogCapture()
        let offset = Locked<Duration>(.zero)
        // Time moves only when the test moves it: a loaded machine's slow answers cannot end the 10 s.
        let start = ContinuousClock.now
        let now: @Sendable () -> ContinuousClock.Instant = { start + offset.value }
        try await withRedirectingNevis(thief) { thiefBase in
            { _ in TestHTTPServer.redirect(307, to: thiefBase + "/steal/here?query=QUERY-SECRET") }
        } _: { nevisBase in
            try await withProviderHTTPClient { http in
                let client = try AuthCloudClient(
                    baseURL: nevisBase, accessKey: Fixture.accessKey, httpClient: http,
                    retry: retryPolicy(SleepRecorder()), logger: capture.logger(), now: now)
                func ask() async {
                    _ = await outcome { try await client.status(Fixture.statusToken, deadline: now() + .seconds(120)) }
                }
                await ask()
                await ask()
                #expect(capture.all.filter { $0.contains("answered with a redirect") }.count == 1)
                offset.withLock { $0 += .seconds(10) }
                await ask()
            }
        }
        let lines = capture.all.filter { $0.contains("answered with a redirect") }
        #expect(lines.count == 2)
        #expect(
            lines.allSatisfy { $0.contains(#""provider.host": 127.0.0.1"#) && $0.contains(#""provider.status": 307"#) })
        #expect(lines.last?.contains(#""provider.answers": 2"#) == true)
        for line in capture.all {
            for secret in [
                "localhost", "/steal", "QUERY-SECRET", "/api/v1", Fixture.statusToken, Fixture.accessKey, "Location",
            ] {
                #expect(!line.contains(secret), "a log line carries \(secret): \(line)")
            }
        }
        #expect(thief.requests.value == [])
    }

    // MARK: Size

    /// An Auth Cloud whose status answers `answer`: the call's outcome and the requests Nevis saw.
    func statusCall(answering answer: @escaping @Sendable () -> TestHTTPServer.Response, observer: ObserverRecorder)
        async throws -> (outcome: String, requests: Int)
    {
        let requests = Locked(0)
        let handler: TestHTTPServer.Handler = { _ in
            requests.withLock { $0 += 1 }
            return answer()
        }
        let result = try await TestHTTPServer.serve(handler) { port in
            try await withProviderHTTPClient { http in
                await outcome {
                    try await authCloudClient("http://127.0.0.1:\(port)", http, observer: observer)
                        .status(Fixture.statusToken, deadline: patientDeadline())
                }
            }
        }
        return (result, requests.value)
    }

    static func padded(to size: Int) -> ByteBuffer {
        ByteBuffer(string: String(repeating: " ", count: size - succeeded.utf8.count) + succeeded)
    }

    @Test func aStatusOf1MiBIsTakenAndOneOver1MiBFailsOnceAndIsNotRetried() async throws {
        let (taken, _) = try await statusCall(
            answering: { .init(status: .ok, body: .bytes(Self.padded(to: 1 << 20))) }, observer: ObserverRecorder())
        #expect(taken == "succeeded")

        let observer = ObserverRecorder()
        let (result, requests) = try await statusCall(
            answering: { .init(status: .ok, body: .bytes(Self.padded(to: (1 << 20) + 1))) }, observer: observer)
        #expect(result == "unavailable")
        #expect(requests == 1)
        #expect(observer.calls.value == ["status error"])
    }

    @Test func aGzipStatusIsInflatedUpTo1MiBAndFailsPastIt() async throws {
        let (small, _) = try await statusCall(
            answering: { TestHTTPServer.gzipAnswer(TestHTTPServer.Gzipped.halfMiB) }, observer: ObserverRecorder())
        #expect(small == "succeeded")

        // About 1 KiB on the wire, over 1 MiB inflated: `succeeded` inside is never read.
        let observer = ObserverRecorder()
        let (bomb, requests) = try await statusCall(
            answering: { TestHTTPServer.gzipAnswer(TestHTTPServer.Gzipped.overOneMiB) }, observer: observer)
        #expect(bomb == "unavailable")
        #expect(requests == 1)
        #expect(observer.calls.value == ["status error"])
    }
}
