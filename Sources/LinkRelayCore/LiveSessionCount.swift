import Foundation

/// How many live sessions (waiting or tapped) a store holds of one flow, in one state and one age bin:
/// what the operators' page charts as "holds in progress by age" (and, for Nevis, "open operations by
/// age"). Ages are counted in bins of `binSeconds` (bin n: created n × 30 s to (n + 1) × 30 s ago), so
/// that a store can count them in one grouped query instead of handing every session over.
public struct LiveSessionCount: Sendable, Equatable {
    public static let binSeconds: TimeInterval = 30

    public var flow: Flow
    public var state: SessionState
    public var ageBin: Int
    public var count: Int

    public init(flow: Flow, state: SessionState, ageBin: Int, count: Int) {
        self.flow = flow
        self.state = state
        self.ageBin = ageBin
        self.count = count
    }

    /// The bin of a session created at `createdAt`, seen at `now` (0 for a clock that stepped back).
    public static func ageBin(createdAt: Date, now: Date) -> Int {
        max(0, Int((now.timeIntervalSince(createdAt) / binSeconds).rounded(.down)))
    }

    /// The counts of `sessions` (flow, state and creation time each), one per flow, state and bin, in no
    /// order.
    public static func tally(
        _ sessions: [(flow: Flow, state: SessionState, createdAt: Date)], at now: Date
    ) -> [LiveSessionCount] {
        struct Key: Hashable {
            var flow: Flow
            var state: SessionState
            var bin: Int
        }
        var counts: [Key: Int] = [:]
        for session in sessions where !session.state.isTerminal {
            let bin = ageBin(createdAt: session.createdAt, now: now)
            counts[Key(flow: session.flow, state: session.state, bin: bin), default: 0] += 1
        }
        return counts.map {
            LiveSessionCount(flow: $0.key.flow, state: $0.key.state, ageBin: $0.key.bin, count: $0.value)
        }
    }
}
