import Foundation
import Testing

@testable import LinkRelaySupport

struct RateLimiterTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// 10 tokens, one every 2 s (30 a minute): binary-exact arithmetic.
    static let rule = TokenBucketRule(perMinute: 30, burst: 10)

    static func at(_ seconds: TimeInterval) -> Date { start.addingTimeInterval(seconds) }

    /// Calls `allow` `count` times at `now` and returns how many were allowed.
    static func allowed(_ limiter: RateLimiter, _ key: String, count: Int, now: Date) -> Int {
        (0..<count).filter { _ in limiter.allow(key, now: now) }.count
    }

    // MARK: - Rule

    @Test func perMinuteRuleSetsCapacityAndRate() {
        #expect(Self.rule == TokenBucketRule(capacity: 10, refillPerSecond: 0.5))
        #expect(Self.rule.secondsToFill == 20)
        #expect(TokenBucketRule(perMinute: 120, burst: 1).refillPerSecond == 2)
    }

    // MARK: - Token bucket

    @Test(arguments: [1, 2, 10, 37])
    func tripsAtExactlyItsCapacity(capacity: Int) {
        let limiter = RateLimiter(rule: TokenBucketRule(capacity: capacity, refillPerSecond: 1))
        for _ in 0..<capacity { #expect(limiter.allow("k", now: Self.start)) }
        #expect(!limiter.allow("k", now: Self.start))
        #expect(!limiter.allow("k", now: Self.start))
    }

    @Test func refusalTakesNothing() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(Self.allowed(limiter, "k", count: 10, now: Self.start) == 10)
        // Many refusals at 1 s do not delay the token due at 2 s.
        #expect(Self.allowed(limiter, "k", count: 50, now: Self.at(1)) == 0)
        #expect(limiter.tokens(for: "k", now: Self.at(1)) == 0.5)
        #expect(limiter.allow("k", now: Self.at(2)))
    }

    @Test func recoversAfterTheRefillTime() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(Self.allowed(limiter, "k", count: 10, now: Self.start) == 10)
        #expect(!limiter.allow("k", now: Self.at(1.999)))
        #expect(limiter.allow("k", now: Self.at(2)))
        #expect(!limiter.allow("k", now: Self.at(2)))
        // After a full refill time the whole burst is back, and no more.
        #expect(Self.allowed(limiter, "k", count: 20, now: Self.at(100)) == 10)
    }

    @Test(arguments: [
        (elapsed: 0.0, allowed: 0),
        (elapsed: 1.0, allowed: 0),
        (elapsed: 2.0, allowed: 1),
        (elapsed: 7.0, allowed: 3),
        (elapsed: 10.0, allowed: 5),
        (elapsed: 20.0, allowed: 10),
        (elapsed: 3600.0, allowed: 10),
    ])
    func partialRefill(elapsed: Double, allowed: Int) {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(Self.allowed(limiter, "k", count: 10, now: Self.start) == 10)
        #expect(Self.allowed(limiter, "k", count: 20, now: Self.at(elapsed)) == allowed)
    }

    @Test func fractionalTokensCarryOver() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(Self.allowed(limiter, "k", count: 10, now: Self.start) == 10)
        #expect(limiter.allow("k", now: Self.at(3)))  // 1.5 tokens, leaves 0.5
        #expect(limiter.tokens(for: "k", now: Self.at(3)) == 0.5)
        #expect(limiter.allow("k", now: Self.at(4)))  // 0.5 + 0.5
        #expect(!limiter.allow("k", now: Self.at(4)))
    }

    @Test func keysAreIndependent() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(Self.allowed(limiter, "a", count: 15, now: Self.start) == 10)
        #expect(Self.allowed(limiter, "b", count: 15, now: Self.start) == 10)
        #expect(Self.allowed(limiter, "c", count: 3, now: Self.start) == 3)
        #expect(limiter.trackedKeyCount == 3)
    }

    @Test func clockSteppingBackRefillsNothingAndDrainsNothing() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(Self.allowed(limiter, "k", count: 10, now: Self.at(10)) == 10)
        #expect(!limiter.allow("k", now: Self.start))
        #expect(limiter.tokens(for: "k", now: Self.start) == 0)
        #expect(limiter.allow("k", now: Self.at(12)))
    }

    @Test func neverRefillingBucketStaysEmpty() {
        let limiter = RateLimiter(rule: TokenBucketRule(capacity: 2, refillPerSecond: 0))
        #expect(Self.allowed(limiter, "k", count: 5, now: Self.start) == 2)
        #expect(!limiter.allow("k", now: Self.at(1_000_000)))
    }

    // MARK: - Bounded memory

    @Test func untrackedKeyIsAFullBucket() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(!limiter.isTracked("k"))
        #expect(limiter.tokens(for: "k", now: Self.start) == 10)
        #expect(limiter.allow("k", now: Self.start))
        #expect(limiter.isTracked("k"))
        #expect(limiter.tokens(for: "k", now: Self.start) == 9)
    }

    @Test func pruneForgetsOnlyRefilledBuckets() {
        let limiter = RateLimiter(rule: Self.rule)
        #expect(limiter.allow("old", now: Self.start))
        #expect(Self.allowed(limiter, "drained", count: 10, now: Self.at(1)) == 10)
        #expect(limiter.allow("recent", now: Self.at(19)))
        limiter.prune(now: Self.at(20))
        // "old" needed 2 s to refill; "drained" needs 20 s (until 21); "recent" until 21.
        #expect(!limiter.isTracked("old"))
        #expect(limiter.isTracked("drained"))
        #expect(limiter.isTracked("recent"))
        #expect(limiter.trackedKeyCount == 2)
    }

    @Test(arguments: [1, 2, 10, 100, 1000])
    func sprayingKeysKeepsMemoryBounded(maximumKeys: Int) {
        let limiter = RateLimiter(rule: Self.rule, maximumKeys: maximumKeys)
        for index in 0..<(maximumKeys * 5 + 7) {
            // Same instant: nothing refills, so eviction has to fall back to least recently used.
            #expect(limiter.allow("spray-\(index)", now: Self.start))
            #expect(limiter.trackedKeyCount <= maximumKeys)
        }
        #expect(limiter.trackedKeyCount >= 1)
    }

    @Test func evictedKeyBehavesAsFull() {
        let limiter = RateLimiter(rule: Self.rule, maximumKeys: 4)
        #expect(Self.allowed(limiter, "victim", count: 10, now: Self.start) == 10)
        #expect(!limiter.allow("victim", now: Self.start))
        for index in 0..<4 { #expect(limiter.allow("spray-\(index)", now: Self.start)) }
        #expect(!limiter.isTracked("victim"))
        #expect(Self.allowed(limiter, "victim", count: 20, now: Self.start) == 10)
    }

    @Test func fullBucketsAreDroppedBeforeRecentlyUsedOnes() {
        // Capacity 2, one token a second. Table of 3; room is made down to 2.
        let limiter = RateLimiter(rule: TokenBucketRule(capacity: 2, refillPerSecond: 1), maximumKeys: 3)
        #expect(Self.allowed(limiter, "a", count: 2, now: Self.start) == 2)  // least recent, 1 token at t=1
        #expect(limiter.allow("b", now: Self.start))  // full again at t=1
        #expect(limiter.allow("c", now: Self.at(0.5)))  // 1.5 tokens at t=1
        #expect(limiter.allow("d", now: Self.at(1)))  // table full: drops "b" only
        #expect(limiter.isTracked("a"))
        #expect(!limiter.isTracked("b"))
        #expect(limiter.isTracked("c"))
        #expect(limiter.isTracked("d"))
        // "a" kept its state: one token, not a fresh bucket of two.
        #expect(Self.allowed(limiter, "a", count: 5, now: Self.at(1)) == 1)
    }

    @Test func leastRecentlyUsedIsEvictedFirst() {
        let limiter = RateLimiter(rule: TokenBucketRule(capacity: 5, refillPerSecond: 0), maximumKeys: 3)
        #expect(limiter.allow("a", now: Self.start))
        #expect(limiter.allow("b", now: Self.start))
        #expect(limiter.allow("c", now: Self.start))
        #expect(limiter.allow("a", now: Self.start))  // "b" is now the least recent
        #expect(limiter.allow("d", now: Self.start))
        #expect(limiter.isTracked("a"))
        #expect(!limiter.isTracked("b"))
        #expect(limiter.isTracked("c"))
        #expect(limiter.isTracked("d"))
    }

    @Test func refusedKeyCountsAsRecentlyUsed() {
        let limiter = RateLimiter(rule: TokenBucketRule(capacity: 1, refillPerSecond: 0), maximumKeys: 3)
        #expect(limiter.allow("attacker", now: Self.start))
        #expect(limiter.allow("b", now: Self.start))
        #expect(limiter.allow("c", now: Self.start))
        #expect(!limiter.allow("attacker", now: Self.start))  // refused, but touched
        #expect(limiter.allow("d", now: Self.start))
        #expect(limiter.isTracked("attacker"))
        #expect(!limiter.isTracked("b"))
        #expect(!limiter.allow("attacker", now: Self.start))
    }

    @Test func slotsAreReusedAfterEviction() {
        let limiter = RateLimiter(rule: Self.rule, maximumKeys: 50)
        for round in 0..<20 {
            for index in 0..<50 { _ = limiter.allow("r\(round)-\(index)", now: Self.at(Double(round))) }
            #expect(limiter.trackedKeyCount <= 50)
        }
        // The most recent keys are still tracked with their state.
        #expect(limiter.isTracked("r19-49"))
        #expect(limiter.tokens(for: "r19-49", now: Self.at(19)) == 9)
    }

    @Test func concurrentCallersNeverExceedTheBurst() async {
        let limiter = RateLimiter(rule: Self.rule)
        let allowed = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<200 { group.addTask { limiter.allow("shared", now: Self.start) } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(allowed == 10)
    }

    // MARK: - Connection limiter

    @Test func connectionLimiterRefusesAtTheMaximum() {
        let limiter = ConnectionLimiter(maximum: 3)
        #expect(limiter.acquire("s"))
        #expect(limiter.acquire("s"))
        #expect(limiter.acquire("s"))
        #expect(!limiter.acquire("s"))
        #expect(limiter.count(for: "s") == 3)
    }

    @Test func connectionLimiterReleaseAllowsAgain() {
        let limiter = ConnectionLimiter(maximum: 2)
        #expect(limiter.acquire("s"))
        #expect(limiter.acquire("s"))
        #expect(!limiter.acquire("s"))
        limiter.release("s")
        #expect(limiter.count(for: "s") == 1)
        #expect(limiter.acquire("s"))
        #expect(!limiter.acquire("s"))
    }

    @Test func connectionLimiterCountsPerKey() {
        let limiter = ConnectionLimiter(maximum: 1)
        #expect(limiter.acquire("a"))
        #expect(limiter.acquire("b"))
        #expect(!limiter.acquire("a"))
        #expect(!limiter.acquire("b"))
        #expect(limiter.count(for: "a") == 1)
        #expect(limiter.count(for: "c") == 0)
        #expect(limiter.trackedKeyCount == 2)
    }

    @Test func connectionLimiterRemovesEntriesAtZero() {
        let limiter = ConnectionLimiter(maximum: 5)
        #expect(limiter.acquire("a"))
        #expect(limiter.acquire("a"))
        #expect(limiter.acquire("b"))
        limiter.release("a")
        #expect(limiter.trackedKeyCount == 2)
        limiter.release("a")
        limiter.release("b")
        #expect(limiter.trackedKeyCount == 0)
        #expect(limiter.count(for: "a") == 0)
    }

    @Test func connectionLimiterIgnoresUnmatchedRelease() {
        let limiter = ConnectionLimiter(maximum: 1)
        limiter.release("never")
        #expect(limiter.count(for: "never") == 0)
        #expect(limiter.trackedKeyCount == 0)
        #expect(limiter.acquire("never"))
        #expect(!limiter.acquire("never"))
    }

    @Test func connectionLimiterConcurrentAcquiresNeverExceedTheMaximum() async {
        let limiter = ConnectionLimiter(maximum: 7)
        let acquired = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<100 { group.addTask { limiter.acquire("ip") } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(acquired == 7)
        for _ in 0..<7 { limiter.release("ip") }
        #expect(limiter.trackedKeyCount == 0)
    }
}
