import Foundation
import Testing

/// `--confirm-on-phone`: the landing GET is safe (scanners and previews change nothing); the page's
/// POST counts as the tap, once; "Not me" ends the session.
@Suite("Confirm on phone", .timeLimit(.minutes(1)))
struct ConfirmModeTests {
    static let confirm: [String: [String]] = ["confirm-on-phone": ["on"], "integrator-name": ["Acme Bank"]]

    /// The landing URL the sandbox's Instant Link redirects to, without following it.
    private func landingURL(_ relay: TestRelay) async throws -> String {
        let prove = try await relay.request(.GET, try await relay.latestLink())
        #expect(prove.status == 302)
        return try #require(prove.header("Location"))
    }

    private func post(
        _ relay: TestRelay, _ url: String, choice: String, origin: String? = nil, fetchSite: String? = nil
    ) async throws -> HTTPAnswer {
        var headers = [("Content-Type", "application/x-www-form-urlencoded")]
        if let origin { headers.append(("Origin", origin)) }
        if let fetchSite { headers.append(("Sec-Fetch-Site", fetchSite)) }
        return try await relay.request(.POST, url, headers: headers, body: "choice=\(choice)")
    }

    @Test("Five GETs and a HEAD change nothing; the POST counts; a second POST does not")
    func scannersChangeNothing() async throws {
        try await TestRelay.run(flags: Self.confirm) { relay in
            let created = try await relay.createSession(extra: ",\"ipAddress\":\"198.51.100.23\"")
            let url = try await landingURL(relay)
            let sandbox = try #require(relay.relay.sandbox)
            for _ in 0..<5 {
                let page = try await relay.request(.GET, url)
                #expect(page.status == 200)
                #expect(page.body.contains("Is this you?"))
                #expect(page.body.contains("Acme Bank"))
                #expect(page.body.contains("198.51.100.23"), "where the desktop session started")
                #expect(page.body.contains("UTC"), "when it started")
                #expect(page.header("Cache-Control") == "no-store")
            }
            let head = try await relay.request(.HEAD, url)
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(try await relay.session(created.sessionId).events.map(\.type) == ["waiting"])
            #expect(await sandbox.callCount("unify-status") == 0, "no one asked Prove")

            // As a browser posts the page's own form: its `no-referrer` policy makes the Origin `null`.
            let confirmed = try await post(relay, url, choice: "confirm", origin: "null", fetchSite: "same-origin")
            #expect(confirmed.status == 303)
            #expect(confirmed.header("Location").map { url.hasSuffix($0) } == true)
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "tapped", "result"])
            #expect(events.last?.outcome == "verified")

            let again = try await post(relay, url, choice: "confirm")
            #expect(again.status == 303)
            #expect(try await relay.session(created.sessionId).events.count == 3, "a second POST adds nothing")
            let after = try await relay.request(.GET, url)
            #expect(after.status == 200)
            #expect(after.body.contains("already complete"))
        }
    }

    @Test("A second POST before Prove's result adds no event and asks Prove no more")
    func secondPostWhileTapped() async throws {
        try await TestRelay.run(flags: Self.confirm) { relay in
            let created = try await relay.createSession()
            // A landing URL of this session that Prove has not completed: Prove says pending.
            let url = created.finalTargetUrl + "?asc=true&authId=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
            #expect(try await post(relay, url, choice: "confirm").status == 303)
            #expect(try await post(relay, url, choice: "confirm").status == 303)
            let events = try await relay.session(created.sessionId).events
            #expect(events.map(\.type) == ["waiting", "tapped"])
            let page = try await relay.request(.GET, url)
            #expect(page.body.contains("we got your tap"))
        }
    }

    @Test("\"Not me\" cancels the session with reason rejected, which the backend and the desktop see")
    func notMe() async throws {
        try await TestRelay.run(flags: Self.confirm) { relay in
            let created = try await relay.createSession()
            let url = try await landingURL(relay)
            let rejected = try await post(relay, url, choice: "reject")
            #expect(rejected.status == 303)
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "cancelled"])
            let body = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)").body
            #expect(body.contains("\"state\":\"cancelled\""))
            #expect(body.contains("\"reason\":\"rejected\""))
            let page = try await relay.request(.GET, url)
            #expect(page.status == 200)
            #expect(page.body.contains("Cancelled"))
            #expect(try await post(relay, url, choice: "confirm").status == 303, "nothing left to confirm")
            #expect(try await relay.session(created.sessionId).events.count == 2)
        }
    }

    @Test("The integrator's cancel is told apart from the phone's")
    func integratorCancelReason() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let body = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").body
            #expect(body.contains("\"reason\":\"integrator\""))
        }
    }

    @Test("A POST from another site, an unknown choice or without confirm mode changes nothing")
    func refusedPosts() async throws {
        try await TestRelay.run(flags: Self.confirm) { relay in
            let created = try await relay.createSession()
            let url = try await landingURL(relay)
            #expect(try await post(relay, url, choice: "confirm", origin: "https://evil.example").status == 403)
            // A sandboxed frame on another site says `null` too, but cross-site.
            #expect(
                try await post(relay, url, choice: "confirm", origin: "null", fetchSite: "cross-site").status == 403)
            #expect(try await post(relay, url, choice: "confirm", origin: "null").status == 403)
            // A security event: counted and logged, without the address.
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_security_events_total{event=\"confirm_origin_refused\"} 3"))
            #expect(relay.logs.all.contains { $0.contains("Confirm form refused") && !$0.contains("127.0.0.1") })
            #expect(try await post(relay, url, choice: "maybe").status == 400)
            #expect(try await post(relay, url + "x", choice: "confirm").status == 400, "a bad authId")
            // A form past the 256 bytes the route reads: 413, refused from its head, with the page that says
            // to open the link again (not that the relay failed).
            let large = try await relay.request(
                .POST, url, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: "choice=confirm&pad=" + String(repeating: "x", count: 300))
            #expect(large.status == 413)
            #expect(large.body.contains("This link is not valid") && !large.body.contains("on our side"))
            #expect(try await relay.session(created.sessionId).events.map(\.type) == ["waiting"])
        }
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let url = try await landingURL(relay)
            let answer = try await post(relay, url, choice: "confirm")
            #expect(answer.status == 405)
            #expect(try await relay.session(created.sessionId).events.map(\.type) == ["waiting"])
        }
    }

    @Test("Without confirm mode a HEAD (a scanner's first request) does not count as the tap")
    func headIsSafeWithoutConfirmMode() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let url = try await landingURL(relay)
            let head = try await relay.request(.HEAD, url)
            #expect(head.status == 200)
            #expect(try await relay.session(created.sessionId).events.map(\.type) == ["waiting"])
        }
    }
}
