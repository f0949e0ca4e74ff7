import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Logging
import NIOHTTP1
import Testing

@testable import LinkRelayServer

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The elements of an SVG document, read by Foundation's XML parser: a document it cannot parse is
/// not well-formed, and `parse` says so.
final class SVGElements: NSObject, XMLParserDelegate {
    struct Element {
        var name: String
        var attributes: [String: String]
    }

    private(set) var elements: [Element] = []
    private var texts: [String] = []
    private var text = ""

    /// Every element of `svg` in document order, or nil when it is not well-formed XML.
    static func parse(_ svg: String) -> SVGElements? {
        let reader = SVGElements()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = reader
        return parser.parse() ? reader : nil
    }

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String]
    ) {
        elements.append(Element(name: name, attributes: attributes))
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if name == "title" || name == "text" { texts.append(text) }
        text = ""
    }

    /// The `<rect>`s filled with `color`, in document order.
    func rects(filled color: String) -> [[String: Double]] {
        elements.filter { $0.name == "rect" && $0.attributes["fill"] == color }.map { element in
            element.attributes.compactMapValues(Double.init)
        }
    }

    /// The text of every `<title>` and `<text>`.
    var strings: [String] { texts }
}

/// The ops page: its per-minute series, its charts, who may read it, and what it shows after real sessions.
@Suite("Ops page", .timeLimit(.minutes(1)))
struct OpsPageTests {
    // MARK: - the per-minute series

    @Test("Counts land in the minute they happen, move left as minutes pass, and go after an hour")
    func minuteSeries() {
        let clock = ManualClock()  // starts on a minute's first second
        let recent = RecentActivity(clock: clock)
        recent.record(.tapped)
        clock.advance(by: 59)
        recent.record(.tapped)
        clock.advance(by: 1)
        recent.record(.verified)
        recent.record(.verified)
        recent.record(.expired)

        var hour = recent.snapshot().sessions
        #expect(hour.count == 60)
        #expect(hour[58][.tapped] == 2, "both taps of the first minute, one minute back")
        #expect(hour[59][.verified] == 2 && hour[59][.expired] == 1 && hour[59][.tapped] == 0)
        #expect(hour[0..<58].allSatisfy { $0.total == 0 })

        // 59 minutes on, the first minute is the oldest shown; one more and it is gone.
        clock.advance(by: 58 * 60)
        hour = recent.snapshot().sessions
        #expect(hour[0][.tapped] == 2 && hour[1][.verified] == 2)
        clock.advance(by: 60)
        recent.record(.cancelled)  // written into the slot the first minute had
        hour = recent.snapshot().sessions
        #expect(hour[0][.verified] == 2 && hour[0][.expired] == 1)
        #expect(hour[59][.cancelled] == 1 && hour[59][.tapped] == 0, "the reused slot starts from zero")
        let total: Counts<RecentActivity.Kind> = hour.sum()
        #expect(total[.tapped] == 0 && total[.verified] == 2 && total[.cancelled] == 1)

        // Two hours of silence leave an empty hour, not counts from a former one.
        clock.advance(by: 7200)
        #expect(recent.snapshot().sessions.allSatisfy { $0.total == 0 })
    }

