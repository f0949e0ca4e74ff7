import AsyncHTTPClient
import Foundation
import Testing

@testable import LinkRelayServer

/// Prometheus text, read one sample at a time.
struct OpsMetricsText {
    let text: String

    /// The value of the sample named exactly `name` (with its labels as written, e.g. `x{a="b"}`).
    func value(_ sample: String) -> Double? {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), line[..<space] == sample else { continue }
            return Double(line[line.index(after: space)...])
        }
        return nil
    }

    /// Every sample line of `name` whose labels include all of `labels`.
    func samples(_ name: String, labels: [String: String]) -> [Substring] {
        text.split(separator: "\n").filter { line in
            line.hasPrefix(name + "{") && labels.allSatisfy { line.contains("\($0.key)=\"\($0.value)\"") }
        }
    }
}

extension TestRelay {
    fileprivate func metrics() async throws -> OpsMetricsText {
        OpsMetricsText(text: try await request(.GET, "/metrics").body)
    }

    /// Reads `/metrics` until `ready` holds: a counter may be bumped just after the event that a channel
    /// already delivered. Bounded, and without sleeping.
    fileprivate func metrics(until ready: (OpsMetricsText) -> Bool) async throws -> OpsMetricsText {
        var metrics = try await metrics()
        for _ in 0..<200 where !ready(metrics) {
            await Task.yield()
            metrics = try await self.metrics()
        }
        return metrics
    }
}

