import Foundation
import Testing

@testable import LinkRelaySupport

/// Collects state changes; can hold the breaker to call back into it from the callback.
private final class ChangeLog: Sendable {
    struct Entry: Equatable {
        let old: CircuitBreaker.State
        let new: CircuitBreaker.State
        /// `breaker.state` read from inside the callback (proves the lock is not held).
        let stateSeenInside: CircuitBreaker.State?
    }

    let entries = Locked<[Entry]>([])
    let breaker = Locked<CircuitBreaker?>(nil)

    func record(_ old: CircuitBreaker.State, _ new: CircuitBreaker.State) {
        let inside = breaker.withLock { $0 }?.state
        entries.withLock { $0.append(Entry(old: old, new: new, stateSeenInside: inside)) }
    }

    var transitions: [String] { entries.withLock { $0.map { "\($0.old.rawValue)>\($0.new.rawValue)" } } }
}

struct CircuitBreakerTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func at(_ seconds: TimeInterval) -> Date { start.addingTimeInterval(seconds) }

    /// Opens `breaker` with `count` failed calls at `now`.
    static func fail(_ breaker: CircuitBreaker, times count: Int, now: Date) {
        for _ in 0..<count {
            guard let permit = breaker.acquire(now: now) else { return }
            breaker.record(permit, success: false, now: now)
        }
    }

    // MARK: - Closed

    @Test func startsClosedAndLetsCallsThrough() {
        let breaker = CircuitBreaker()
        #expect(breaker.state == .closed)
        let permits = (0..<20).compactMap { _ in breaker.acquire(now: Self.start) }
        #expect(permits.count == 20)
        #expect(permits.allSatisfy { !$0.isProbe })
    }

    @Test(arguments: [1, 2, 5, 10])
    func opensAfterExactlyThresholdConsecutiveFailures(threshold: Int) {
        let breaker = CircuitBreaker(failureThreshold: threshold)
        Self.fail(breaker, times: threshold - 1, now: Self.start)
        #expect(breaker.state == .closed)
        #expect(breaker.consecutiveFailures == threshold - 1)
        Self.fail(breaker, times: 1, now: Self.start)
        #expect(breaker.state == .open)
    }

    @Test func successInClosedStateResetsTheCount() {
        let breaker = CircuitBreaker(failureThreshold: 3)
        Self.fail(breaker, times: 2, now: Self.start)
        #expect(breaker.consecutiveFailures == 2)
        let permit = breaker.acquire(now: Self.start)!
        breaker.record(permit, success: true, now: Self.start)
        #expect(breaker.consecutiveFailures == 0)
        Self.fail(breaker, times: 2, now: Self.start)
        #expect(breaker.state == .closed)
        Self.fail(breaker, times: 1, now: Self.start)
        #expect(breaker.state == .open)
    }

    @Test func concurrentPermitsInClosedStateAllCount() {
        let breaker = CircuitBreaker(failureThreshold: 3)
        let permits = (0..<3).map { _ in breaker.acquire(now: Self.start)! }
        for permit in permits { breaker.record(permit, success: false, now: Self.start) }
        #expect(breaker.state == .open)
    }

    @Test func droppedClosedPermitCountsNothing() {
        let breaker = CircuitBreaker(failureThreshold: 2)
        for _ in 0..<100 { _ = breaker.acquire(now: Self.start) }
        #expect(breaker.state == .closed)
        #expect(breaker.consecutiveFailures == 0)
    }

    // MARK: - Open

    @Test func failsFastWhileOpen() {
        let breaker = CircuitBreaker(failureThreshold: 2, openDuration: 10)
        Self.fail(breaker, times: 2, now: Self.start)
        for offset in [0, 0.001, 1, 5, 9.999] {
            #expect(breaker.acquire(now: Self.at(offset)) == nil)
        }
        #expect(breaker.state == .open)
    }

    @Test func lateOutcomesFromBeforeOpeningAreIgnored() {
        let breaker = CircuitBreaker(failureThreshold: 2, openDuration: 10)
        let slow = breaker.acquire(now: Self.start)!
        Self.fail(breaker, times: 2, now: Self.start)
        #expect(breaker.state == .open)
        breaker.record(slow, success: true, now: Self.at(1))
        #expect(breaker.state == .open)
        #expect(breaker.acquire(now: Self.at(1)) == nil)
    }

    // MARK: - Half-open

    @Test func letsExactlyOneProbeThroughAfterTheOpenDuration() {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10)
        Self.fail(breaker, times: 1, now: Self.start)
        let probe = breaker.acquire(now: Self.at(10))
        #expect(probe?.isProbe == true)
        #expect(breaker.state == .halfOpen)
        for offset in [10, 11, 15, 19.999] {
            #expect(breaker.acquire(now: Self.at(offset)) == nil)
        }
        #expect(breaker.state == .halfOpen)
    }

    @Test func probeSuccessCloses() {
        let breaker = CircuitBreaker(failureThreshold: 2, openDuration: 10)
        Self.fail(breaker, times: 2, now: Self.start)
        let probe = breaker.acquire(now: Self.at(12))!
        breaker.record(probe, success: true, now: Self.at(13))
        #expect(breaker.state == .closed)
        #expect(breaker.consecutiveFailures == 0)
        #expect(breaker.acquire(now: Self.at(13))?.isProbe == false)
        // A fresh count: one failure does not re-open a threshold-2 breaker.
        Self.fail(breaker, times: 1, now: Self.at(13))
        #expect(breaker.state == .closed)
    }

    @Test func probeFailureReopensForAnotherOpenDuration() {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10)
        Self.fail(breaker, times: 1, now: Self.start)
        let probe = breaker.acquire(now: Self.at(10))!
        breaker.record(probe, success: false, now: Self.at(14))
        #expect(breaker.state == .open)
        // Open again from the probe's failure (t=14) until t=24.
        #expect(breaker.acquire(now: Self.at(20)) == nil)
        #expect(breaker.acquire(now: Self.at(23.999)) == nil)
        #expect(breaker.acquire(now: Self.at(24))?.isProbe == true)
    }

    @Test func nonProbeOutcomeDoesNotDecideHalfOpen() {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10)
        Self.fail(breaker, times: 1, now: Self.start)
        let probe = breaker.acquire(now: Self.at(10))!
        // A forged non-probe permit of the current generation is still not the probe.
        let impostor = CircuitBreaker.Permit(isProbe: false, generation: probe.generation)
        breaker.record(impostor, success: true, now: Self.at(11))
        #expect(breaker.state == .halfOpen)
        breaker.record(probe, success: true, now: Self.at(11))
        #expect(breaker.state == .closed)
    }

    @Test func abandonedProbeLetsAnotherProbeGoAfterTheProbeTimeout() {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10)
        #expect(breaker.probeTimeout == 10)
        Self.fail(breaker, times: 1, now: Self.start)
        let abandoned = breaker.acquire(now: Self.at(10))!  // never recorded (the call was cancelled)
        #expect(breaker.acquire(now: Self.at(19.999)) == nil)
        let second = breaker.acquire(now: Self.at(20))
        #expect(second?.isProbe == true)
        #expect(second != abandoned)
        #expect(breaker.acquire(now: Self.at(20)) == nil)
        #expect(breaker.state == .halfOpen)
        // The abandoned probe's late outcome is ignored; the current probe decides.
        breaker.record(abandoned, success: false, now: Self.at(21))
        #expect(breaker.state == .halfOpen)
        breaker.record(second!, success: true, now: Self.at(22))
        #expect(breaker.state == .closed)
    }

    @Test func abandonedProbeLateSuccessDoesNotClose() {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10, probeTimeout: 3)
        Self.fail(breaker, times: 1, now: Self.start)
        let abandoned = breaker.acquire(now: Self.at(10))!
        #expect(breaker.acquire(now: Self.at(12.999)) == nil)
        let second = breaker.acquire(now: Self.at(13))!
        breaker.record(abandoned, success: true, now: Self.at(14))
        #expect(breaker.state == .halfOpen)
        breaker.record(second, success: false, now: Self.at(15))
        #expect(breaker.state == .open)
        #expect(breaker.acquire(now: Self.at(24.999)) == nil)
        #expect(breaker.acquire(now: Self.at(25))?.isProbe == true)
    }

    @Test func permitRecordedTwiceAfterATransitionIsIgnored() {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10)
        Self.fail(breaker, times: 1, now: Self.start)
        let probe = breaker.acquire(now: Self.at(10))!
        breaker.record(probe, success: false, now: Self.at(10))
        #expect(breaker.state == .open)
        breaker.record(probe, success: true, now: Self.at(11))
        #expect(breaker.state == .open)
    }

    // MARK: - Full cycle and callback

    @Test func fullCycleReportsEveryStateChangeInOrder() {
        let log = ChangeLog()
        let breaker = CircuitBreaker(failureThreshold: 2, openDuration: 5) { log.record($0, $1) }
        log.breaker.withLock { $0 = breaker }

        Self.fail(breaker, times: 2, now: Self.start)  // closed > open
        #expect(breaker.acquire(now: Self.at(1)) == nil)
        let first = breaker.acquire(now: Self.at(5))!  // open > half_open
        breaker.record(first, success: false, now: Self.at(6))  // half_open > open
        let abandoned = breaker.acquire(now: Self.at(11))!  // open > half_open
        let replacement = breaker.acquire(now: Self.at(16))!  // new probe: no change
        breaker.record(abandoned, success: true, now: Self.at(16))  // stale: no change
        breaker.record(replacement, success: true, now: Self.at(17))  // half_open > closed
        let closed = breaker.acquire(now: Self.at(17))!
        breaker.record(closed, success: true, now: Self.at(17))  // no change

        #expect(
            log.transitions == [
                "closed>open", "open>half_open", "half_open>open", "open>half_open", "half_open>closed",
            ])
        // Each callback could read the state, so the lock was not held; it saw the new state.
        #expect(log.entries.withLock { $0.map(\.stateSeenInside) } == [.open, .halfOpen, .open, .halfOpen, .closed])
    }

    @Test func callbackMayCallBackIntoTheBreaker() {
        let log = ChangeLog()
        let reentered = Locked<[Bool]>([])
        let holder = Locked<CircuitBreaker?>(nil)
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 0) { old, new in
            log.record(old, new)
            // From the callback: when it opens, try at once (openDuration 0 gives the probe).
            if new == .open, let breaker = holder.withLock({ $0 }) {
                let permit = breaker.acquire(now: Self.start)
                reentered.withLock { $0.append(permit?.isProbe == true) }
            }
        }
        holder.withLock { $0 = breaker }
        Self.fail(breaker, times: 1, now: Self.start)
        #expect(reentered.withLock { $0 } == [true])
        #expect(log.transitions == ["closed>open", "open>half_open"])
        #expect(breaker.state == .halfOpen)
    }

    @Test func stateRawValuesForMetrics() {
        #expect(CircuitBreaker.State.closed.rawValue == "closed")
        #expect(CircuitBreaker.State.open.rawValue == "open")
        #expect(CircuitBreaker.State.halfOpen.rawValue == "half_open")
    }

    @Test func concurrentAcquiresInHalfOpenYieldOneProbe() async {
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 10)
        Self.fail(breaker, times: 1, now: Self.start)
        let probes = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<100 { group.addTask { breaker.acquire(now: Self.at(10)) != nil } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(probes == 1)
    }

    @Test func concurrentTransitionsAreDeliveredInOrder() async {
        let log = ChangeLog()
        let breaker = CircuitBreaker(failureThreshold: 1, openDuration: 0, probeTimeout: 1000) { log.record($0, $1) }
        // Many tasks drive the breaker around its cycle at once: every change is reported, and
        // the reported sequence is a valid walk of the state machine.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<200 {
                        if let permit = breaker.acquire(now: Self.start) {
                            breaker.record(permit, success: Bool.random(), now: Self.start)
                        }
                    }
                }
            }
        }
        let entries = log.entries.withLock { $0 }
        #expect(entries.first?.old == .closed)
        for (previous, next) in zip(entries, entries.dropFirst()) { #expect(previous.new == next.old) }
        #expect(entries.last?.new ?? .closed == breaker.state)
    }
}
