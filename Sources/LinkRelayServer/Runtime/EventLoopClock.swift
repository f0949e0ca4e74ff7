import Foundation
import LinkRelayCore
import NIOCore
import NIOPosix

/// The system's clock, whose waits are timers on NIO's event loops instead of `Task.sleep`.
///
/// On Linux each `Task.sleep` goes through libdispatch's timers: it wakes one of libdispatch's threads,
/// which keeps the blocks it wrapped the wait in (see `LinkRelayCommand.main`). The relay's waits (the
/// heartbeat's come many times a second under load) would each leave such a block behind
/// (docs/memory.md); an event loop's timer keeps nothing.
public struct EventLoopClock: RelayClock {
    let group: any EventLoopGroup

    public init(_ group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) { self.group = group }

    public func now() -> Date { Date() }

    public func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSinceNow
        if seconds > 0 { try await sleep(for: .seconds(seconds)) }
    }

    /// Returns after `delay`; throws `CancellationError` when cancelled.
    public func sleep(for delay: Duration) async throws {
        let timer = group.any().scheduleTask(in: TimeAmount(delay)) {}
        do {
            try await withTaskCancellationHandler {
                try await timer.futureResult.get()
            } onCancel: {
                timer.cancel()
            }
        } catch {
            // Cancelled (or the loop shut down): the wait ends as `Task.sleep`'s does.
            throw CancellationError()
        }
    }
}