    @Test("Prove calls are kept per endpoint and minute, errors apart, with their latencies")
    func proveSeries() {
        let clock = ManualClock()
        let recent = RecentActivity(clock: clock)
        for _ in 0..<98 { recent.proveCall(endpoint: "unify", failed: false, seconds: 0.02) }
        recent.proveCall(endpoint: "unify", failed: true, seconds: 3)
        recent.proveCall(endpoint: "unify", failed: true, seconds: 3)
        clock.advance(by: 120)
        recent.proveCall(endpoint: "unify-status", failed: false, seconds: 0.2)

        let snapshot = recent.snapshot()
        let unify: ProveMinute = snapshot.prove["unify", default: []].sum()
        #expect(unify.calls == 100 && unify.errors == 2)
        #expect(snapshot.prove["unify"]?[57].calls == 100, "two minutes back")
        // 98 calls in the 10-25 ms bucket: the median is inside it, the 99th percentile in 2-3 s.
        let median = try? #require(unify.quantile(0.5))
        #expect(median.map { 0.01 < $0 && $0 <= 0.025 } == true, "median \(String(describing: median))")
        let p99 = try? #require(unify.quantile(0.99))
        #expect(p99.map { 2 < $0 && $0 <= 3 } == true, "p99 \(String(describing: p99))")
        #expect(snapshot.prove["unify-status"]?[59].calls == 1)
        #expect(ProveMinute().quantile(0.5) == nil)
    }

    @Test(
        "The estimated median of sandbox-like and Prove-like latencies is near the real one, not a bucket's middle",
        arguments: [
            (0.00015, 0.00025),  // the embedded sandbox, in process
            (0.0015, 0.0025),  // the sandbox over loopback HTTP (a fault set)
            (0.2, 0.4),  // Prove over the internet
        ])
    func medianNearTheMean(lowest: Double, highest: Double) throws {
        var calls = ProveMinute()
        for index in 0..<101 { calls.record(failed: false, seconds: lowest + (highest - lowest) * Double(index) / 100) }
        let median = (lowest + highest) / 2  // evenly spread: the mean too
        let estimate = try #require(calls.quantile(0.5))
        #expect(abs(estimate - median) <= 0.25 * median, "p50 \(estimate) for calls of \(lowest)-\(highest) s")
        let mean = try #require(calls.meanSeconds)
        #expect(estimate <= mean * 1.1, "p50 \(estimate) above the mean \(mean)")
    }

    // MARK: - the charts

    @Test("A column chart is well-formed SVG whose column heights are proportional to the values")
    func columnChart() throws {
        let svg = SVGChart.columns(
            label: "Taps <per> minute & more",
            series: [
                .init(name: "verified", color: "#010101", values: [1, 0, 4, 2]),
                .init(name: "failed", color: "#020202", values: [1, 0, 0, 2]),
            ], titles: ["10:00 UTC", "10:01 UTC", "10:02 UTC", "10:03 UTC"], axis: ("4 min ago", "now"))
        let chart = try #require(SVGElements.parse(svg), "well-formed XML")
        #expect(chart.elements.first?.name == "svg")
        #expect(chart.elements.first?.attributes["aria-label"] == "Taps <per> minute & more")
        let verified = chart.rects(filled: "#010101").filter { $0["width"] != 10 }  // not the legend's swatch
        let failed = chart.rects(filled: "#020202").filter { $0["width"] != 10 }
        #expect(verified.count == 3 && failed.count == 2, "no rect for a zero")
        // The largest column (4) is scaled to 5: 4/5 of the plot, and the others in proportion.
        let heights = verified.compactMap { $0["height"] }
        #expect(heights == [24, 96, 48].map { $0 * SVGChart.plotHeight / 120 })
        // Stacked: the failed part of the first column sits right on top of its verified part.
        let first = try #require(verified.first)
        let onTop = try #require(failed.first)
        #expect(onTop["y"]! + onTop["height"]! == first["y"]!)
        #expect(chart.strings.contains("10:02 UTC: verified 4, failed 0"))
        #expect(chart.strings.contains("5"), "the scale's top")
    }

    @Test("A bar chart is well-formed SVG whose bar lengths are proportional to the values")
    func barChart() throws {
        let svg = SVGChart.bars(
            label: "Channels", series: [.init(name: "open", color: "#030303", values: [3, 0, 10])],
            rows: ["WebSocket", "SSE", "Long-poll"])
        let chart = try #require(SVGElements.parse(svg))
        let widths = chart.rects(filled: "#030303").compactMap { $0["width"] }
        let plot = SVGChart.width - SVGChart.barsLeft - SVGChart.right
        #expect(widths.count == 2)
        #expect(abs(widths[0] - plot * 0.3) < 0.01 && abs(widths[1] - plot) < 0.01)
        #expect(chart.strings.contains("SSE: open 0"))
        #expect(chart.strings.contains("10"), "each bar's total")
    }

