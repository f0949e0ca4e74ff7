import Foundation
import LinkRelayCore
import LinkRelaySupport
import Prometheus
import ProveAPI

/// The relay's Prometheus metrics. One registry per application, so tests can run several apps.
public final class RelayMetrics: ProveCallObserver {
    public let registry = PrometheusCollectorRegistry()

    /// By tenant, made at a tenant's first use: tenants are few, and their names are checked.
    private let sessionsCreated = Locked<[String: Counter]>([:])
    let expirations: Counter
    private let landingsAccepted: Counter
    private let landingsRepeated: Counter
    private let landingsRejected: [LandingRejection: Counter]
    /// By outcome and tenant (`outcome tenant`), made at first use.
    private let outcomes = Locked<[String: Counter]>([:])
    private let openChannels: [ChannelTransport: Gauge]
    private let proveCalls = ProviderCalls(
        calls: "linkrelay_prove_calls_total", durations: "linkrelay_prove_call_duration_seconds", name: "Prove")
    private let nevisCalls = ProviderCalls(
        calls: "linkrelay_nevis_calls_total", durations: "linkrelay_nevis_call_duration_seconds", name: "Nevis")
    private let breakerOpen: Gauge
    private let breakerRefusals: Counter
    private let nevisBreakerOpen: Gauge
    private let nevisBreakerRefusals: Counter
    /// By `route status`, made at first use: routes are the route table's patterns (or `unmatched`), so
    /// the label set stays bounded whatever paths clients ask for.
    /// Keyed without building a string: every answer looks its counter up.
    private struct RouteStatus: Hashable {
        let route: String
        let status: Int
    }
    private let httpResponses = Locked<[RouteStatus: Counter]>([:])
    private let limitTrips: [LimitKind: Counter]
    private let securityEvents = Locked<[String: Counter]>([:])
    private let lastQuestions: [Bool: Counter]
    private let retained: [Retained: Counter]
    private let finishes: Counter
    private let binds: [Bool: Counter]
    private let prefillSteps: [PrefillStep: [Bool: Counter]]
    private let webhookAttempts: [WebhookOutcome: Counter]
    private let webhookQueueDepth: Gauge
    private let webhookOldestPending: Gauge
    private let taps: Counter
    private let openConnections: Gauge
    private let maxConnections: Gauge
    private let inProgress: [SessionState: [Gauge]]
    private let nevisOpen: [Gauge]
    /// The last hour, minute by minute, for the ops page.
    let recent: RecentActivity
    /// What the gauges say, readable (Prometheus's gauges are write-only): for the ops page.
    private let readable = Locked(Readable())

    struct Readable: Sendable {
        var channels: [ChannelTransport: Int] = [:]
        var connections = 0
        var maxConnections = 0
        /// The webhook sender's last look at the outbox, and when it looked.
        var webhookBacklog: (backlog: WebhookBacklog, at: Date)?
    }

