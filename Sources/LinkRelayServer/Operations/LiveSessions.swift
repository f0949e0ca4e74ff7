import Foundation
import LinkRelayCore
import LinkRelaySupport

/// The sessions in progress, by flow, state and age of their hold, as the store counts them (with
/// PostgreSQL: every instance's). The ops page and `/metrics` ask here: the store is asked at most
/// once every `cacheSeconds`, however many pages and scrapes come, and each count also sets
/// `linkrelay_sessions_in_progress` and `linkrelay_nevis_operations_open`.
final class LiveSessions: Sendable {
    /// The age buckets the page and the metric show, as bins of `LiveSessionCount.binSeconds`: the
    /// page's words and the metric's `age` label.
    static let ageBuckets: [(label: String, metric: String, bins: ClosedRange<Int>)] = [
        ("0–30 s", "0-30s", 0...0), ("30–60 s", "30-60s", 1...1), ("1–2 min", "1-2m", 2...3),
        ("2–3 min", "2-3m", 4...5), ("3–5 min", "3-5m", 6...9), ("5 min +", "5m+", 10...Int.max),
    ]
    static let cacheSeconds: TimeInterval = 5

    let store: any StoreHealth
    let clock: any RelayClock
    let metrics: RelayMetrics
    private let cache = Locked<(at: Date, counts: [LiveSessionCount])?>(nil)

    init(store: any StoreHealth, clock: any RelayClock, metrics: RelayMetrics) {
        self.store = store
        self.clock = clock
        self.metrics = metrics
    }

    /// The counts, at most `cacheSeconds` old; throws what the store throws.
    func counts() async throws -> [LiveSessionCount] {
        let now = clock.now()
        if let cached = cache.withLock({ $0 }), cached.at <= now, now.timeIntervalSince(cached.at) < Self.cacheSeconds {
            return cached.counts
        }
        let counts = try await store.liveSessionCounts(at: now)
        cache.withLock { $0 = (now, counts) }
        metrics.sessionsInProgress(Self.byState(counts))
        metrics.nevisOperationsOpen(Self.buckets(counts, flow: .nevis))
        return counts
    }

    /// How many sessions in `state` (either live state when nil) of `flow` (any when nil) the counts hold
    /// in each of `ageBuckets`, in order.
    static func buckets(_ counts: [LiveSessionCount], _ state: SessionState? = nil, flow: Flow? = nil) -> [Int] {
        ageBuckets.map { bucket in
            counts.filter {
                (state == nil || $0.state == state) && (flow == nil || $0.flow == flow)
                    && bucket.bins.contains($0.ageBin)
            }.reduce(0) { $0 + $1.count }
        }
    }

    /// Both states' buckets, every flow's, for the metric.
    static func byState(_ counts: [LiveSessionCount]) -> [SessionState: [Int]] {
        [.waiting: buckets(counts, .waiting), .tapped: buckets(counts, .tapped)]
    }
}
