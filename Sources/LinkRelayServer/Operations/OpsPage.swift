import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOCore
import NIOHTTP1

/// `GET /ops` (API.md v1.1): the operators' live page, behind HTTP Basic with an API key as the password
/// (any user name). Aggregates only: no session id, phone number, token or key appears on it.
///
/// At its top a status strip (`OpsStatus`): the store, the breaker, Prove's error rate, Nevis (with
/// `--nevis`), the relay's 5xx, the webhook receivers and the drain, each green, amber or red by the alert rules' own numbers
/// (`AlertThresholds`). Below, a list of sections (`OpsSection`), each from one source and each saying
/// whose figures it shows: this instance's (channels, the last hour, Prove, the breaker, webhook attempts), or the
/// store's, which with PostgreSQL are every instance's (live sessions, the webhook backlog). The page
/// refreshes itself in place with a script served by the relay (`/assets/ops.js`), so its CSP stays
/// that of the other pages plus `script-src 'self'; connect-src 'self'`.
final class OpsPage: Sendable {
    let metrics: RelayMetrics
    let live: LiveSessions
    /// True with PostgreSQL: the store is shared by every instance.
    let sharedStore: Bool
    let breaker: CircuitBreaker
    /// The breaker around Nevis; nil without `--nevis`, and then the page shows nothing of Nevis.
    let nevisBreaker: CircuitBreaker?
    let webhooks: WebhookSender?
    let pages: Pages
    let clock: any RelayClock
    /// The store's health (as `/readyz` sees it) and the drain, for the status strip.
    let operations: OpsController

    static let realm = "LinkRelay ops"
    static let defaultRefresh = 10
    static let refreshRange = 2...300

    init(
        metrics: RelayMetrics, live: LiveSessions, sharedStore: Bool, breaker: CircuitBreaker,
        nevisBreaker: CircuitBreaker? = nil, webhooks: WebhookSender?, pages: Pages, clock: any RelayClock,
        operations: OpsController
    ) {
        self.metrics = metrics
        self.live = live
        self.sharedStore = sharedStore
        self.breaker = breaker
        self.nevisBreaker = nevisBreaker
        self.webhooks = webhooks
        self.pages = pages
        self.clock = clock
        self.operations = operations
    }

    /// `GET /ops[?refresh=S]`, behind the route's guard (`Route.Guard.opsBasic`: every request spends a
    /// token of the client's ops limit; without the password, a key of the `default` tenant, the
    /// operators', 401 with a Basic challenge, counted as a security event when the request offered
    /// credentials; another tenant's sees no aggregate): the page, refreshed every S seconds (10 by default, held to 2...300).
    func show(_ request: RelayRequest) throws -> Reply {
        let asked = try request.queryItem("refresh").flatMap { Int($0) } ?? Self.defaultRefresh
        let refresh = min(max(asked, Self.refreshRange.lowerBound), Self.refreshRange.upperBound)
        return .later { [self] in
            let status = await status()
            let sections = await sections()
            let now = clock.now()
            return pages.page(
                "ops",
                [
                    "refreshSeconds": refresh, "updated": Self.clockTime(now, seconds: true),
                    "updatedISO": ISO8601Milliseconds.string(now), "status": status.map(\.values),
                    "sections": sections.map(\.values),
                ], extraCSP: "; script-src 'self'; connect-src 'self'")
        }
    }

