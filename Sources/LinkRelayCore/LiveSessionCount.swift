import Foundation

/// How many live sessions (waiting or tapped) a store holds in one state and one age bin: what the
/// operators' page charts as "holds in progress by age". Ages are counted in bins of `binSeconds`
/// (bin n: created n × 30 s to (n + 1) × 30 s ago), so that a store can count them in one grouped
/// query instead of handing every session over.
public struct LiveSessionCount: Sendable, Equatable {
    public static let binSeconds: TimeInterval = 30

    public var state: SessionState
    public var ageBin: Int
    public var count: Int

    public init(state: SessionState, ageBin: Int, count: Int) {
        self.state = state
        self.ageBin = ageBin
        self.count = count
    }

    /// The bin of a session created at `createdAt`, seen at `now` (0 for a clock that stepped back).
    public static func ageBin(createdAt: Date, now: Date) -> Int {
        max(0, Int((now.timeIntervalSince(createdAt) / binSeconds).rounded(.down)))
    }

    /// The counts of `sessions` (state and creation time each), one per state and bin, in no order.
    public static func tally(_ sessions: [(state: SessionState, createdAt: Date)], at now: Date) -> [LiveSessionCount] {
        var counts: [SessionState: [Int: Int]] = [:]
        for session in sessions where !session.state.isTerminal {
            counts[session.state, default: [:]][ageBin(createdAt: session.createdAt, now: now), default: 0] += 1
        }
        return counts.flatMap { state, bins in
            bins.map { LiveSessionCount(state: state, ageBin: $0.key, count: $0.value) }
        }
    }
}