/// The headers every HTML page must have (API.md "Phone landing"), and no third-party URL in it.
private func expectSafePage(
    _ answer: HTTPAnswer, base: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(answer.header("Content-Type")?.hasPrefix("text/html") == true, sourceLocation: sourceLocation)
    #expect(answer.header("Cache-Control") == "no-store", sourceLocation: sourceLocation)
    #expect(answer.header("Referrer-Policy") == "no-referrer", sourceLocation: sourceLocation)
    #expect(answer.header("X-Content-Type-Options") == "nosniff", sourceLocation: sourceLocation)
    let csp = answer.header("Content-Security-Policy") ?? ""
    #expect(csp.contains("default-src 'none'"), sourceLocation: sourceLocation)
    #expect(csp.contains("frame-ancestors 'none'"), sourceLocation: sourceLocation)
    let urls = answer.body.matches(of: /https?:\/\/[^\s"'<>)]+/).map { String($0.output) }
    let foreign = urls.filter { $0 != base && !$0.hasPrefix(base + "/") && !$0.hasPrefix(base + "?") }
    #expect(foreign.isEmpty, "third-party URLs: \(foreign)", sourceLocation: sourceLocation)
    let external = answer.body.matches(of: /(?:src|href)\s*=\s*["']?\/\//).count
    #expect(external == 0, "protocol-relative URLs", sourceLocation: sourceLocation)
}

@Suite("Operations and pages", .timeLimit(.minutes(1)))
struct OpsTests {
    @Test(
        "/healthz and /readyz are 200 with Server and Date, to GET and to HEAD (without a body)",
        arguments: ["/healthz", "/readyz"])
    func health(path: String) async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, path)
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type")?.hasPrefix("text/plain") == true)
            #expect(answer.header("Server") == "LinkRelay")
            #expect(answer.header("Date")?.hasSuffix(" GMT") == true)
            let head = try await relay.request(.HEAD, path)
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
        }
    }

    @Test("--metrics-listen serves /metrics on its own address, and the public one no longer does")
    func metricsOnTheirOwnListener() async throws {
        let port = try PersistenceTests.freePort()
        try await TestRelay.run(socket: true, flags: ["metrics-listen": ["127.0.0.1:\(port)"]]) { relay in
            #expect(try await relay.request(.GET, "/metrics").status == 404)
            let metrics = try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.body.contains("linkrelay_sessions_created_total"))
            #expect(try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/readyz").status == 200)
            #expect(try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/v1/sessions/x").status == 404)
        }
    }

    @Test("/metrics is Prometheus text with the relay's metrics")
    func metricsNames() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, "/metrics")
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type")?.hasPrefix("text/plain") == true)
            #expect(answer.header("Content-Type")?.contains("version=0.0.4") == true)
            // Creating a session makes the relay call Prove, so the per-call metrics exist.
            _ = try await relay.createSession()
            let text = try await relay.request(.GET, "/metrics").body
            for name in [
                "linkrelay_sessions_created_total", "linkrelay_landings_total", "linkrelay_outcomes_total",
                "linkrelay_open_channels", "linkrelay_prove_calls_total", "linkrelay_prove_call_duration_seconds",
            ] {
                #expect(text.contains("# TYPE \(name)"), "\(name) is declared")
                #expect(text.split(separator: "\n").contains { $0.hasPrefix(name) }, "\(name) has a sample")
            }
            let names = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                .map { $0.prefix { $0 != "{" && $0 != " " } }
            #expect(names.allSatisfy { $0.hasPrefix("linkrelay_") }, "every metric starts with linkrelay_")
        }
    }

    @Test("After one verified session the counters read 1, and Prove's calls are counted")
    func countersAfterVerified() async throws {
        try await TestRelay.run { relay in
            let before = try await relay.metrics()
            #expect(before.value(#"linkrelay_sessions_created_total{tenant="default"}"#) == 0)
            #expect(before.value(#"linkrelay_outcomes_total{outcome="verified",tenant="default"}"#) == 0)

            let created = try await relay.createSession()
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 200)
            let events = try await relay.pollUntilDone(created)
            #expect(events.last?.outcome == "verified")

            let verified = #"linkrelay_outcomes_total{outcome="verified",tenant="default"}"#
            let metrics = try await relay.metrics { $0.value(verified) == 1 }
            #expect(metrics.value(#"linkrelay_sessions_created_total{tenant="default"}"#) == 1)
            #expect(metrics.value(#"linkrelay_landings_total{result="accepted"}"#) == 1)
            #expect(metrics.value(verified) == 1)
            #expect(metrics.value(#"linkrelay_outcomes_total{outcome="failed",tenant="default"}"#) == 0)
            #expect(
                !metrics.samples("linkrelay_prove_calls_total", labels: ["endpoint": "unify", "status": "200"]).isEmpty)
            #expect(
                !metrics.samples("linkrelay_prove_calls_total", labels: ["endpoint": "unify-status", "status": "200"])
                    .isEmpty)
            #expect(
                !metrics.samples("linkrelay_prove_call_duration_seconds_count", labels: ["endpoint": "unify"]).isEmpty)
            for transport in ["websocket", "sse", "longpoll"] {
                #expect(metrics.value(#"linkrelay_open_channels{transport="\#(transport)"}"#) == 0)
            }
        }
    }

    @Test(
        "An unknown route under /v1 is 404 problem+json", arguments: ["/v1/nothing", "/v1/sessions/ses_x/nothing"])
    func unknownRoute(path: String) async throws {
        try await TestRelay.run { relay in
            for answer in [try await relay.api(.GET, path), try await relay.request(.GET, path)] {
                #expect(answer.status == 404)
                #expect(answer.header("Content-Type") == "application/problem+json")
                #expect(answer.body.contains("\"status\":404"))
            }
        }
    }

    @Test("GET / is the demo page, with the SANDBOX banner")
    func demoHome() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, "/")
            #expect(answer.status == 200)
            #expect(answer.body.contains("SANDBOX"))
            #expect(answer.body.contains("<form"))
            expectSafePage(answer, base: relay.base)
        }
    }

    @Test("POST /demo starts a session and shows its channel and a link to the sandbox phone")
    func demoStart() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(
                .POST, "/demo", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: "phoneNumber=2001004014")
            #expect(answer.status == 200)
            expectSafePage(answer, base: relay.base)
            #expect(answer.body.contains("SANDBOX"))
            let id = try #require(answer.body.firstMatch(of: /ses_[A-Za-z0-9]+/).map { String($0.output) })
            let session = try await relay.session(id)
            #expect(session.state == "waiting")
            #expect(answer.body.contains("/v1/sessions/\(id)/ws"))
            #expect(answer.body.contains("/v1/sessions/\(id)/poll"))
            #expect(answer.body.contains(#"data-token=""#))
            #expect(answer.body.contains(#"href="/sandbox/phone?phoneNumber=2001004014""#))
            #expect(!answer.body.contains(TestRelay.apiKey))

            // The page's token is the session's channel token: the long-poll accepts it.
            let token = try #require(answer.body.firstMatch(of: /data-token="([^"]+)"/).map { String($0.output.1) })
            let poll = try await relay.request(.GET, "/v1/sessions/\(id)/poll?timeout=0&token=\(token)")
            #expect(poll.status == 200)
            #expect(try poll.json(PollAnswer.self).events.map(\.type) == ["waiting"])
            #expect(try await relay.metrics().value(#"linkrelay_sessions_created_total{tenant="default"}"#) == 1)
        }
    }

    @Test("POST /demo with an invalid number shows the form again with an error, and starts nothing")
    func demoInvalid() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(
                .POST, "/demo", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: "phoneNumber=not+a+number")
            #expect((400..<500).contains(answer.status))
            #expect(answer.header("Content-Type")?.hasPrefix("text/html") == true)
            expectSafePage(answer, base: relay.base)
            #expect(try await relay.metrics().value(#"linkrelay_sessions_created_total{tenant="default"}"#) == 0)
        }
    }

    @Test("The sandbox phone lists the Instant Link message")
    func sandboxPhone() async throws {
        try await TestRelay.run { relay in
            let empty = try await relay.request(.GET, "/sandbox/phone?phoneNumber=2001004014")
            #expect(empty.status == 200)
            #expect(!empty.body.contains("/sandbox/"), "no message link yet")
            _ = try await relay.createSession()
            let link = try await relay.latestLink()
            let answer = try await relay.request(.GET, "/sandbox/phone?phoneNumber=2001004014")
            #expect(answer.status == 200)
            #expect(answer.body.contains("SANDBOX"))
            #expect(answer.body.contains(#"href="\#(link)""#))
            #expect(answer.body.contains(#"href="\#(link)?decline=1""#))
            expectSafePage(answer, base: relay.base)
        }
    }

    static let htmlPages = [
        "/", "/?flow=nevis", "/sandbox/phone?phoneNumber=2001004014",
        "/l/\(String(repeating: "A", count: 32))?asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c3301",
        "/l/short?asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c3301", "/l/whatever?asc=maybe",
    ]

    @Test("Every HTML page has the safety headers and no third-party resources", arguments: htmlPages)
    func pageHeaders(path: String) async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, path)
            #expect(answer.status < 500)
            expectSafePage(answer, base: relay.base)
        }
    }

    @Test("The landing and final pages have the safety headers")
    func landingPages() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let (landing, landingURL) = try await relay.tap()
            #expect(landing.status == 200)
            expectSafePage(landing, base: relay.base)
            _ = try await relay.pollUntilDone(created)
            let final = try await relay.request(.GET, landingURL)
            #expect(final.status == 200)
            expectSafePage(final, base: relay.base)
        }
    }

    @Test(
        "/metrics has what the alerts and the dashboard read: taps, sessions in progress by age, connections and their cap"
    )
    func metricsForAlerts() async throws {
        try await TestRelay.run(socket: true, flags: ["max-connections": ["500"]]) { relay in
            _ = try await relay.createSession()
            let tapped = try await relay.createSession()
            _ = try await relay.tap()
            _ = try await relay.pollUntilDone(tapped)
            var text = ""
            for _ in 0..<200 {
                text = try await relay.request(.GET, "/metrics").body
                if text.contains("linkrelay_taps_total 1\n") { break }
                await Task.yield()
            }
            let metrics = OpsMetricsText(text: text)
            #expect(metrics.value("linkrelay_taps_total") == 1)
            #expect(metrics.value("linkrelay_sessions_in_progress{state=\"waiting\",age=\"0-30s\"}") == 1)
            #expect(metrics.value("linkrelay_sessions_in_progress{state=\"tapped\",age=\"0-30s\"}") == 0)
            #expect(metrics.value("linkrelay_sessions_in_progress{state=\"waiting\",age=\"5m+\"}") == 0)
            #expect(metrics.value("linkrelay_max_connections") == 500)
            #expect((metrics.value("linkrelay_open_connections") ?? 0) >= 1, "this scrape's own connection")
        }
    }
}