    /// The password of an `Authorization: Basic` header (RFC 7617: base64 of `user:password`, UTF-8).
    static func basicPassword(_ headers: HTTPHeaders) -> String? {
        guard let value = headers.first(name: "Authorization"), value.utf8.count > 6,
            value.prefix(6).lowercased() == "basic ",
            let decoded = Data(base64Encoded: value.dropFirst(6).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        return String(text[text.index(after: colon)...])
    }

    /// The page's sections, in order. A section is one source's figures: add one here. The store is
    /// asked once for the live sessions, which two sections show.
    func sections() async -> [OpsSection] {
        let activity = metrics.recent.snapshot()
        let current = metrics.current
        let counts: [LiveSessionCount]?
        do {
            counts = try await live.counts()
        } catch {
            counts = nil
        }
        var sections = [
            channels(current),
            liveSessions(counts),
            lastHour(activity),
            prove(activity),
            circuitBreaker(activity),
        ]
        if let nevisBreaker { sections.append(nevis(activity, counts, breaker: nevisBreaker)) }
        return sections + [
            answers(activity),
            webhookQueue(activity, current),
            prefill(activity),
        ]
    }

    // MARK: - the status strip

    /// The strip's boxes, in order: what an operator looks at first. Each is red where its alert rule
    /// would fire on the figure, amber where something is off below that, green otherwise.
    func status() async -> [OpsStatus] {
        let activity = metrics.recent.snapshot()
        return [
            await storeStatus(),
            breakerStatus(activity),
            proveErrorStatus(activity),
            nevisBreaker.map { nevisStatus(activity, breaker: $0) },
            answersStatus(activity),
            webhookStatus(activity, metrics.current),
            drainStatus(),
        ].compactMap { $0 }
    }

    func storeStatus() async -> OpsStatus {
        guard let problem = await operations.storeProblem() else {
            return OpsStatus(id: "store", label: "Store", value: "ready", detail: "takes reads and writes", level: .ok)
        }
        return OpsStatus(id: "store", label: "Store", value: problem, detail: "/readyz answers 503", level: .bad)
    }

    func breakerStatus(_ activity: RecentActivity.Snapshot) -> OpsStatus {
        let refused: Counts<RecentActivity.BreakerRefusal> = activity.breakerRefusals.sum()
        let refusals = refused[.refused] == 1 ? "1 call refused" : "\(refused[.refused]) calls refused"
        switch breaker.state {
        case .closed:
            var detail = "failures in a row \(breaker.consecutiveFailures) of \(breaker.failureThreshold)"
            if refused[.refused] > 0 { detail += "; \(refusals) (503) in the last hour" }
            return OpsStatus(id: "breaker", label: "Prove breaker", value: "closed", detail: detail, level: .ok)
        case .open:
            return OpsStatus(
                id: "breaker", label: "Prove breaker", value: "open",
                detail: "\(refusals) at once (503) in the last hour; a probe goes \(nextProbe())", level: .bad)
        case .halfOpen:
            return OpsStatus(
                id: "breaker", label: "Prove breaker", value: "half-open",
                detail: "one probe is trying Prove; \(refusals) (503) in the last hour", level: .warn)
        }
    }

    /// When an open breaker lets its probe through: "in 8.0 s", or "with the next call" once its time is up.
    private func nextProbe(_ breaker: CircuitBreaker? = nil) -> String {
        let breaker = breaker ?? self.breaker
        guard let until = breaker.openUntil, until > clock.now() else { return "with the next call" }
        return "in " + Self.duration(until.timeIntervalSince(clock.now()))
    }

    /// The worst endpoint's share of failed calls over the rule's window (the last
    /// `proveErrorWindowMinutes` minutes, the current one included).
    func proveErrorStatus(_ activity: RecentActivity.Snapshot) -> OpsStatus {
        let window = AlertThresholds.proveErrorWindowMinutes
        let threshold = AlertThresholds.proveErrorRate
        var worst: (endpoint: String, calls: ProveMinute, rate: Double)?
        for endpoint in activity.prove.keys.sorted() {
            let recent: ProveMinute = activity.prove[endpoint, default: []].suffix(window).sum()
            guard recent.calls > 0 else { continue }
            let rate = Double(recent.errors) / Double(recent.calls)
            if rate > worst?.rate ?? -1 { worst = (endpoint, recent, rate) }
        }
        guard let (endpoint, calls, rate) = worst else {
            return OpsStatus(
                id: "prove-errors", label: "Prove error rate", value: "–",
                detail: "no call in the last \(window) min", level: .ok)
        }
        let level: OpsStatus.Level = rate > threshold ? .bad : calls.errors > 0 ? .warn : .ok
        return OpsStatus(
            id: "prove-errors", label: "Prove error rate", value: Self.percent(rate),
            detail: "\(endpoint): \(calls.errors) of \(calls.calls) calls failed in the last \(window) min; "
                + "alert above \(Self.percent(threshold))",
            level: level)
    }

    /// Nevis at a glance: the worst endpoint's share of errors (5xx, 429, timeouts, transport errors) over
    /// `LinkRelayNevisErrorRateHigh`'s window, and the breaker, whose opening `LinkRelayNevisBreakerOpen`
    /// reports: red where either rule would fire.
    func nevisStatus(_ activity: RecentActivity.Snapshot, breaker: CircuitBreaker) -> OpsStatus {
        let window = AlertThresholds.nevisErrorWindowMinutes
        let threshold = AlertThresholds.nevisErrorRate
        var worst: (endpoint: String, calls: ProveMinute, rate: Double)?
        for endpoint in activity.nevis.keys.sorted() {
            let recent: RecentActivity.NevisMinute = activity.nevis[endpoint, default: []].suffix(window).sum()
            guard recent.calls.calls > 0 else { continue }
            let rate = Double(recent.calls.errors) / Double(recent.calls.calls)
            if rate > worst?.rate ?? -1 { worst = (endpoint, recent.calls, rate) }
        }
        let breakerWords =
            switch breaker.state {
            case .closed: "breaker closed"
            case .open: "breaker open: calls refused (503), a probe goes \(nextProbe(breaker))"
            case .halfOpen: "breaker half-open: one probe is trying Nevis"
            }
        guard let (endpoint, calls, rate) = worst else {
            return OpsStatus(
                id: "nevis", label: "Nevis error rate", value: "–",
                detail: "no call in the last \(window) min; \(breakerWords)",
                level: breaker.state == .open ? .bad : breaker.state == .halfOpen ? .warn : .ok)
        }
        let level: OpsStatus.Level =
            rate > threshold || breaker.state == .open
            ? .bad : calls.errors > 0 || breaker.state == .halfOpen ? .warn : .ok
        return OpsStatus(
            id: "nevis", label: "Nevis error rate", value: Self.percent(rate),
            detail: "\(endpoint): \(calls.errors) of \(calls.calls) calls failed in the last \(window) min; "
                + "alert above \(Self.percent(threshold)); \(breakerWords)",
            level: level)
    }

    /// The relay's own 5xx over the rule's window, with the rule's floor of answers.
    func answersStatus(_ activity: RecentActivity.Snapshot) -> OpsStatus {
        let window = AlertThresholds.serverErrorWindowMinutes
        let recent: Counts<RecentActivity.AnswerClass> = activity.answers.suffix(window).sum()
        let failed = recent[.unavailable] + recent[.serverError]
        guard recent.total > 0 else {
            return OpsStatus(
                id: "answers", label: "5xx answers", value: "–", detail: "no answer in the last \(window) min",
                level: .ok)
        }
        let ratio = Double(failed) / Double(recent.total)
        let over = ratio > AlertThresholds.serverErrorRatio && recent.total >= AlertThresholds.serverErrorMinimumAnswers
        return OpsStatus(
            id: "answers", label: "5xx answers", value: Self.percent(ratio),
            detail: "\(failed) of \(recent.total) answers in the last \(window) min (503: \(recent[.unavailable])); "
                + "alert above \(Self.percent(AlertThresholds.serverErrorRatio))",
            level: over ? .bad : failed > 0 ? .warn : .ok)
    }

    func webhookStatus(_ activity: RecentActivity.Snapshot, _ current: RelayMetrics.Readable) -> OpsStatus {
        guard let lanes = webhooks?.lanes, !lanes.isEmpty else {
            return OpsStatus(id: "webhooks", label: "Webhooks", value: "off", detail: "no receiver set", level: .off)
        }
        let taking = lanes.filter { $0.receiver.state == .closed }.count
        let value =
            lanes.count == 1
            ? (taking == 1 ? "taking messages" : "not taking messages")
            : "\(taking) of \(lanes.count) taking messages"
        let failed: Counts<WebhookOutcome> = activity.webhooks.sum()
        var details: [String] = []
        var over = failed[.failed] > 0
        if let (backlog, at) = current.webhookBacklog {
            details.append("\(backlog.pending) pending")
            over = over || backlog.pending > AlertThresholds.webhookQueueDepth
            if let oldest = backlog.oldestPending {
                let age = max(0, at.timeIntervalSince(oldest))
                details.append("oldest \(Self.duration(age))")
                over = over || age > AlertThresholds.webhookOldestPendingSeconds
            }
        }
        if failed[.failed] > 0 { details.append("\(failed[.failed]) given up in the last hour") }
        return OpsStatus(
            id: "webhooks", label: lanes.count == 1 ? "Webhook receiver" : "Webhook receivers", value: value,
            detail: details.joined(separator: ", "), level: over ? .bad : taking < lanes.count ? .warn : .ok)
    }

    func drainStatus() -> OpsStatus {
        operations.draining.isDraining
            ? OpsStatus(
                id: "drain", label: "Drain", value: "draining", detail: "/readyz answers 503; finishing what is open",
                level: .warn)
            : OpsStatus(id: "drain", label: "Drain", value: "serving", detail: "not shutting down", level: .ok)
    }

    // MARK: - the sections

    private var thisInstance: String { "this instance" }

    func channels(_ current: RelayMetrics.Readable) -> OpsSection {
        let transports: [(ChannelTransport, String)] = [
            (.websocket, "WebSocket"), (.sse, "SSE"), (.longpoll, "Long-poll"),
        ]
        let open = transports.map { current.channels[$0.0] ?? 0 }
        var section = OpsSection(id: "channels", title: "Channels open", scope: thisInstance)
        section.figures = zip(transports, open).map { OpsSection.Figure(label: $0.0.1, value: String($0.1)) }
        let nearCap =
            current.maxConnections > 0
            && Double(current.connections) / Double(current.maxConnections) > AlertThresholds.connectionsRatio
        section.figures.append(
            .init(
                label: "Connections", value: "\(current.connections) of \(current.maxConnections)",
                tone: nearCap ? "bad" : nil))
        section.charts = [
            SVGChart.bars(
                label: "Desktop channels open now, by transport",
                series: [.init(name: "open", color: Palette.blue, values: open)], rows: transports.map(\.1))
        ]
        return section
    }

    func liveSessions(_ counts: [LiveSessionCount]?) -> OpsSection {
        var section = OpsSection(
            id: "sessions", title: "Sessions in progress",
            scope: sharedStore ? "all instances (from the store)" : "this instance (from the store)")
        guard let counts else {
            section.note = "The store did not answer: the sessions in progress are unknown right now."
            return section
        }
        let waiting = LiveSessions.buckets(counts, .waiting)
        let tapped = LiveSessions.buckets(counts, .tapped)
        section.figures = [
            .init(label: "Waiting", value: String(waiting.reduce(0, +))),
            .init(label: "Tapped", value: String(tapped.reduce(0, +))),
        ]
        section.charts = [
            SVGChart.bars(
                label: "Holds in progress by age",
                series: [
                    .init(name: "waiting", color: Palette.blue, values: waiting),
                    .init(name: "tapped", color: Palette.amber, values: tapped),
                ], rows: LiveSessions.ageBuckets.map(\.label))
        ]
        return section
    }

    func lastHour(_ activity: RecentActivity.Snapshot) -> OpsSection {
        var section = OpsSection(id: "activity", title: "The last hour, per minute", scope: thisInstance)
        let total: Counts<RecentActivity.Kind> = activity.sessions.sum()
        let ended = total.total - total[.tapped]
        section.figures = [
            .init(label: "Taps", value: String(total[.tapped])),
            .init(label: "Verified", value: String(total[.verified])),
            .init(label: "Failed", value: String(total[.failed])),
            .init(label: "Possession required", value: String(total[.possessionRequired])),
            .init(label: "Cancelled", value: String(total[.cancelled])),
            .init(label: "Expired", value: String(total[.expired])),
            .init(
                label: "Expiry ratio",
                value: ended > 0 ? Self.percent(Double(total[.expired]) / Double(ended)) : "–",
                tone: ended >= AlertThresholds.expiryMinimumEnded
                    && Double(total[.expired]) / Double(ended) > AlertThresholds.expiryRatio ? "bad" : nil),
        ]
        let titles = minuteTitles(activity.at)
        func series(_ kind: RecentActivity.Kind, _ name: String, _ color: String) -> SVGChart.Series {
            .init(name: name, color: color, values: activity.sessions.map { $0[kind] })
        }
        section.charts = [
            SVGChart.columns(
                label: "Taps per minute, last 60 minutes", series: [series(.tapped, "taps", Palette.blue)],
                titles: titles, axis: ("60 min ago", "now")),
            SVGChart.columns(
                label: "Outcomes and expiries per minute, last 60 minutes",
                series: [
                    series(.verified, "verified", Palette.green), series(.failed, "failed", Palette.red),
                    series(.possessionRequired, "possession required", Palette.amber),
                    series(.cancelled, "cancelled", Palette.grey), series(.expired, "expired", Palette.purple),
                ], titles: titles, axis: ("60 min ago", "now")),
        ]
        return section
    }

    func prove(_ activity: RecentActivity.Snapshot) -> OpsSection {
        var section = OpsSection(id: "prove", title: "Calls to Prove, last hour", scope: thisInstance)
        let endpoints = activity.prove.keys.sorted()
        guard !endpoints.isEmpty else {
            section.note = "No call to Prove in the last hour."
            return section
        }
        func seconds(_ value: Double?) -> String { value.map { Self.duration($0) } ?? "–" }
        section.table = OpsSection.Table(
            columns: ["Endpoint", "Calls", "Errors", "Error rate", "Mean", "p50", "p99"],
            rows: endpoints.map { endpoint in
                let hour: ProveMinute = activity.prove[endpoint, default: []].sum()
                let rate = hour.calls > 0 ? Double(hour.errors) / Double(hour.calls) : nil
                let p99 = hour.quantile(AlertThresholds.proveSlowQuantile)
                return [
                    .init(endpoint), .init(String(hour.calls)), .init(String(hour.errors)),
                    .init(
                        rate.map { Self.percent($0) } ?? "–",
                        tone: (rate ?? 0) > AlertThresholds.proveErrorRate ? "bad" : nil),
                    .init(seconds(hour.meanSeconds)), .init(seconds(hour.quantile(0.5))),
                    .init(seconds(p99), tone: (p99 ?? 0) > AlertThresholds.proveSlowSeconds ? "bad" : nil),
                ]
            })
        let minutes = (0..<MinuteSeries<ProveMinute>.length).map { index in
            endpoints.map { activity.prove[$0]?[index] ?? .zero }.sum() as ProveMinute
        }
        section.charts = [
            SVGChart.columns(
                label: "Calls to Prove per minute, last 60 minutes",
                series: [
                    .init(name: "answered (2xx)", color: Palette.blue, values: minutes.map { $0.calls - $0.errors }),
                    .init(name: "errors (non-2xx, timeout)", color: Palette.red, values: minutes.map(\.errors)),
                ], titles: minuteTitles(activity.at), axis: ("60 min ago", "now"))
        ]
        section.note =
            "p50 and p99 are estimated from the latency buckets of linkrelay_prove_call_duration_seconds. "
            + "Red: over an alert's threshold (error rate \(Self.percent(AlertThresholds.proveErrorRate)), "
            + "p99 \(Self.duration(AlertThresholds.proveSlowSeconds)))."
        return section
    }

    func circuitBreaker(_ activity: RecentActivity.Snapshot) -> OpsSection {
        var section = OpsSection(id: "breaker", title: "Circuit breaker around Prove", scope: thisInstance)
        let refused: Counts<RecentActivity.BreakerRefusal> = activity.breakerRefusals.sum()
        // The count of failures in a row is the closed state's: open and half-open say what comes next instead.
        switch breaker.state {
        case .closed:
            section.figures = [
                .init(label: "State", value: "closed", tone: "ok"),
                .init(
                    label: "Failures in a row", value: "\(breaker.consecutiveFailures) of \(breaker.failureThreshold)"),
            ]
        case .open:
            section.figures = [
                .init(label: "State", value: "open", tone: "bad"),
                .init(label: "Next probe", value: nextProbe()),
            ]
        case .halfOpen:
            section.figures = [
                .init(label: "State", value: "half-open", tone: "warn"),
                .init(label: "Probe", value: "trying Prove"),
            ]
        }
        section.figures += [
            .init(
                label: "Refused (503), last hour", value: String(refused[.refused]),
                tone: refused[.refused] > 0 ? "bad" : nil),
            .init(label: "Opens after", value: "\(breaker.failureThreshold) failures in a row"),
            .init(label: "Stays open for", value: Self.duration(breaker.openDuration)),
        ]
        section.charts = [
            SVGChart.columns(
                label: "Calls the open breaker refused per minute, last 60 minutes",
                series: [
                    .init(name: "refused", color: Palette.red, values: activity.breakerRefusals.map { $0[.refused] })
                ], titles: minuteTitles(activity.at), axis: ("60 min ago", "now"))
        ]
        section.note = "Each refused call is a request answered 503 at once, without asking Prove."
        return section
    }

    /// Nevis's endpoints that the relay asks for an operation's status: Auth Cloud's (and the embedded
    /// sandbox's) and nevisFIDO's.
    static let nevisStatusEndpoints: Set = ["status", "fido-status"]

    /// Nevis (with `--nevis`): its calls by endpoint and answer, the status questions the open operations
    /// cost, the open operations by age (the store's), and its breaker.
    func nevis(
        _ activity: RecentActivity.Snapshot, _ counts: [LiveSessionCount]?, breaker: CircuitBreaker
    ) -> OpsSection {
        var section = OpsSection(
            id: "nevis", title: "Nevis",
            scope: "open operations: " + (sharedStore ? "all instances (the store)" : "the store")
                + "; calls and breaker: this instance")
        let endpoints = activity.nevis.keys.sorted()
        let titles = minuteTitles(activity.at)
        let minutes = (0..<MinuteSeries<ProveMinute>.length).map { index in
            endpoints.map { activity.nevis[$0]?[index] ?? .zero }.sum() as RecentActivity.NevisMinute
        }
        let questions = (0..<MinuteSeries<ProveMinute>.length).map { index in
            endpoints.filter(Self.nevisStatusEndpoints.contains).reduce(0) {
                $0 + (activity.nevis[$1]?[index].calls.calls ?? 0)
            }
        }
        // Per second over the alert's window: its whole minutes and the seconds of the current one.
        let window = AlertThresholds.nevisErrorWindowMinutes
        let intoMinute = activity.at.timeIntervalSince1970.truncatingRemainder(dividingBy: 60)
        let perSecond = Double(questions.suffix(window).reduce(0, +)) / (Double(window - 1) * 60 + max(intoMinute, 1))
        let hour: RecentActivity.NevisMinute = minutes.sum()
        let refused: Counts<RecentActivity.BreakerRefusal> = activity.nevisBreakerRefusals.sum()
        let waiting = counts.map { LiveSessions.buckets($0, .waiting, flow: .nevis) }
        let tapped = counts.map { LiveSessions.buckets($0, .tapped, flow: .nevis) }
        let open = zip(waiting ?? [], tapped ?? []).reduce(0) { $0 + $1.0 + $1.1 }
        section.figures = [
            .init(label: "Open operations", value: counts == nil ? "–" : String(open)),
            .init(label: "Status questions per second", value: String(format: "%.2f", perSecond)),
            .init(label: "Calls, last hour", value: String(hour.calls.calls)),
            .init(
                label: "Errors, last hour", value: String(hour.answers[.failed]),
                tone: hour.answers[.failed] > 0 ? "bad" : nil),
        ]
        switch breaker.state {
        case .closed:
            section.figures.append(.init(label: "Breaker", value: "closed", tone: "ok"))
        case .open:
            section.figures.append(.init(label: "Breaker", value: "open", tone: "bad"))
            section.figures.append(.init(label: "Next probe", value: nextProbe(breaker)))
        case .halfOpen:
            section.figures.append(.init(label: "Breaker", value: "half-open", tone: "warn"))
        }
        section.figures.append(
            .init(
                label: "Refused by the breaker (503), last hour", value: String(refused[.refused]),
                tone: refused[.refused] > 0 ? "bad" : nil))
        func seconds(_ value: Double?) -> String { value.map { Self.duration($0) } ?? "–" }
        if !endpoints.isEmpty {
            section.table = OpsSection.Table(
                columns: ["Endpoint", "Calls", "2xx", "4xx", "5xx, 429, timeout, error", "Error rate", "p50", "p99"],
                rows: endpoints.map { endpoint in
                    let calls: RecentActivity.NevisMinute = activity.nevis[endpoint, default: []].sum()
                    let rate = calls.calls.calls > 0 ? Double(calls.calls.errors) / Double(calls.calls.calls) : nil
                    return [
                        .init(endpoint), .init(String(calls.calls.calls)), .init(String(calls.answers[.answered])),
                        .init(String(calls.answers[.refused])),
                        .init(String(calls.answers[.failed]), tone: calls.answers[.failed] > 0 ? "bad" : nil),
                        .init(
                            rate.map { Self.percent($0) } ?? "–",
                            tone: (rate ?? 0) > AlertThresholds.nevisErrorRate ? "bad" : nil),
                        .init(seconds(calls.calls.quantile(0.5))), .init(seconds(calls.calls.quantile(0.99))),
                    ]
                })
        }
        section.charts = [
            SVGChart.columns(
                label: "Calls to Nevis per minute by answer, last 60 minutes",
                series: [
                    .init(name: "2xx", color: Palette.blue, values: minutes.map { $0.answers[.answered] }),
                    .init(name: "4xx", color: Palette.amber, values: minutes.map { $0.answers[.refused] }),
                    .init(
                        name: "5xx, 429, timeout, error", color: Palette.red,
                        values: minutes.map { $0.answers[.failed] }),
                ], titles: titles, axis: ("60 min ago", "now")),
            SVGChart.columns(
                label: "Status questions to Nevis per minute, last 60 minutes",
                series: [.init(name: "status questions", color: Palette.purple, values: questions)], titles: titles,
                axis: ("60 min ago", "now")),
        ]
        if let waiting, let tapped {
            section.charts.append(
                SVGChart.bars(
                    label: "Open Nevis operations by age",
                    series: [
                        .init(name: "waiting", color: Palette.blue, values: waiting),
                        .init(name: "the app has it", color: Palette.amber, values: tapped),
                    ], rows: LiveSessions.ageBuckets.map(\.label)))
        }
        var notes = [
            endpoints.isEmpty
                ? "No call to Nevis in the last hour."
                : "Each HTTP attempt, retries included, by linkrelay_nevis_calls_total's endpoint.",
            "The relay asks Nevis about each open operation about once a second at first, every 5 s later.",
        ]
        if counts == nil { notes.append("The store did not answer: the open operations are unknown right now.") }
        notes.append(
            "Red: errors, or over LinkRelayNevisErrorRateHigh's \(Self.percent(AlertThresholds.nevisErrorRate)).")
        section.note = notes.joined(separator: " ")
        return section
    }

    func answers(_ activity: RecentActivity.Snapshot) -> OpsSection {
        var section = OpsSection(id: "answers", title: "The relay's answers, last hour", scope: thisInstance)
        let hour: Counts<RecentActivity.AnswerClass> = activity.answers.sum()
        section.figures = [
            .init(label: "Answers", value: String(hour.total)),
            .init(label: "4xx", value: String(hour[.clientError])),
            .init(label: "503", value: String(hour[.unavailable]), tone: hour[.unavailable] > 0 ? "bad" : nil),
            .init(label: "Other 5xx", value: String(hour[.serverError]), tone: hour[.serverError] > 0 ? "bad" : nil),
        ]
        func series(_ kind: RecentActivity.AnswerClass, _ name: String, _ color: String) -> SVGChart.Series {
            .init(name: name, color: color, values: activity.answers.map { $0[kind] })
        }
        section.charts = [
            SVGChart.columns(
                label: "Answers per minute by status, last 60 minutes",
                series: [
                    series(.success, "1xx–3xx", Palette.blue), series(.clientError, "4xx", Palette.amber),
                    series(.unavailable, "503", Palette.red), series(.serverError, "other 5xx", Palette.purple),
                ], titles: minuteTitles(activity.at), axis: ("60 min ago", "now"))
        ]
        section.note = "By route and status: linkrelay_http_responses_total."
        return section
    }

    func webhookQueue(_ activity: RecentActivity.Snapshot, _ current: RelayMetrics.Readable) -> OpsSection {
        var section = OpsSection(id: "webhooks", title: "Webhooks", scope: thisInstance)
        guard let webhooks else {
            section.note = "Webhooks are off (no --webhook-url, and no tenant has a webhook)."
            return section
        }
        if let (backlog, at) = current.webhookBacklog {
            let oldest = backlog.oldestPending.map { Self.duration(max(0, at.timeIntervalSince($0))) } ?? "–"
            let age = backlog.oldestPending.map { max(0, at.timeIntervalSince($0)) } ?? 0
            section.figures = [
                .init(
                    label: "Pending", value: String(backlog.pending),
                    tone: backlog.pending > AlertThresholds.webhookQueueDepth
                        ? "bad" : backlog.pending > 0 ? "warn" : nil),
                .init(
                    label: "Oldest pending", value: oldest,
                    tone: age > AlertThresholds.webhookOldestPendingSeconds ? "bad" : nil),
            ]
            section.scope = sharedStore ? "backlog: all instances (the store); attempts: this instance" : thisInstance
        } else {
            section.note = "The sender has not looked at the outbox yet."
        }
        // One receiver per tenant with a webhook, named by its tenant (the operators' own page).
        for lane in webhooks.lanes {
            let receiver: String
            switch lane.receiver.state {
            case .closed: receiver = "taking messages"
            case .open: receiver = "not taking messages (one try every 5 s)"
            case .halfOpen: receiver = "being tried"
            }
            section.figures.append(
                .init(
                    label: webhooks.lanes.count == 1 ? "Receiver" : "Receiver, \(lane.tenant)", value: receiver,
                    tone: lane.receiver.state == .closed ? "ok" : "bad"))
        }
        func series(_ outcome: WebhookOutcome, _ color: String) -> SVGChart.Series {
            .init(name: outcome.rawValue, color: color, values: activity.webhooks.map { $0[outcome] })
        }
        section.charts = [
            SVGChart.columns(
                label: "Webhook attempts per minute, last 60 minutes",
                series: [
                    series(.delivered, Palette.green), series(.retry, Palette.amber), series(.failed, Palette.red),
                ],
                titles: minuteTitles(activity.at), axis: ("60 min ago", "now"))
        ]
        return section
    }

    func prefill(_ activity: RecentActivity.Snapshot) -> OpsSection {
        var section = OpsSection(id: "prefill", title: "Pre-Fill steps, last hour", scope: thisInstance)
        let steps = RelayMetrics.PrefillStep.allCases.filter { activity.prefill[$0] != nil }
        guard !steps.isEmpty else {
            section.note = "No Pre-Fill step in the last hour."
            return section
        }
        section.table = OpsSection.Table(
            columns: ["Step", "Success", "Failure"],
            rows: steps.map { step in
                let hour: Counts<RecentActivity.StepOutcome> = activity.prefill[step, default: []].sum()
                return [.init(step.rawValue), .init(String(hour[.success])), .init(String(hour[.failure]))]
            })
        section.note = "Prove's success on each step; Prove's errors are under Calls to Prove."
        return section
    }

    // MARK: - words and numbers

    /// The 60 minutes up to `now`, as the charts' hover titles say them ("14:05 UTC").
    private func minuteTitles(_ now: Date) -> [String] {
        let current = MinuteSeries<ProveMinute>.minute(of: now)
        return ((current - 59)...current).map { minute in
            Self.clockTime(Date(timeIntervalSince1970: TimeInterval(minute * 60)), seconds: false)
        }
    }

    /// `HH:mm UTC` or `HH:mm:ss UTC`.
    static func clockTime(_ date: Date, seconds: Bool) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let day = ((total % 86400) + 86400) % 86400
        let time = String(format: "%02d:%02d", day / 3600, day / 60 % 60)
        return (seconds ? time + String(format: ":%02d", day % 60) : time) + " UTC"
    }