    @Test(
        "The scale's top is the next round number",
        arguments: [(0, 1), (1, 1), (3, 5), (7, 10), (11, 20), (50, 50), (51, 100)])
    func scaleTop(largest: Int, top: Int) {
        #expect(SVGChart.scaleTop(largest) == top)
    }

    // MARK: - who may read it

    static func basic(_ user: String, _ password: String) -> (String, String) {
        ("Authorization", "Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
    }

    @Test(
        "Without a valid API key as the Basic password: 401 with a Basic challenge, counted once credentials were offered; with one: the page"
    )
    func authorization() async throws {
        try await TestRelay.run { relay in
            let refused: [[(String, String)]] = [
                [], [Self.basic("ops", "wrong-key-0123456789abcdef")],
                [("Authorization", "Bearer \(TestRelay.apiKey)")],
                [("Authorization", "Basic !!not-base64")],
                [("Authorization", "Basic " + Data(TestRelay.apiKey.utf8).base64EncodedString())],
                [Self.basic(TestRelay.apiKey, "")],
            ]
            for headers in refused {
                let answer = try await relay.request(.GET, "/ops", headers: headers)
                #expect(answer.status == 401, "\(headers)")
                #expect(answer.header("WWW-Authenticate") == "Basic realm=\"LinkRelay ops\", charset=\"UTF-8\"")
                #expect(answer.header("Content-Type") == "text/html; charset=utf-8")
                #expect(answer.body.contains("API keys as the password"))
                #expect(!answer.body.contains("<svg"))
            }
            // The first, with no Authorization at all, is what every browser sends before its Basic prompt.
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(
                metrics.contains("linkrelay_security_events_total{event=\"ops_unauthorized\"} \(refused.count - 1)"))

            for user in ["ops", "", "someone@example.com"] {
                let page = try await relay.request(.GET, "/ops", headers: [Self.basic(user, TestRelay.apiKey)])
                #expect(page.status == 200)
                #expect(page.header("Cache-Control") == "no-store")
                #expect(page.header("Content-Type") == "text/html; charset=utf-8")
                let policy = try #require(page.header("Content-Security-Policy"))
                for directive in [
                    "default-src 'none'", "frame-ancestors 'none'", "script-src 'self'", "connect-src 'self'",
                ] {
                    #expect(policy.contains(directive))
                }
                #expect(!policy.contains("unsafe"))
                #expect(page.body.contains("<svg"))
            }
            // The page's own assets need no key: they hold nothing of the relay's state.
            #expect(try await relay.request(.GET, "/assets/ops.js").status == 200)
            #expect(try await relay.request(.GET, "/assets/ops.css").status == 200)
        }
    }

    @Test("A browser's first try without credentials is no security event; a wrong password is one")
    func browserFirstTry() async throws {
        try await TestRelay.run { relay in
            func events() async throws -> String? {
                let metrics = try await relay.request(.GET, "/metrics").body
                return metrics.firstMatch(of: /linkrelay_security_events_total\{event="ops_unauthorized"\} (\d+)/)
                    .map { String($0.output.1) }
            }
            let first = try await relay.request(.GET, "/ops")
            #expect(first.status == 401 && first.header("WWW-Authenticate") != nil, "the prompt, as before")
            #expect(try await events() == nil)
            #expect(!relay.logs.all.contains { $0.contains("Ops page refused") })

            let wrong = try await relay.request(
                .GET, "/ops", headers: [Self.basic("ops", "wrong-key-0123456789abcdef")])
            #expect(wrong.status == 401)
            #expect(try await events() == "1")
            #expect(relay.logs.all.contains { $0.contains("Ops page refused") })
        }
    }

    @Test("Every request for the page spends a token of the client's limit: past it, right and wrong keys alike wait")
    func rateLimited() async throws {
        let clock = ManualClock()
        let relay = try await TestRelay.unstarted(clock: clock)
        let right = HTTPHeaders([Self.basic("ops", TestRelay.apiKey)])
        let wrong = HTTPHeaders([Self.basic("ops", "wrong-key-0123456789abcdef")])
        for index in 0..<RequestLimits.opsPerIP {
            let answer = await relay.respond(to: RelayRequest(.GET, "/ops", headers: index % 2 == 0 ? wrong : right))
            #expect(answer?.status == (index % 2 == 0 ? .unauthorized : .ok))
        }
        #expect(await relay.respond(to: RelayRequest(.GET, "/ops", headers: right))?.status == .tooManyRequests)
        #expect(await relay.respond(to: RelayRequest(.GET, "/ops", headers: wrong))?.status == .tooManyRequests)
        clock.advance(by: 60)
        #expect(await relay.respond(to: RelayRequest(.GET, "/ops", headers: right))?.status == .ok)
    }

    @Test("The Basic password is what follows the first colon; anything else is no password")
    func basicPassword() {
        func password(_ header: String) -> String? { OpsPage.basicPassword(["Authorization": header]) }
        #expect(password("Basic " + Data("u:p:q".utf8).base64EncodedString()) == "p:q")
        #expect(password("basic " + Data(":key".utf8).base64EncodedString()) == "key")
        #expect(password("Basic " + Data("no colon".utf8).base64EncodedString()) == nil)
        #expect(password("Basic") == nil)
        #expect(password("Basic " + Data([0xff, 0x3a, 0x41]).base64EncodedString()) == nil, "not UTF-8")
        #expect(password("Bearer abc") == nil)
    }

    // MARK: - what it shows

    /// The figure `label` of the section `id` on the page, e.g. ("activity", "Verified") → "1".
    static func figure(_ page: String, section id: String, _ label: String) -> String? {
        guard let start = page.range(of: "<section class=\"ops-section\" id=\"\(id)\"") else { return nil }
        let rest = page[start.upperBound...]
        let section = rest[..<(rest.range(of: "</section>")?.lowerBound ?? rest.endIndex)]
        return section.matches(of: /<dt>([^<]*)<\/dt><dd>([^<]*)<\/dd>/).first { $0.output.1 == label }
            .map { String($0.output.2) }
    }

    @Test(
        "After a verified session and one still waiting, the page counts them, and shows no id, token, key or number",
        arguments: ["memory", "sqlite"])
    func afterRealSessions(store: String) async throws {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let spec = store == "sqlite" ? "sqlite:" + directory.appendingPathComponent("relay.sqlite").path : store
        // A clock that stands still: the waiting hold stays under 30 s old however slow the machine.
        try await TestRelay.run(store: spec, clock: ManualClock(), flags: ["limits": ["off"]]) { relay in
            let waiting = try await relay.createSession(phone: "2001004014")
            let verified = try await relay.createSession(phone: "2001004014")
            _ = try await relay.tap()
            #expect(try await relay.pollUntilDone(verified).last?.outcome == "verified")

            // The outcome is counted just after the store has it: read the page until it shows it.
            var page = ""
            for _ in 0..<200 {
                page = try await relay.request(.GET, "/ops", headers: [Self.basic("ops", TestRelay.apiKey)]).body
                if Self.figure(page, section: "activity", "Verified") == "1" { break }
                await Task.yield()
            }
            #expect(Self.figure(page, section: "activity", "Verified") == "1")
            #expect(Self.figure(page, section: "activity", "Taps") == "1")
            #expect(Self.figure(page, section: "activity", "Expired") == "0")
            #expect(Self.figure(page, section: "sessions", "Waiting") == "1")
            #expect(Self.figure(page, section: "sessions", "Tapped") == "0")
            #expect(page.contains("0–30 s: waiting 1, tapped 0"), "the waiting hold is under 30 s old")
            #expect(page.contains("<td>unify</td><td>2</td><td>0</td>"), "two flows started, no error")
            #expect(Self.figure(page, section: "breaker", "State") == "closed")
            #expect(page.contains("Webhooks are off"))
            for secret in [
                waiting.sessionId, verified.sessionId, waiting.channel.token, verified.channel.token,
                TestRelay.apiKey, "2001004014", waiting.correlationId, verified.authToken ?? "-",
            ] {
                #expect(!page.contains(secret), "the page shows \(secret.prefix(6))…")
            }
            let urls = page.matches(of: /(?:src|href|action)\s*=\s*"([^"]*)"/).map { String($0.output.1) }
            #expect(urls.allSatisfy { $0.hasPrefix("/") && !$0.hasPrefix("//") }, "only the relay's own: \(urls)")
        }
    }

