import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOCore
import NIOHTTP1

/// `GET /ops` (API.md v1.1): the operators' live page, behind HTTP Basic with an API key as the password
/// (any user name). Aggregates only: no session id, phone number, token or key appears on it.
///
/// The page is a list of sections (`OpsSection`), each from one source and each saying whose figures
/// it shows: this instance's (channels, the last hour, Prove, the breaker, webhook attempts), or the
/// store's, which with PostgreSQL are every instance's (live sessions, the webhook backlog). The page
/// refreshes itself in place with a script served by the relay (`/assets/ops.js`), so its CSP stays
/// that of the other pages plus `script-src 'self'; connect-src 'self'`.
final class OpsPage: Sendable {
    let metrics: RelayMetrics
    let live: LiveSessions
    /// True with PostgreSQL: the store is shared by every instance.
    let sharedStore: Bool
    let breaker: CircuitBreaker
    let webhooks: WebhookSender?
    let pages: Pages
    let clock: any RelayClock

    static let realm = "LinkRelay ops"
    static let defaultRefresh = 10
    static let refreshRange = 2...300

    init(
        metrics: RelayMetrics, live: LiveSessions, sharedStore: Bool, breaker: CircuitBreaker,
        webhooks: WebhookSender?, pages: Pages, clock: any RelayClock
    ) {
        self.metrics = metrics
        self.live = live
        self.sharedStore = sharedStore
        self.breaker = breaker
        self.webhooks = webhooks
        self.pages = pages
        self.clock = clock
    }

    /// `GET /ops[?refresh=S]`, behind the route's guard (`Route.Guard.opsBasic`: every request spends a
    /// token of the client's ops limit; without the password, a key of the `default` tenant, the
    /// operators', 401 with a Basic challenge, counted as a security event; another tenant's sees no
    /// aggregate): the page, refreshed every S seconds (10 by default, held to 2...300).
    func show(_ request: RelayRequest) throws -> Reply {
        let asked = try request.queryItem("refresh").flatMap { Int($0) } ?? Self.defaultRefresh
        let refresh = min(max(asked, Self.refreshRange.lowerBound), Self.refreshRange.upperBound)
        return .later { [self] in
            let sections = await sections()
            let now = clock.now()
            return pages.page(
                "ops",
                [
                    "refreshSeconds": refresh, "updated": Self.clockTime(now, seconds: true),
                    "updatedISO": ISO8601Milliseconds.string(now), "sections": sections.map(\.values),
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

    /// The page's sections, in order. A section is one source's figures: add one here.
    func sections() async -> [OpsSection] {
        let activity = metrics.recent.snapshot()
        let current = metrics.current
        return [
            channels(current),
            await liveSessions(),
            lastHour(activity),
            prove(activity),
            circuitBreaker(),
            webhookQueue(activity, current),
            prefill(activity),
        ]
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
        section.figures.append(
            .init(label: "Connections", value: "\(current.connections) of \(current.maxConnections)"))
        section.charts = [
            SVGChart.bars(
                label: "Desktop channels open now, by transport",
                series: [.init(name: "open", color: Palette.blue, values: open)], rows: transports.map(\.1))
        ]
        return section
    }

    func liveSessions() async -> OpsSection {
        var section = OpsSection(
            id: "sessions", title: "Sessions in progress",
            scope: sharedStore ? "all instances (from the store)" : "this instance (from the store)")
        let counts: [LiveSessionCount]
        do {
            counts = try await live.counts()
        } catch {
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
                value: ended > 0 ? Self.percent(Double(total[.expired]) / Double(ended)) : "–"),
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
                return [
                    endpoint, String(hour.calls), String(hour.errors),
                    hour.calls > 0 ? Self.percent(Double(hour.errors) / Double(hour.calls)) : "–",
                    seconds(hour.meanSeconds), seconds(hour.quantile(0.5)), seconds(hour.quantile(0.99)),
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
        section.note = "p50 and p99 are estimated from the latency buckets of linkrelay_prove_call_duration_seconds."
        return section
    }

    func circuitBreaker() -> OpsSection {
        var section = OpsSection(id: "breaker", title: "Circuit breaker around Prove", scope: thisInstance)
        let state = breaker.state
        let word: String
        let tone: String
        switch state {
        case .closed: (word, tone) = ("closed", "ok")
        case .open: (word, tone) = ("open", "bad")
        case .halfOpen: (word, tone) = ("half-open", "warn")
        }
        section.figures = [
            .init(label: "State", value: word, tone: tone),
            .init(label: "Failures in a row", value: "\(breaker.consecutiveFailures) of \(breaker.failureThreshold)"),
            .init(label: "Stays open for", value: Self.duration(breaker.openDuration)),
        ]
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
            section.figures = [
                .init(label: "Pending", value: String(backlog.pending), tone: backlog.pending > 0 ? "warn" : nil),
                .init(label: "Oldest pending", value: oldest),
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
                return [step.rawValue, String(hour[.success]), String(hour[.failure])]
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
        var rows: [[String]]
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
            values["table"] = ["columns": table.columns, "rows": table.rows.map { ["cells": $0] }]
        }
        if let note { values["note"] = note }
        return values
    }
}