    static func percent(_ ratio: Double) -> String { String(format: "%.1f %%", ratio * 100) }

    /// Milliseconds under a second (with a tenth under ten), seconds under two minutes, else minutes.
    static func duration(_ seconds: Double) -> String {
        if seconds < 0.01 { return String(format: "%.1f ms", seconds * 1000) }
        if seconds < 1 { return String(format: "%.0f ms", seconds * 1000) }
        if seconds < 120 { return String(format: "%.1f s", seconds) }
        return String(format: "%.0f min", seconds / 60)
    }
}

/// The colours of the charts' series, readable on a light and a dark page.
enum Palette {
    static let blue = "#2563eb"
    static let green = "#15803d"
    static let red = "#b91c1c"
    static let amber = "#d97706"
    static let grey = "#6b7280"
    static let purple = "#7c3aed"
}

/// One section of the ops page: a title, whose figures they are, and any of big figures, charts
/// (SVG from `SVGChart`), a table and a note, shown in that order by `templates/ops.mustache`.
struct OpsSection: Sendable {
    struct Figure: Sendable {
        var label: String
        var value: String
        /// `ok`, `warn` or `bad`: how the figure is coloured; nil for plain.
        var tone: String? = nil
    }

    struct Table: Sendable {
        var columns: [String]
        var rows: [[Cell]]
    }

