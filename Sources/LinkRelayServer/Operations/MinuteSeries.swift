import Foundation

/// A value that adds up minute by minute in a `MinuteSeries`.
protocol MinuteTotal: Sendable {
    static var zero: Self { get }
    /// Adds `other` into this one: what summing minutes does.
    mutating func add(_ other: Self)
}

/// Per-minute totals over the last hour: a ring of 60 slots, each remembering the minute it holds, so
/// that a slot last written an hour or more ago reads as empty and is cleared by its next write. Its
/// size is fixed whatever the traffic. Minutes are the relay clock's wall-clock minutes.
struct MinuteSeries<Value: MinuteTotal>: Sendable {
    static var length: Int { 60 }

    private var minutes = [Int](repeating: .min, count: length)
    private var values = [Value](repeating: .zero, count: length)

    /// Minutes since 1970 (UTC): the key of a slot.
    static func minute(of date: Date) -> Int { Int((date.timeIntervalSince1970 / 60).rounded(.down)) }

    private static func slot(_ minute: Int) -> Int { ((minute % length) + length) % length }

    /// Changes the total of the minute `date` falls in.
    mutating func update(at date: Date, _ change: (inout Value) -> Void) {
        let minute = Self.minute(of: date)
        let slot = Self.slot(minute)
        if minutes[slot] != minute {
            minutes[slot] = minute
            values[slot] = .zero
        }
        change(&values[slot])
    }

    /// The last 60 minutes up to the one `date` falls in, oldest first: the last one is the current,
    /// still partial, minute. A minute with nothing recorded is `.zero`.
    func lastHour(endingAt date: Date) -> [Value] {
        let now = Self.minute(of: date)
        return ((now - Self.length + 1)...now).map { minute in
            let slot = Self.slot(minute)
            return minutes[slot] == minute ? values[slot] : .zero
        }
    }
}

/// How many of each `Kind` happened: a minute's taps and endings, or webhook attempts by outcome.
struct Counts<Kind: CaseIterable & Equatable & Sendable>: MinuteTotal where Kind.AllCases == [Kind] {
    private(set) var values = [Int](repeating: 0, count: Kind.allCases.count)

    static var zero: Self { Self() }

    subscript(kind: Kind) -> Int {
        get { values[Kind.allCases.firstIndex(of: kind)!] }
        set { values[Kind.allCases.firstIndex(of: kind)!] = newValue }
    }

    var total: Int { values.reduce(0, +) }

    mutating func add(_ other: Self) {
        for index in values.indices { values[index] += other.values[index] }
    }
}

extension Sequence {
    /// Every element added up (`MinuteTotal.add`): an hour's minutes as one total.
    func sum<Value: MinuteTotal>() -> Value where Element == Value {
        reduce(into: .zero) { $0.add($1) }
    }
}

/// One Prove endpoint's calls in a minute (or a Nevis endpoint's, in `RecentActivity.NevisMinute`): how
/// many, how many failed, and their latencies in the buckets of `linkrelay_prove_call_duration_seconds`
/// (and `linkrelay_nevis_call_duration_seconds`), from which quantiles are estimated as
/// Prometheus's `histogram_quantile` does.
struct ProveMinute: MinuteTotal {
    /// Upper bounds in seconds; one more bucket above the last holds everything slower. Fine where the
    /// calls are: the embedded sandbox answers in 0.1-0.3 ms in process and 1-3 ms over loopback HTTP (with
    /// a fault set), Prove over the internet in 0.1-1 s; so no estimate is dragged to the middle of a bucket
    /// much wider than the calls in it (0-5 ms put the sandbox's p50 at 2.5 ms over a 0.2 ms mean). 2 s is
    /// `LinkRelayProveSlow`'s bound and 10 s the longest attempt (`RetryPolicy.attemptTimeout`).
    static let bucketBounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1,
        1.5, 2, 3, 5, 10,
    ]

    var calls = 0
    var errors = 0
    var seconds = 0.0
    var buckets = [Int](repeating: 0, count: bucketBounds.count + 1)

    static var zero: Self { Self() }

    mutating func record(failed: Bool, seconds: Double) {
        calls += 1
        if failed { errors += 1 }
        self.seconds += seconds
        buckets[Self.bucketBounds.firstIndex { seconds <= $0 } ?? Self.bucketBounds.count] += 1
    }

    mutating func add(_ other: Self) {
        calls += other.calls
        errors += other.errors
        seconds += other.seconds
        for index in buckets.indices { buckets[index] += other.buckets[index] }
    }

    var meanSeconds: Double? { calls > 0 ? seconds / Double(calls) : nil }

    /// The `q` quantile (0...1) estimated from the buckets: linear within the bucket the rank falls in
    /// (from 0 for the first); the largest bound when it falls above it. Nil without calls.
    func quantile(_ q: Double) -> Double? {
        guard calls > 0 else { return nil }
        let rank = q * Double(calls)
        var below = 0
        for (index, count) in buckets.enumerated() {
            guard Double(below + count) >= rank, count > 0 else {
                below += count
                continue
            }
            guard index < Self.bucketBounds.count else { return Self.bucketBounds.last }
            let lower = index == 0 ? 0 : Self.bucketBounds[index - 1]
            let upper = Self.bucketBounds[index]
            return lower + (upper - lower) * (rank - Double(below)) / Double(count)
        }
        return Self.bucketBounds.last
    }
}
