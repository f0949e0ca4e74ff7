import Foundation

/// The relay's idea of now, and a way to wait for a moment. Holds and expiries are wall-clock
/// dates (they survive restarts), so the clock speaks `Date`. The relay runs on `EventLoopClock`
/// (LinkRelayServer); tests inject `ManualClock`.
public protocol RelayClock: Sendable {
    func now() -> Date
    /// Returns at `deadline` (or at once if it has passed); throws `CancellationError` when cancelled.
    func sleep(until deadline: Date) async throws
}
