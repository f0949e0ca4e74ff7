import Foundation
import LinkRelayCore
import ServiceLifecycle

/// The one timer behind every channel's keep-alive and long-poll timeout.
///
/// It wakes when the next listener asked to be woken, but no sooner than `spacing` after its last tick
/// and no later than `interval` after it (a wake asked for meanwhile waits that long at most). Under
/// load, desktops that connected within the same second then get their pings in small waves, one per
/// `spacing` at most, so that no wave is large enough to hold up the events queued behind it.
struct ChannelHeartbeat: Service {
    let hub: ChannelHub
    let clock: any RelayClock
    var interval: TimeInterval = 0.1
    var spacing: TimeInterval = 0.01

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var next: Date?
            while true {
                let now = clock.now()
                var wake = now.addingTimeInterval(interval)
                if let next, next < wake { wake = max(next, now.addingTimeInterval(spacing)) }
                try await clock.sleep(until: wake)
                next = hub.tick(now: clock.now())
            }
        }
    }
}
