import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

struct ManualClockTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Yields until `condition` holds, at most `attempts` times; no sleeping, no wall-clock timing.
    static func waitUntil(attempts: Int = 100_000, _ condition: () -> Bool) async -> Bool {
        for _ in 0..<attempts {
            if condition() { return true }
            await Task.yield()
        }
        return condition()
    }

    @Test func nowStartsWhereToldAndMovesOnlyOnAdvance() {
        let clock = ManualClock(now: Self.start)
        #expect(clock.now() == Self.start)
        #expect(clock.now() == Self.start)
        clock.advance(by: 1.5)
        #expect(clock.now() == Self.start.addingTimeInterval(1.5))
        clock.advance(by: 0)
        #expect(clock.now() == Self.start.addingTimeInterval(1.5))
    }

    @Test func defaultStartIsFixed() {
        #expect(ManualClock().now() == Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func sleeperWakesWhenAdvancePassesItsDeadline() async throws {
        let clock = ManualClock(now: Self.start)
        let deadline = Self.start.addingTimeInterval(10)
        let sleeper = Task {
            try await clock.sleep(until: deadline)
            return clock.now()
        }
        #expect(await Self.waitUntil { clock.sleeperCount == 1 })

        clock.advance(by: 9)
        #expect(clock.sleeperCount == 1, "woke before its deadline")

        clock.advance(by: 2)
        #expect(clock.sleeperCount == 0)
        let wokeAt = try await sleeper.value
        #expect(wokeAt == Self.start.addingTimeInterval(11))
    }

    @Test func sleeperWakesExactlyAtItsDeadline() async throws {
        let clock = ManualClock(now: Self.start)
        let sleeper = Task { try await clock.sleep(until: Self.start.addingTimeInterval(5)) }
        #expect(await Self.waitUntil { clock.sleeperCount == 1 })
        clock.advance(by: 5)
        #expect(clock.sleeperCount == 0)
        try await sleeper.value
    }

    @Test func advanceWakesOnlyTheDueSleepers() async throws {
        let clock = ManualClock(now: Self.start)
        let early = Task { try await clock.sleep(until: Self.start.addingTimeInterval(5)) }
        let late = Task { try await clock.sleep(until: Self.start.addingTimeInterval(60)) }
        #expect(await Self.waitUntil { clock.sleeperCount == 2 })

        clock.advance(by: 5)
        try await early.value
        #expect(clock.sleeperCount == 1)

        clock.advance(by: 55)
        try await late.value
        #expect(clock.sleeperCount == 0)
    }

    @Test(arguments: [-3600.0, -1.0, 0.0])
    func deadlineNotInTheFutureReturnsImmediately(_ offset: TimeInterval) async throws {
        let clock = ManualClock(now: Self.start)
        try await clock.sleep(until: Self.start.addingTimeInterval(offset))
        #expect(clock.sleeperCount == 0)
        #expect(clock.now() == Self.start)
    }

    @Test func deadlineAlreadyPassedAfterAdvanceReturnsImmediately() async throws {
        let clock = ManualClock(now: Self.start)
        clock.advance(by: 100)
        try await clock.sleep(until: Self.start.addingTimeInterval(50))
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingASleeperThrowsCancellationError() async {
        let clock = ManualClock(now: Self.start)
        let sleeper = Task { try await clock.sleep(until: Self.start.addingTimeInterval(3600)) }
        #expect(await Self.waitUntil { clock.sleeperCount == 1 })

        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)

        // A later advance must not try to resume the cancelled sleeper again.
        clock.advance(by: 7200)
        #expect(clock.sleeperCount == 0)
    }

    @Test func sleepingInAnAlreadyCancelledTaskThrows() async {
        let clock = ManualClock(now: Self.start)
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: Self.start.addingTimeInterval(3600))
        }
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingOneSleeperLeavesTheOthers() async throws {
        let clock = ManualClock(now: Self.start)
        let cancelled = Task { try await clock.sleep(until: Self.start.addingTimeInterval(10)) }
        let kept = Task { try await clock.sleep(until: Self.start.addingTimeInterval(10)) }
        #expect(await Self.waitUntil { clock.sleeperCount == 2 })

        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(clock.sleeperCount == 1)

        clock.advance(by: 10)
        try await kept.value
        #expect(clock.sleeperCount == 0)
    }

    @Test func worksThroughTheRelayClockProtocol() async throws {
        let manual = ManualClock(now: Self.start)
        let clock: any RelayClock = manual
        #expect(clock.now() == Self.start)
        let sleeper = Task { try await clock.sleep(until: Self.start.addingTimeInterval(1)) }
        #expect(await Self.waitUntil { manual.sleeperCount == 1 })
        manual.advance(by: 1)
        try await sleeper.value
    }
}
