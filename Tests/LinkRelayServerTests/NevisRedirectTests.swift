import Foundation
import LinkRelaySupport
import LinkRelayTestSupport
import NIOCore
import Testing

@testable import LinkRelayServer

/// A relay whose Nevis answers its status question with a redirect to another origin, which would say
/// `succeeded`: the session is not verified by it, and nothing of the question reaches that origin.
@Suite("Nevis redirects", .timeLimit(.minutes(1)))
struct NevisRedirectTests {
    @Test("A Nevis status that redirects to an origin saying succeeded leaves the session waiting")
    func aRedirectedStatusVerifiesNothing() async throws {
        let statusToken = "st-SECRET-relay-0001"
        let thiefRequests = Locked(0)
        let statusRequests = Locked(0)
        // Told when the other origin is asked (the redirect was followed) or Nevis is asked a second time
        // (the relay took the first redirect as a failure and asks again, as for a 5xx).
        let (asked, askedAgain) = AsyncStream<Void>.makeStream()
        let thief: TestHTTPServer.Handler = { _ in
            thiefRequests.withLock { $0 += 1 }
            askedAgain.yield()
            return .init(
                status: .ok, headers: ["Content-Type": "application/json"],
                body: .bytes(ByteBuffer(string: #"{"transactionId":"tx-1","status":"succeeded","userId":"u-1"}"#)))
        }
        try await TestHTTPServer.serve(thief) { thiefPort in
            let nevis: TestHTTPServer.Handler = { request in
                guard request.path == "/api/v1/status" else {
                    return .init(
                        status: .ok, headers: ["Content-Type": "application/json"],
                        body: .bytes(
                            ByteBuffer(string: #"{"transactionId":"tx-1","statusToken":"\#(statusToken)"}"#)))
                }
                if statusRequests.withLock({ count in
                    count += 1
                    return count
                }) >= 2 {
                    askedAgain.yield()
                }
                return TestHTTPServer.redirect(307, to: "http://localhost:\(thiefPort)/api/v1/status")
            }
            try await TestHTTPServer.serve(nevis) { nevisPort in
                try await TestRelay.run(
                    flags: ["nevis": ["http://127.0.0.1:\(nevisPort)"]], environment: ["NEVIS_ACCESS_KEY": "ak-relay"]
                ) { relay in
                    let created = try await relay.createNevis(#"{"flow":"nevis","username":"dave"}"#)
                    var waits = asked.makeAsyncIterator()
                    _ = await waits.next()
                    #expect(thiefRequests.value == 0, "the status question went to the redirect's target")
                    let session = try await relay.nevisSession(created.sessionId)
                    #expect(session.state != "verified")
                    #expect(session.result == nil)
                    let lines = relay.logs.all.filter { $0.contains("answered with a redirect") }
                    #expect(lines.count == 1 && lines.allSatisfy { $0.contains(#""provider.host": 127.0.0.1"#) })
                    #expect(!relay.logs.all.contains { $0.contains("localhost") || $0.contains(statusToken) })
                }
            }
        }
    }
}
