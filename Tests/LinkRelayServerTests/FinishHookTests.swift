import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

/// Prove's client SDK in the loop (API.md v1.1): the finish hook, and the last question at the hold's
/// end, for taps whose redirect never reached the relay (the sandbox's `redirect=0`).
@Suite("Finish hook and the last question", .timeLimit(.minutes(1)))
struct FinishHookTests {
    func finish(
        _ relay: TestRelay, _ created: Created, body: String? = nil, token: String? = nil,
        headers: [(String, String)] = []
    ) async throws -> HTTPAnswer {
        try await relay.request(
            .POST, "/v1/sessions/\(created.sessionId)/finish",
            headers: [
                ("Authorization", "Bearer \(token ?? created.channel.token)"), ("Content-Type", "application/json"),
            ]
                + headers, body: body)
    }

    /// Opens the session's Instant Link as a phone whose browser loses the redirect.
    func tapWithoutRedirect(_ relay: TestRelay) async throws {
        let page = try await relay.request(.GET, try await relay.latestLink() + "?redirect=0")
        #expect(page.status == 200)
    }

    @Test("A tap whose redirect was lost: the page's finish asks Prove, and the desktop gets verified without tapped")
    func finishAfterLostRedirect() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            try await tapWithoutRedirect(relay)
            let answer = try await finish(relay, created, headers: [("Origin", relay.base)])
            #expect(answer.status == 202)
            #expect(answer.body.contains("\"sessionId\":\"\(created.sessionId)\""))
            #expect(answer.header("Access-Control-Allow-Origin") == relay.base)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "result"])
            #expect(try await relay.session(created.sessionId).state == "verified")
            // Once ended, the same call answers 200 with the final state.
            let again = try await finish(relay, created)
            #expect(again.status == 200)
            #expect(again.body.contains("\"state\":\"verified\""))
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_finishes_total 1"))
        }
    }

    @Test("The backend may finish with the API key and the redirect URL the app received; its authId is kept")
    func finishWithRedirectURL() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let redirect = try #require(try await relay.request(.GET, try await relay.latestLink()).header("Location"))
            let body = #"{"redirectUrl":"\#(redirect)"}"#
            #expect(try await finish(relay, created, body: body, token: TestRelay.apiKey).status == 202)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "result"])
            // The app's URL, landed after all, is one the session has seen: the final page.
            #expect(try await relay.request(.GET, redirect).status == 200)
        }
    }

    @Test("Bad finishes change nothing: each gets its own answer")
    func badFinishes() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let other = try await relay.createSession()
            let otherRedirect = other.finalTargetUrl + "?asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c3301"
            let cases: [(String?, String?, [(String, String)], Int)] = [
                (#"{"redirectUrl":"\#(otherRedirect)"}"#, nil, [], 400),
                (#"{"redirectUrl":"\#(created.finalTargetUrl)?asc=maybe&authId=x"}"#, nil, [], 400),
                (#"{"redirectUrl":7}"#, nil, [], 400),
                (#"{"other":"field"}"#, nil, [], 400),
                ("not json", nil, [], 400),
                (nil, other.channel.token, [], 404),
                (nil, nil, [("Origin", "https://evil.example")], 403),
                (String(repeating: " ", count: 3000), nil, [], 413),
            ]
            for (body, token, headers, status) in cases {
                let answer = try await finish(relay, created, body: body, token: token, headers: headers)
                #expect(answer.status == status, "\(body ?? "") → \(answer.status) \(answer.body)")
            }
            let unknown = try await relay.request(
                .POST, "/v1/sessions/ses_unknown/finish", headers: [("Authorization", "Bearer \(TestRelay.apiKey)")])
            #expect(unknown.status == 404)
            #expect(try await relay.session(created.sessionId).events.map(\.type) == ["waiting"])
        }
    }

    @Test("Finishes are limited per session: past the limit, a bare 429 that changes nothing")
    func finishLimit() async throws {
        try await TestRelay.run(flags: ["limit-finish-per-session": ["2"]]) { relay in
            let created = try await relay.createSession()
            let other = try await relay.createSession()
            for _ in 0..<2 { #expect(try await finish(relay, created).status == 202) }
            let refused = try await finish(relay, created)
            #expect(refused.status == 429)
            #expect(refused.body.isEmpty)
            #expect(try await finish(relay, other).status == 202, "another session has its own budget")
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains(#"linkrelay_limit_trips_total{limit="finish_per_session"} 1"#))
        }
    }

    @Test("A session that never landed is asked about as its hold ends: a lost redirect still ends verified")
    func lastQuestionAtHoldEnd() async throws {
        let clock = ManualClock()
        try await TestRelay.run(clock: clock) { relay in
            let untouched = try await relay.createSession()
            let tapped = try await relay.createSession()
            try await tapWithoutRedirect(relay)
            clock.advance(by: 180)
            #expect(try await relay.pollUntilDone(tapped).map(\.type) == ["waiting", "result"])
            #expect(try await relay.session(tapped.sessionId).state == "verified")
            #expect(try await relay.pollUntilDone(untouched).map(\.type) == ["waiting", "expired"])
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_last_questions_total{outcome=\"verified\"} 1"))
            #expect(metrics.contains("linkrelay_last_questions_total{outcome=\"expired\"} 1"))
        }
    }
}
