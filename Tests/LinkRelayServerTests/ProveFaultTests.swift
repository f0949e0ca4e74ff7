import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import ProveSandbox
import Testing

@testable import LinkRelayServer

/// Prove misbehaving, through the sandbox's fault injection: no session is lost, creates fail with a
/// clear 503, the breaker stops hammering a dead Prove, and a tapped session keeps being verified
/// until its hold ends; only then does it fail, with the reason.
@Suite("Prove faults", .timeLimit(.minutes(2)))
struct ProveFaultTests {
    /// A breaker that stays closed, for the tests that look at one call's retries.
    static let noBreaker: [String: [String]] = ["breaker-failures": ["1000"]]

    @Test(
        "A create while Prove fails answers 503 and stores nothing",
        arguments: [
            ("unify:error=1,status=503", 4),  // retried: Prove cannot have started a flow
            ("unify:error=1,status=500", 1),  // not retried: it may have sent the SMS
            ("unify:malformed", 1),
            ("unify:drop", 1),
            ("token:error=1,status=503", 0),
        ])
    func createFails(_ spec: String, _ unifyCalls: Int) async throws {
        try await TestRelay.run(socket: true, flags: Self.noBreaker.merging(["sandbox-fault": [spec]]) { $1 }) {
            relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: "{\"phoneNumber\":\"2001004014\"}")
            #expect(answer.status == 503, "\(spec): \(answer.body)")
            #expect(answer.header("Content-Type") == "application/problem+json")
            let sandbox = try #require(relay.relay.sandbox)
            #expect(await sandbox.callCount("unify") == unifyCalls)
            #expect(try await relay.relay.store.activeSessions().isEmpty)
        }
    }

    @Test("A create while Prove hangs answers 503 within the session's hold")
    func createHangs() async throws {
        try await TestRelay.run(socket: true, flags: Self.noBreaker.merging(["sandbox-fault": ["unify:hang"]]) { $1 }) {
            relay in
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: "{\"phoneNumber\":\"2001004014\",\"holdSeconds\":2}")
            #expect(answer.status == 503)
            await relay.relay.sandbox?.releaseHangs()
        }
    }

    @Test("Prove's 429 with Retry-After is waited out, and slow answers are only slow")
    func slowAndThrottled() async throws {
        try await TestRelay.run(
            socket: true,
            flags: ["sandbox-fault": ["unify:retry-after=1,error=0.5", "unify-status:latency=200ms"]]
        ) { relay in
            // Every second unify is refused with 429: the first create passes, the second is retried.
            _ = try await relay.createSession()
            let created = try await relay.createSession()
            #expect(await relay.relay.sandbox?.callCount("unify") == 3, "one 429, then the flow started")
            _ = try await relay.tap()
            #expect(try await relay.pollUntilDone(created).last?.outcome == "verified")
        }
    }

    @Test("An open breaker fails creates at once without calling Prove; after the cooldown one probe closes it")
    func breaker() async throws {
        let clock = ManualClock()
        try await TestRelay.run(
            socket: true,
            clock: clock,
            flags: [
                "breaker-failures": ["2"], "breaker-cooldown": ["10"], "sandbox-fault": ["unify:error=1,status=503"],
            ]
        ) { relay in
            let sandbox = try #require(relay.relay.sandbox)
            let create = "{\"phoneNumber\":\"2001004014\"}"
            #expect(try await relay.api(.POST, "/v1/sessions", body: create).status == 503)
            #expect(try await relay.api(.POST, "/v1/sessions", body: create).status == 503)
            let callsWhenOpened = await sandbox.callCount("unify")
            let open = try await relay.api(.POST, "/v1/sessions", body: create)
            #expect(open.status == 503)
            #expect(open.body.contains("circuit breaker open"))
            #expect(open.header("Retry-After") != nil)
            #expect(await sandbox.callCount("unify") == callsWhenOpened, "fail fast: Prove was not called")
            #expect(try await relay.request(.GET, "/metrics").body.contains("linkrelay_prove_breaker_open 1"))

            await sandbox.clearFaults()
            clock.advance(by: 10)
            _ = try await relay.createSession()
            #expect(try await relay.request(.GET, "/metrics").body.contains("linkrelay_prove_breaker_open 0"))
            #expect(relay.logs.all.contains { $0.contains("Circuit breaker around Prove changed") })
        }
    }

    @Test(
        "A tapped session whose result Prove cannot give fails at the end of its hold, with the reason",
        arguments: [
            "unify-status:error=1,status=500", "unify-status:retry-after=1", "unify-status:malformed",
            "unify-status:drop", "unify-status:hang",
        ])
    func verificationFailsAtHoldEnd(_ spec: String) async throws {
        let clock = ManualClock()
        try await TestRelay.run(socket: true, clock: clock, flags: Self.noBreaker) { relay in
            let sandbox = try #require(relay.relay.sandbox)
            let created = try await relay.createSession(extra: ",\"holdSeconds\":30")
            let (endpoint, fault) = try ProveSandbox.parseFault(spec)
            try await sandbox.setFault(fault, for: endpoint)
            // 3 s of the hold are left: each call to Prove is bounded by that, so a hang ends soon.
            clock.advance(by: 27)
            await clock.waitForSleepers(2)  // the expiry sweeper and the channel heartbeat
            _ = try await relay.tap()
            // The verifier tried (with its retries), failed, and now waits on the clock to try again.
            await clock.waitForSleepers(3)
            #expect(try await relay.session(created.sessionId).state == "tapped", "not failed before the hold ends")
            await sandbox.releaseHangs()
            clock.advance(by: 3)
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "tapped", "result"])
            #expect(events.last?.outcome == "failed")
            let session = try await relay.session(created.sessionId)
            #expect(session.result?.outcome == "failed")
            let body = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)").body
            #expect(body.contains("No result from Prove before the hold ended: Prove unavailable"), "\(body)")
        }
    }

    @Test("When Prove recovers before the hold ends, the verifier's next try delivers the result")
    func verificationRecovers() async throws {
        let clock = ManualClock()
        try await TestRelay.run(socket: true, clock: clock, flags: Self.noBreaker) { relay in
            let sandbox = try #require(relay.relay.sandbox)
            let created = try await relay.createSession(extra: ",\"holdSeconds\":60")
            try await sandbox.setFault(.error(rate: 1, status: 503), for: "unify-status")
            await clock.waitForSleepers(2)
            _ = try await relay.tap()
            await clock.waitForSleepers(3)
            await sandbox.clearFaults()
            clock.advance(by: 2)
            #expect(try await relay.pollUntilDone(created).last?.outcome == "verified")
        }
    }
}
