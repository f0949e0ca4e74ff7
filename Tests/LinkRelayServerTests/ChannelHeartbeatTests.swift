import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

@Suite("Channel heartbeat", .timeLimit(.minutes(1)))
struct ChannelHeartbeatTests {
    @Test("A channel is woken at its time, not at the heartbeat's next round; wakes close together share a tick")
    func wakesAtTheAskedTime() async throws {
        let clock = ManualClock()
        let start = clock.now()
        let hub = ChannelHub()
        let woken = Locked<[String]>([])
        // Offsets in sixteenths of a second, so that the dates add up exactly.
        let listeners = [("a", 0.75), ("b", 0.8125), ("c", 0.875)].map { name, offset in
            hub.listen(sessionID: name, wakeAt: start + offset) { signal in
                if case .tick(let now) = signal {
                    woken.withLock { $0.append("\(name)@\(now.timeIntervalSince(start))") }
                }
            }
        }
        defer { for listener in listeners { listener.finish() } }
        let heartbeat = Task { try await ChannelHeartbeat(hub: hub, clock: clock, interval: 0.5, spacing: 0.125).run() }
        defer { heartbeat.cancel() }

        // Each step: the heartbeat has gone back to sleep (it ticked, or had nothing to do), then time moves.
        func step(_ seconds: TimeInterval) async {
            await clock.waitForSleepers(1)
            clock.advance(by: seconds)
        }
        await step(0.5)  // the first round: nothing due yet; "a" is next, at 0.75
        await step(0.25)
        await clock.waitForSleepers(1)
        #expect(woken.withLock { $0 } == ["a@0.75"])
        // "b" is due at 0.8125, but the heartbeat ticks no sooner than 0.125 after its last tick.
        clock.advance(by: 0.0625)
        #expect(woken.withLock { $0 } == ["a@0.75"])
        await step(0.0625)
        await clock.waitForSleepers(1)
        #expect(woken.withLock { $0 } == ["a@0.75", "b@0.875", "c@0.875"])
    }
}