    /// `clock` stamps the ops page's per-minute counts (`recent`). Each of `tenants` has its counters
    /// at 0 from the start, so that a rate over them begins at the first session.
    public init(clock: any RelayClock = EventLoopClock(), tenants: [String] = [Tenant.defaultName]) {
        recent = RecentActivity(clock: clock)
        taps = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_taps_total", unitName: "",
                helpText: "Sessions tapped: the first valid landing of each (its tapped event)"))
        openConnections = registry.makeGauge(
            descriptor: .init(
                metricName: "linkrelay_open_connections", unitName: "",
                helpText: "Connections open now on the main listener (channels, requests, idle keep-alives)"))
        maxConnections = registry.makeGauge(
            descriptor: .init(
                metricName: "linkrelay_max_connections", unitName: "",
                helpText: "Connections the main listener holds at most (--max-connections)"))
        var inProgress: [SessionState: [Gauge]] = [:]
        let registry = registry
        for state in [SessionState.waiting, .tapped] {
            inProgress[state] = LiveSessions.ageBuckets.map { bucket in
                registry.makeGauge(
                    descriptor: .init(
                        metricName: "linkrelay_sessions_in_progress", unitName: "",
                        helpText:
                            "Sessions waiting or tapped, by the age of their hold, as the store counted them at the last scrape (with PostgreSQL every instance's: take the max, not the sum)"
                    ), labels: [("state", state.rawValue), ("age", bucket.metric)])
            }
        }
        self.inProgress = inProgress
        nevisOpen = LiveSessions.ageBuckets.map { bucket in
            registry.makeGauge(
                descriptor: .init(
                    metricName: "linkrelay_nevis_operations_open", unitName: "",
                    helpText:
                        "Nevis sessions waiting or tapped (operations the relay asks Nevis about), by the age of their hold, as the store counted them at the last scrape (with PostgreSQL every instance's: take the max, not the sum)"
                ), labels: [("age", bucket.metric)])
        }
        expirations = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_expirations_total", unitName: "",
                helpText: "Sessions that reached the end of their hold without a result"))
        landingsAccepted = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_landings_total", unitName: "", helpText: "Phone landings on /l/{key}, by result"),
            labels: [("result", "accepted")])
        landingsRepeated = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_landings_total", unitName: "", helpText: "Phone landings on /l/{key}, by result"),
            labels: [("result", "final_page")])
        var rejected: [LandingRejection: Counter] = [:]
        for reason in LandingRejection.allCases {
            rejected[reason] = registry.makeCounter(
                descriptor: .init(
                    metricName: "linkrelay_landings_total", unitName: "",
                    helpText: "Phone landings on /l/{key}, by result"),
                labels: [("result", "rejected"), ("reason", reason.rawValue)])
        }
        landingsRejected = rejected
        var channels: [ChannelTransport: Gauge] = [:]
        for transport in ChannelTransport.allCases {
            channels[transport] = registry.makeGauge(
                descriptor: .init(
                    metricName: "linkrelay_open_channels", unitName: "",
                    helpText: "Desktop channels open now, by transport"), labels: [("transport", transport.rawValue)])
        }
        openChannels = channels
        breakerOpen = registry.makeGauge(
            descriptor: .init(
                metricName: "linkrelay_prove_breaker_open", unitName: "",
                helpText: "1 while the circuit breaker around Prove is open or half-open, else 0"))
        breakerRefusals = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_prove_breaker_refusals_total", unitName: "",
                helpText: "Calls to Prove the open breaker refused at once (a create answers 503 for each)"))
        nevisBreakerOpen = registry.makeGauge(
            descriptor: .init(
                metricName: "linkrelay_nevis_breaker_open", unitName: "",
                helpText: "1 while the circuit breaker around Nevis is open or half-open, else 0"))
        nevisBreakerRefusals = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_nevis_breaker_refusals_total", unitName: "",
                helpText: "Calls to Nevis the open breaker refused at once"))
        limitTrips = Self.counters(
            registry, "linkrelay_limit_trips_total",
            "Requests turned away with 429 by a rate or connection limit, by limit", label: "limit",
            LimitKind.allCases.map { ($0, $0.rawValue) })
        retained = Self.counters(
            registry, "linkrelay_retention_total",
            "What the retention took: Pre-Fill individuals erased, ended sessions and settled webhook messages deleted",
            label: "what", Retained.allCases.map { ($0, $0.rawValue) })
        lastQuestions = Self.counters(
            registry, "linkrelay_last_questions_total",
            "Sessions that never landed, asked about once as their hold ended, by how they ended", label: "outcome",
            [(true, "verified"), (false, "expired")])
        binds = Self.counters(
            registry, "linkrelay_binds_total", "Binds (POST /v1/sessions/{id}/bind) Prove answered, by its success",
            label: "outcome", [(true, "bound"), (false, "refused")])
        var prefillSteps: [PrefillStep: [Bool: Counter]] = [:]
        for step in PrefillStep.allCases {
            prefillSteps[step] = Self.counters(
                registry, "linkrelay_prefill_steps_total",
                "Pre-Fill steps Prove answered, by step (start, validate, challenge, complete) and its success",
                label: "outcome", [(true, "success"), (false, "failure")], extra: [("step", step.rawValue)])
        }
        self.prefillSteps = prefillSteps
        webhookAttempts = Self.counters(
            registry, "linkrelay_webhook_deliveries_total",
            "Webhook attempts, by outcome: delivered, retry (not delivered, tried again later), failed (given up)",
            label: "outcome", WebhookOutcome.allCases.map { ($0, $0.rawValue) })
        webhookQueueDepth = registry.makeGauge(
            descriptor: .init(
                metricName: "linkrelay_webhook_queue_depth", unitName: "",
                helpText: "Webhook messages not yet delivered nor given up (read every 5 s)"))
        webhookOldestPending = registry.makeGauge(
            descriptor: .init(
                metricName: "linkrelay_webhook_oldest_pending_seconds", unitName: "",
                helpText: "Age of the oldest webhook message not yet delivered nor given up, 0 when none"))
        finishes = registry.makeCounter(
            descriptor: .init(
                metricName: "linkrelay_finishes_total", unitName: "",
                helpText: "Finish calls (POST /v1/sessions/{id}/finish) taken on live sessions"))
        for tenant in tenants {
            _ = createdCounter(tenant)
            for kind in Self.endings { _ = outcomeCounter(kind, tenant) }
        }
    }

    /// How a session can end: the `outcome` label of `linkrelay_outcomes_total`.
    static let endings = ["verified", "failed", "possession_required", "expired", "cancelled"]

    /// One counter of `name` per value of its one label.
    private static func counters<Key: Hashable>(
        _ registry: PrometheusCollectorRegistry, _ name: String, _ help: String, label: String,
        _ values: [(Key, String)], extra: [(String, String)] = []
    ) -> [Key: Counter] {
        var counters: [Key: Counter] = [:]
        for (key, value) in values {
            counters[key] = registry.makeCounter(
                descriptor: .init(metricName: name, unitName: "", helpText: help), labels: extra + [(label, value)])
        }
        return counters
    }

    func breakerChanged(open: Bool) { breakerOpen.set(Int64(open ? 1 : 0)) }
    func breakerRefused() {
        breakerRefusals.increment()
        recent.breakerRefused()
    }

    func nevisBreakerChanged(open: Bool) { nevisBreakerOpen.set(Int64(open ? 1 : 0)) }
    func nevisBreakerRefused() {
        nevisBreakerRefusals.increment()
        recent.nevisBreakerRefused()
    }

    /// Every answer the relay writes (`ResponseWriter.head`): `route` is the route table's pattern of
    /// the request's line, or `unmatched`. The embedded sandboxes' answers (`Routes.sandboxRoutes`: a
    /// simulated Prove's injected 503s among them) are not the relay's: they are counted in
    /// `linkrelay_sandbox_responses_total`, and neither in the relay's answers, its 5xx ratio and alert,
    /// nor on the ops page.
    func httpResponse(route: String, status: Int) {
        let sandbox = Routes.sandboxRoutes.contains(route)
        let counter = httpResponses.withLock { counters in
            let key = RouteStatus(route: route, status: status)
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: sandbox
                    ? .init(
                        metricName: "linkrelay_sandbox_responses_total", unitName: "",
                        helpText: "Answers of the embedded sandboxes (not the relay's own), by route and status code")
                    : .init(
                        metricName: "linkrelay_http_responses_total", unitName: "",
                        helpText:
                            "Answers the relay wrote, by route (the route table's path pattern, or unmatched) and status code"
                    ), labels: [("route", route), ("status", String(status))])
            counters[key] = counter
            return counter
        }
        counter.increment()
        if !sandbox { recent.answered(status: status) }
    }
    /// A limit trip counts in `linkrelay_limit_trips_total`, anything else turned away in
    /// `linkrelay_security_events_total`.
    func securityEvent(_ event: SecurityEvents.Event) {
        if case .limit(let kind) = event { return limitTrips[kind]?.increment() ?? () }
        let name = event.name
        let counter = securityEvents.withLock { counters in
            if let counter = counters[name] { return counter }
            let counter = registry.makeCounter(
                descriptor: .init(
                    metricName: "linkrelay_security_events_total", unitName: "",
                    helpText: "Connections and requests turned away for a timeout, a refused origin or a protocol error"
                ),
                labels: [("event", name)])
            counters[name] = counter
            return counter
        }
        counter.increment()
    }

    func lastQuestion(verified: Bool) { lastQuestions[verified]?.increment() }

    /// What `RetentionSweeper` takes; the label of `linkrelay_retention_total`.
    enum Retained: String, CaseIterable {
        case individuals
        case sessions
        case webhookMessages = "webhook_messages"
    }
    func retained(_ what: Retained, _ count: Int) {
        if count > 0 { retained[what]?.increment(by: Int64(count)) }
    }
    func finishTaken() { finishes.increment() }
    func webhookAttempt(_ outcome: WebhookOutcome) {
        webhookAttempts[outcome]?.increment()
        recent.webhookAttempt(outcome)
    }
    func webhookBacklog(_ backlog: WebhookBacklog, at now: Date) {
        readable.withLock { $0.webhookBacklog = (backlog, now) }
        webhookQueueDepth.set(Int64(backlog.pending))
        webhookOldestPending.set(Int64(backlog.oldestPending.map { max(0, now.timeIntervalSince($0)) } ?? 0))
    }
    func bound(success: Bool) { binds[success]?.increment() }

    enum PrefillStep: String, CaseIterable { case start, validate, challenge, complete }
    func prefillStep(_ step: PrefillStep, success: Bool) {
        prefillSteps[step]?[success]?.increment()
        recent.prefillStep(step, success: success)
    }

    func landingAccepted() { landingsAccepted.increment() }
    func landingRepeated() { landingsRepeated.increment() }
    func landingRejected(_ reason: LandingRejection) { landingsRejected[reason]?.increment() }
    func sessionCreated(tenant: String) { createdCounter(tenant).increment() }

    /// `kind`: one of `endings`.
    func sessionEnded(_ kind: String, tenant: String) {
        outcomeCounter(kind, tenant).increment()
        if let kind = RecentActivity.Kind(rawValue: kind) { recent.record(kind) }
    }

    private func createdCounter(_ tenant: String) -> Counter {
        counter(
            sessionsCreated, tenant, "linkrelay_sessions_created_total",
            "Sessions created (Prove flows started), by tenant", labels: [("tenant", tenant)])
    }

    private func outcomeCounter(_ kind: String, _ tenant: String) -> Counter {
        counter(
            outcomes, kind + " " + tenant, "linkrelay_outcomes_total", "Sessions ended, by how they ended and tenant",
            labels: [("outcome", kind), ("tenant", tenant)])
    }

    /// The counter of `key` in `counters`, registered at its first use.
    private func counter(
        _ counters: Locked<[String: Counter]>, _ key: String, _ name: String, _ help: String, labels: [(String, String)]
    ) -> Counter {
        counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: .init(metricName: name, unitName: "", helpText: help), labels: labels)
            counters[key] = counter
            return counter
        }
    }
    func tapped() {
        taps.increment()
        recent.record(.tapped)
    }

    func channelOpened(_ transport: ChannelTransport) {
        openChannels[transport]?.increment()
        readable.withLock { $0.channels[transport, default: 0] += 1 }
    }
    func channelClosed(_ transport: ChannelTransport) {
        openChannels[transport]?.decrement()
        readable.withLock { $0.channels[transport, default: 0] -= 1 }
    }

    /// The main listener's open connections, after each one opens or closes.
    func connectionsOpen(_ count: Int) {
        openConnections.set(Int64(count))
        readable.withLock { $0.connections = count }
    }
    func connectionCap(_ maximum: Int) {
        maxConnections.set(Int64(maximum))
        readable.withLock { $0.maxConnections = maximum }
    }

    var current: Readable { readable.withLock { $0 } }

    /// The store's count of sessions in progress, per state, in `LiveSessions.ageBuckets` order.
    func sessionsInProgress(_ buckets: [SessionState: [Int]]) {
        for (state, gauges) in inProgress {
            for (gauge, count) in zip(gauges, buckets[state] ?? []) { gauge.set(Int64(count)) }
        }
    }

    /// The store's count of open Nevis operations, in `LiveSessions.ageBuckets` order.
    func nevisOperationsOpen(_ buckets: [Int]) {
        for (gauge, count) in zip(nevisOpen, buckets) { gauge.set(Int64(count)) }
    }

    public func proveCall(endpoint: String, status: String, duration: Duration) {
        proveCalls.record(endpoint: endpoint, status: status, duration: duration, in: registry)
        recent.proveCall(
            endpoint: endpoint, failed: !status.hasPrefix("2"), seconds: Self.seconds(duration))
    }

    /// Every attempt of a call to Nevis: `endpoint` is `approval`, `status`, `dispatch` or `fido-status`.
    func nevisCall(endpoint: String, status: String, duration: Duration) {
        nevisCalls.record(endpoint: endpoint, status: status, duration: duration, in: registry)
        recent.nevisCall(endpoint: endpoint, status: status, seconds: Self.seconds(duration))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// A provider's calls by endpoint and status, and their latency by endpoint, made at first use. The
/// metrics' names are spelled out whole where they are made, so that scripts/check-dashboard.py finds
/// every name the dashboard and the alert rules read in the sources.
private struct ProviderCalls: Sendable {
    /// `linkrelay_{provider}_calls_total`.
    let calls: String
    /// `linkrelay_{provider}_call_duration_seconds`.
    let durations: String
    /// As help texts name it.
    let name: String
    private let counters = Locked<[String: Counter]>([:])
    private let histograms = Locked<[String: DurationHistogram]>([:])

    init(calls: String, durations: String, name: String) {
        self.calls = calls
        self.durations = durations
        self.name = name
    }

    func record(endpoint: String, status: String, duration: Duration, in registry: PrometheusCollectorRegistry) {
        let counter = counters.withLock { counters in
            let key = endpoint + " " + status
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: .init(
                    metricName: calls, unitName: "",
                    helpText: "Calls to \(name), by endpoint and HTTP status (or timeout/error)"),
                labels: [("endpoint", endpoint), ("status", status)])
            counters[key] = counter
            return counter
        }
        counter.increment()
        let histogram = histograms.withLock { histograms in
            if let histogram = histograms[endpoint] { return histogram }
            let histogram = registry.makeDurationHistogram(
                descriptor: .init(
                    metricName: durations, unitName: "",
                    helpText: "Latency of calls to \(name), by endpoint"), labels: [("endpoint", endpoint)],
                buckets: ProveMinute.bucketBounds.map { .microseconds(Int64(($0 * 1_000_000).rounded())) })
            histograms[endpoint] = histogram
            return histogram
        }
        histogram.record(duration)
    }
}

/// Why a landing was turned away; the label of `linkrelay_landings_total{result="rejected"}`.
enum LandingRejection: String, CaseIterable, Sendable {
    case badLink = "bad_link"
    case unknown
    case expired
    case alreadyUsed = "already_used"
}

/// Which limit turned a request away; the label of `linkrelay_limit_trips_total`.
enum LimitKind: String, CaseIterable, Sendable {
    case landingPerIP = "landing_per_ip"
    case landingPerLink = "landing_per_link"
    case createPerKey = "create_per_key"
    case channelsPerSession = "channels_per_session"
    case channelsPerIP = "channels_per_ip"
    case connectionsPerAddress = "connections_per_address"
    case finishPerSession = "finish_per_session"
    case opsPerIP = "ops_per_ip"
}
