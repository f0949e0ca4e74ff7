import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// The ops page's status strip and highlights, the thresholds they share with the alert rules, and
/// `linkrelay_http_responses_total`, which counts every answer by route and status.
@Suite("Ops status", .timeLimit(.minutes(1)))
struct OpsStatusTests {
    // MARK: - the thresholds are the rules'

    /// The alert rules file as it ships: `deploy/prometheus/linkrelay-alerts.yml`.
    static let rules: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let path = root.appendingPathComponent("deploy/prometheus/linkrelay-alerts.yml").path
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }()

    /// The `expr` of the rule `alert`, from its `expr:` to its `for:` or `labels:`.
    static func expression(_ alert: String) -> String? {
        guard let start = rules.range(of: "- alert: \(alert)\n") else { return nil }
        let rest = rules[start.upperBound...]
        guard let expr = rest.range(of: "expr:") else { return nil }
        let end = rest.range(of: "\n        for:")?.lowerBound ?? rest.range(of: "\n        labels:")?.lowerBound
        return end.map { String(rest[expr.upperBound..<$0]) }
    }

    /// The numbers the rule compares with (`> 0.05`, `>= 20`, `== 1`), in order.
    static func comparisons(_ alert: String) -> [Double] {
        (expression(alert) ?? "").matches(of: /(?:>=|>|==)\s*([0-9.]+)/).compactMap { Double($0.output.1) }
    }

    /// The range windows of the rule (`[5m]` is 5), in order.
    static func windows(_ alert: String) -> [Int] {
        (expression(alert) ?? "").matches(of: /\[(\d+)m\]/).compactMap { Int($0.output.1) }
    }

    @Test("The page's thresholds are the numbers of the alert rules in deploy/prometheus")
    func thresholdsAreTheRules() {
        #expect(!Self.rules.isEmpty, "the rules file is read")
        #expect(
            Self.comparisons("LinkRelayExpiryRatioHigh")
                == [AlertThresholds.expiryRatio, Double(AlertThresholds.expiryMinimumEnded)])
        #expect(Self.comparisons("LinkRelayProveErrorRateHigh") == [AlertThresholds.proveErrorRate])
        #expect(
            Self.windows("LinkRelayProveErrorRateHigh").allSatisfy { $0 == AlertThresholds.proveErrorWindowMinutes })
        let slow = Self.expression("LinkRelayProveSlow") ?? ""
        #expect(slow.contains("histogram_quantile(\(AlertThresholds.proveSlowQuantile),"))
        #expect(Self.comparisons("LinkRelayProveSlow") == [AlertThresholds.proveSlowSeconds])
        #expect(Self.comparisons("LinkRelayProveBreakerOpen") == [1])
        #expect(Self.comparisons("LinkRelayWebhookBacklog") == [AlertThresholds.webhookOldestPendingSeconds])
        #expect(Self.comparisons("LinkRelayWebhookQueueDeep") == [Double(AlertThresholds.webhookQueueDepth)])
        #expect(Self.comparisons("LinkRelayConnectionsNearCap") == [AlertThresholds.connectionsRatio])
        #expect(
            Self.comparisons("LinkRelayServerErrorRatioHigh")
                == [AlertThresholds.serverErrorRatio, Double(AlertThresholds.serverErrorMinimumAnswers)])
        #expect(
            Self.windows("LinkRelayServerErrorRatioHigh").allSatisfy { $0 == AlertThresholds.serverErrorWindowMinutes })
        #expect(Self.comparisons("LinkRelayNevisErrorRateHigh") == [AlertThresholds.nevisErrorRate])
        #expect(
            Self.windows("LinkRelayNevisErrorRateHigh")
                == [AlertThresholds.nevisErrorWindowMinutes, AlertThresholds.nevisErrorWindowMinutes])
        #expect(Self.comparisons("LinkRelayNevisBreakerOpen") == [1])
        // The latency alert's bound is a bucket bound, so the rule decides at an exact edge.
        #expect(ProveMinute.bucketBounds.contains(AlertThresholds.proveSlowSeconds))
    }

    @Test("The page counts as Nevis errors exactly the statuses the Nevis alert rule counts")
    func nevisErrorsAreTheRules() throws {
        let expression = try #require(Self.expression("LinkRelayNevisErrorRateHigh"))
        let matcher = try #require(expression.firstMatch(of: /status=~"([^"]+)"/)).output.1
        let rule = try Regex("^(?:" + matcher + ")$")
        for status in ["200", "201", "204", "400", "401", "404", "409", "429", "500", "502", "503", "timeout", "error"]
        {
            let counted = RecentActivity.NevisAnswer(status: status) == .failed
            #expect(counted == (status.wholeMatch(of: rule) != nil), "\(status)")
        }
    }

    // MARK: - the strip

    struct Box: Equatable {
        var level: String
        var value: String
        var detail: String
    }

    /// The status box `id` of the page ("breaker", "store", …).
    static func box(_ page: String, _ id: String) -> Box? {
        let pattern = try! Regex(
            #"<li class="status-box (\w+)" id="status-\#(id)" data-level="\w+"><span class="status-label">[^<]*</span> <strong class="status-value">([^<]*)</strong> <span class="status-detail">([^<]*)</span>"#
        )
        return page.firstMatch(of: pattern).flatMap { match in
            guard let level = match.output[1].substring, let value = match.output[2].substring,
                let detail = match.output[3].substring
            else { return nil }
            return Box(level: String(level), value: String(value), detail: String(detail))
        }
    }

    static func opsPage(_ relay: TestRelay) async throws -> String {
        let answer = try await relay.request(.GET, "/ops", headers: [OpsPageTests.basic("ops", TestRelay.apiKey)])
        #expect(answer.status == 200)
        return answer.body
    }

    @Test("On a healthy relay the strip is green, above every section, and webhooks are off")
    func healthyStrip() async throws {
        try await TestRelay.run(flags: ["limits": ["off"]]) { relay in
            _ = try await relay.createSession()
            let page = try await Self.opsPage(relay)
            let strip = try #require(page.range(of: "id=\"status-strip\""))
            let firstSection = try #require(page.range(of: "class=\"ops-section\""))
            #expect(strip.lowerBound < firstSection.lowerBound, "the strip comes first")
            #expect(Self.box(page, "store") == Box(level: "ok", value: "ready", detail: "takes reads and writes"))
            #expect(Self.box(page, "breaker")?.level == "ok")
            #expect(Self.box(page, "breaker")?.value == "closed")
            #expect(Self.box(page, "breaker")?.detail == "failures in a row 0 of 5")
            let prove = try #require(Self.box(page, "prove-errors"))
            #expect(prove.level == "ok" && prove.value == "0.0 %", "\(prove)")
            #expect(Self.box(page, "answers")?.level == "ok")
            #expect(Self.box(page, "webhooks") == Box(level: "off", value: "off", detail: "no receiver set"))
            #expect(Self.box(page, "drain")?.value == "serving")
            #expect(!page.contains("class=\"bad\"") && !page.contains(" bad\""), "nothing is highlighted")
        }
    }

    @Test("A store that does not answer turns the store's box red with /readyz's words")
    func storeDown() async throws {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await TestRelay.run(store: "sqlite:" + directory.appendingPathComponent("relay.sqlite").path) { relay in
            try await relay.relay.store.close()
            let page = try await Self.opsPage(relay)
            let store = try #require(Self.box(page, "store"))
            #expect(store.level == "bad" && store.value.hasPrefix("store "), "\(store)")
            #expect(try await relay.request(.GET, "/readyz").body == store.value + "\n")
        }
    }

    @Test(
        "With Prove failing and the breaker open: the breaker's box is red and says open, the error rate is red, the 503s are counted"
    )
    func breakerOpen() async throws {
        let clock = ManualClock()
        try await TestRelay.run(
            socket: true, clock: clock,
            flags: [
                "breaker-failures": ["2"], "breaker-cooldown": ["10"], "limits": ["off"],
                "sandbox-fault": ["unify:error=1,status=503"],
            ]
        ) { relay in
            let create = "{\"phoneNumber\":\"2001004014\"}"
            for _ in 0..<3 { #expect(try await relay.api(.POST, "/v1/sessions", body: create).status == 503) }

            let page = try await Self.opsPage(relay)
            let breaker = try #require(Self.box(page, "breaker"))
            #expect(breaker.level == "bad" && breaker.value == "open", "\(breaker)")
            #expect(breaker.detail == "1 call refused at once (503) in the last hour; a probe goes in 10.0 s")
            #expect(OpsPageTests.figure(page, section: "breaker", "State") == "open")
            #expect(OpsPageTests.figure(page, section: "breaker", "Next probe") == "in 10.0 s")
            #expect(OpsPageTests.figure(page, section: "breaker", "Refused (503), last hour") == "1")
            #expect(OpsPageTests.figure(page, section: "breaker", "Failures in a row") == nil, "not while open")

            let prove = try #require(Self.box(page, "prove-errors"))
            #expect(prove.level == "bad" && prove.value == "100.0 %", "\(prove)")
            #expect(prove.detail.hasPrefix("unify: "))
            #expect(page.contains("<td>unify</td>"))
            #expect(page.contains("<td class=\"bad\">100.0 %</td>"), "the error rate is highlighted in the table")
            let answered503 = Int(OpsPageTests.figure(page, section: "answers", "503") ?? "") ?? 0
            #expect(answered503 == 3, "the three creates; the sandbox's own 503s are not the relay's")
            #expect(Self.box(page, "answers")?.level != "ok")

            // A minute later the breaker has let its probe through: a create gets an answer from Prove.
            await relay.relay.sandbox?.clearFaults()
            clock.advance(by: 10)
            _ = try await relay.createSession()
            let closed = try await Self.opsPage(relay)
            #expect(Self.box(closed, "breaker")?.value == "closed")
            #expect(
                Self.box(closed, "breaker")?.detail == "failures in a row 0 of 2; 1 call refused (503) in the last hour"
            )
        }
    }

    @Test(
        "The embedded sandbox's injected 503s are not the relay's: the strip, the 5xx ratio and the rule's metric stay clean"
    )
    func sandboxAnswersApart() async throws {
        try await TestRelay.run(flags: ["limits": ["off"], "sandbox-fault": ["unify:error=1,status=503"]]) { relay in
            let unify = #"{"possessionType":"desktop","clientRequestId":"r","phoneNumber":"2001004014"}"#
            let count = AlertThresholds.serverErrorMinimumAnswers + 5
            for index in 0..<count {
                let path = index.isMultiple(of: 2) ? "/v3/unify" : "/sandbox/prove/v3/unify"
                #expect(try await relay.request(.POST, path, body: unify).status == 503)
            }
            #expect(try await relay.request(.GET, "/healthz").status == 200)
            let page = try await Self.opsPage(relay)
            let answers = try #require(Self.box(page, "answers"))
            #expect(answers.level == "ok" && answers.value == "0.0 %", "\(answers)")
            #expect(OpsPageTests.figure(page, section: "answers", "503") == "0")
            let counts = try await Self.responses(relay)
            #expect(counts.keys.allSatisfy { !$0.hasSuffix(" 503") }, "\(counts)")
            #expect(counts["/healthz 200"] == 1, "the relay's own answers still count")
            // Counted still, as the sandbox's.
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(
                metrics.contains(
                    #"linkrelay_sandbox_responses_total{route="/v3/{endpoint}",status="503"} \#(count / 2 + count % 2)"#
                ))
            #expect(
                metrics.contains(#"linkrelay_sandbox_responses_total{route="/sandbox/**",status="503"} \#(count / 2)"#))
        }
    }

    // MARK: - answers by route and status

    /// `linkrelay_http_responses_total` from `/metrics`: "route status" → count.
    static func responses(_ relay: TestRelay) async throws -> [String: Int] {
        let text = try await relay.request(.GET, "/metrics").body
        var counts: [String: Int] = [:]
        for match in text.matches(of: /linkrelay_http_responses_total\{route="([^"]*)",status="(\d+)"\} (\d+)/) {
            counts[match.output.1 + " " + match.output.2] = Int(match.output.3)
        }
        return counts
    }

    @Test("Every answer is counted once by its route's pattern and status; a path no route has is 'unmatched'")
    func answersByRoute() async throws {
        try await TestRelay.run(flags: ["limits": ["off"]]) { relay in
            let created = try await relay.createSession()
            #expect(try await relay.api(.GET, "/v1/sessions/\(created.sessionId)").status == 200)
            #expect(try await relay.api(.GET, "/v1/sessions/ses_nothing").status == 404)
            #expect(try await relay.request(.GET, "/v1/sessions").status == 405)
            #expect(try await relay.request(.POST, "/v1/sessions", body: "{}").status == 401)
            for index in 0..<3 { #expect(try await relay.request(.GET, "/no/such/path/\(index)").status == 404) }
            #expect(try await relay.request(.HEAD, "/healthz").status == 200)
            #expect(try await relay.request(.GET, "/favicon.ico").status == 200)
            let poll = "/v1/sessions/\(created.sessionId)/poll?token=\(created.channel.token)&timeout=0"
            #expect(try await relay.request(.GET, poll).status == 200)
            let malformed = try await relay.rawExchange("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
            #expect(malformed.hasPrefix("HTTP/1.1 400"))

            let counts = try await Self.responses(relay)
            #expect(counts["/v1/sessions 201"] == 1)
            #expect(counts["/v1/sessions 401"] == 1)
            #expect(counts["/v1/sessions/{id} 200"] == 1)
            #expect(counts["/v1/sessions/{id} 404"] == 1)
            #expect(counts["/v1/sessions/{id}/poll 200"] == 1)
            #expect(counts["/healthz 200"] == 1, "a HEAD is its GET's line")
            #expect(counts["/favicon.ico 200"] == 1)
            #expect(counts["unmatched 404"] == 3)
            #expect(counts["unmatched 405"] == 1)
            #expect(counts["unmatched 400"] == 1, "a head the decoder refused")
            #expect(counts.keys.allSatisfy { !$0.contains("no/such") && !$0.contains("ses_") }, "bounded labels")
            // The page counts the same answers; this scrape's own is counted as it is written.
            let page = try await Self.opsPage(relay)
            let total = counts.values.reduce(0, +)
            let shown = Int(OpsPageTests.figure(page, section: "answers", "Answers") ?? "") ?? 0
            #expect(shown == total + 1, "every answer before the page's own, and the scrape's")
            #expect(OpsPageTests.figure(page, section: "answers", "4xx") == "7")
        }
    }
}