    struct Cell: Sendable {
        var text: String
        /// As a figure's: `bad` for a value over an alert's threshold.
        var tone: String?

        init(_ text: String, tone: String? = nil) {
            self.text = text
            self.tone = tone
        }
    }

    /// The section's HTML id: stable, for links and tests.
    var id: String
    var title: String
    /// Whose figures: "this instance", or the store's (every instance's with PostgreSQL).
    var scope: String
    var figures: [Figure] = []
    var charts: [String] = []
    var table: Table? = nil
    var note: String? = nil

    /// What the template reads.
    var values: [String: Any] {
        var values: [String: Any] = [
            "id": id, "title": title, "scope": scope, "hasFigures": !figures.isEmpty,
            "figures": figures.map { figure -> [String: Any] in
                var values: [String: Any] = ["label": figure.label, "value": figure.value]
                if let tone = figure.tone { values["tone"] = tone }
                return values
            },
            "charts": charts.map { ["svg": $0] },
        ]
        if let table {
            values["table"] = [
                "columns": table.columns,
                "rows": table.rows.map { row in
                    [
                        "cells": row.map { cell -> [String: Any] in
                            var values: [String: Any] = ["text": cell.text]
                            if let tone = cell.tone { values["tone"] = tone }
                            return values
                        }
                    ]
                },
            ]
        }
        if let note { values["note"] = note }
        return values
    }
}

/// One box of the ops page's status strip: what it is about, its state in a word or a figure, what
/// lies behind that, and its colour.
struct OpsStatus: Sendable {
    enum Level: String, Sendable {
        case ok
        case warn
        case bad
        /// Not in use (webhooks off): no colour.
        case off
    }

    /// The box's HTML id is `status-<id>`: stable, for links and tests.
    var id: String
    var label: String
    var value: String
    var detail: String
    var level: Level

    var values: [String: Any] {
        ["id": id, "label": label, "value": value, "detail": detail, "level": level.rawValue]
    }
}