    @Test("After a Pre-Fill flow, the page counts its steps by outcome, and shows nothing of the person")
    func prefillSection() async throws {
        try await TestRelay.run(flags: ["limits": ["off"]]) { relay in
            let before = try await relay.request(.GET, "/ops", headers: [Self.basic("ops", TestRelay.apiKey)]).body
            #expect(before.contains("No Pre-Fill step in the last hour."))
            let created = try await PrefillSessionTests.create(relay)
            _ = try await relay.tap(phone: PrefillSessionTests.marcia)
            _ = try await relay.pollUntilDone(created)
            #expect(try await PrefillSessionTests.step(relay, created.sessionId, "challenge").status == 200)
            let page = try await relay.request(.GET, "/ops", headers: [Self.basic("ops", TestRelay.apiKey)]).body
            for row in ["start", "validate", "challenge"] {
                #expect(page.contains("<td>\(row)</td><td>1</td><td>0</td>"), "\(row): one success")
            }
            #expect(!page.contains("<td>complete</td>"))
            for secret in PrefillSessionTests.identity { #expect(!page.contains(secret)) }
        }
    }

    @Test("A store that does not answer costs the page its sessions section only, and /metrics nothing")
    func storeDown() async throws {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        try await TestRelay.run(store: "sqlite:" + path) { relay in
            try await relay.relay.store.close()
            let page = try await relay.request(.GET, "/ops", headers: [Self.basic("ops", TestRelay.apiKey)])
            #expect(page.status == 200)
            #expect(page.body.contains("The store did not answer"))
            #expect(Self.figure(page.body, section: "breaker", "State") == "closed")
            #expect(Self.figure(page.body, section: "sessions", "Waiting") == nil)
            let metrics = try await relay.request(.GET, "/metrics")
            #expect(metrics.status == 200 && metrics.body.contains("linkrelay_taps_total 0"))
        }
    }

    @Test("With webhooks on, the page shows the backlog, the receiver, and the attempts by outcome")
    func webhooksSection() async throws {
        let receiver = WebhookReceiver([.status(500)])  // the first message is retried, the second delivered
        try await receiver.serve { url in
            try await TestRelay.run(flags: WebhookRelayTests.flags(url).merging(["limits": ["off"]]) { $1 }) { relay in
                let created = try await relay.createSession()
                _ = try await relay.tap()
                _ = try await relay.pollUntilDone(created)
                await receiver.waitFor(2)
                // Attempts are counted once the sender has read the answer: read the page until both are.
                var attempts = [0, 0, 0]
                var page = ""
                for _ in 0..<200 {
                    page = try await relay.request(.GET, "/ops", headers: [Self.basic("ops", TestRelay.apiKey)]).body
                    attempts = [0, 0, 0]
                    let section = page[(page.range(of: "id=\"webhooks\"")?.upperBound ?? page.endIndex)...]
                    for minute in section.matches(of: /UTC: delivered (\d+), retry (\d+), failed (\d+)</) {
                        attempts[0] += Int(minute.output.1) ?? 0
                        attempts[1] += Int(minute.output.2) ?? 0
                        attempts[2] += Int(minute.output.3) ?? 0
                    }
                    if attempts[0] >= 1 && attempts[1] >= 1 { break }
                    await Task.yield()
                }
                #expect(
                    attempts[0] >= 1 && attempts[1] >= 1 && attempts[2] == 0, "delivered, retry, failed: \(attempts)")
                #expect(Self.figure(page, section: "webhooks", "Receiver") == "taking messages")
                #expect(Self.figure(page, section: "webhooks", "Pending") != nil)
                #expect(!page.contains("Webhooks are off"))
                #expect(!page.contains(url), "the receiver's URL may carry a token")
            }
        }
    }

    @Test("The stores count live sessions by flow, state and age bin as the tally of their sessions does")
    func liveSessionCounts() async throws {
        let now = Date()
        var sessions: [Session] = []
        for (index, (age, tapped, flow)) in [
            (5.0, false, Flow.unify), (29.0, true, .unify), (31.0, false, .unify), (95.0, false, .unify),
            (95.0, true, .unify), (400.0, false, .unify), (10.0, false, .nevis), (20.0, false, .nevis),
            (40.0, true, .nevis), (400.0, false, .nevis), (50.0, false, .prefill),
        ]
        .enumerated() {
            var session = SQLiteStoreTests.session(index)
            session.createdAt = now.addingTimeInterval(-age)
            if flow == .nevis { session.nevis = NevisOperation(handle: "handle-\(index)", channel: "app") }
            if flow == .prefill { session.prefill = PrefillProgress(next: ["v3-validate": "/v3/validate"]) }
            if tapped { session.record(.tapped(asc: true), at: now) }
            sessions.append(session)
        }
        var ended = SQLiteStoreTests.session(99)
        ended.nevis = NevisOperation(handle: "handle-99", channel: "push")
        ended.record(.expired, at: now)
        sessions.append(ended)
        let expected = LiveSessionCount.tally(sessions.map { ($0.flow, $0.state, $0.createdAt) }, at: now)
        #expect(expected.reduce(0) { $0 + $1.count } == 11, "the ended one is not live")
        func sorted(_ counts: [LiveSessionCount]) -> [String] {
            counts.map { "\($0.flow.rawValue) \($0.state.rawValue) \($0.ageBin) \($0.count)" }.sorted()
        }
        #expect(
            sorted(expected) == [
                "nevis tapped 1 1", "nevis waiting 0 2", "nevis waiting 13 1", "prefill waiting 1 1",
                "unify tapped 0 1", "unify tapped 3 1", "unify waiting 0 1", "unify waiting 1 1",
                "unify waiting 13 1", "unify waiting 3 1",
            ])
        // What the ops page and linkrelay_nevis_operations_open show: the Nevis operations alone, by age.
        #expect(LiveSessions.buckets(expected, flow: .nevis) == [2, 1, 0, 0, 0, 1])
        #expect(LiveSessions.buckets(expected, .waiting) == [3, 2, 1, 0, 0, 2], "every flow's")

        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var stores: [any RelayStore] = [
            MemorySessionStore(),
            try await SQLiteSessionStore.open(
                path: directory.appendingPathComponent("relay.sqlite").path, logger: Logger(label: "test")),
        ]
        if TestPostgres.available {
            stores.append(try await PostgresStoreTests.open(try await TestPostgres.createDatabase()))
        }
        for store in stores {
            for session in sessions {
                var stored = session
                stored.version = 0
                try await store.insert(
                    stored, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: now))
            }
            #expect(sorted(try await store.liveSessionCounts(at: now)) == sorted(expected), "\(type(of: store))")
            try await store.close()
        }
    }
}
