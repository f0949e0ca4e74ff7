import Foundation

/// The shape of a token bucket: it holds at most `capacity` tokens (the burst) and gains
/// `refillPerSecond` tokens a second (the steady rate). Each allowed request takes one token.
public struct TokenBucketRule: Sendable, Equatable {
    /// The most tokens a bucket holds: how many requests may arrive at once. At least 1.
    public let capacity: Int
    /// Tokens added per second, up to `capacity`. Zero means a bucket never refills.
    public let refillPerSecond: Double

    /// A bucket of `capacity` tokens refilled at `refillPerSecond`.
    /// - Precondition: `capacity >= 1`, and `refillPerSecond` is finite and not negative.
    public init(capacity: Int, refillPerSecond: Double) {
        precondition(capacity >= 1, "a token bucket holds at least one token")
        precondition(refillPerSecond >= 0 && refillPerSecond.isFinite, "the refill rate must be finite and >= 0")
        self.capacity = capacity
        self.refillPerSecond = refillPerSecond
    }

    /// `perMinute` requests a minute on average, with bursts of up to `burst` requests.
    /// `.init(perMinute: 30, burst: 10)` is a bucket of 10 tokens refilled at one token every 2 s.
    public init(perMinute: Int, burst: Int) {
        self.init(capacity: burst, refillPerSecond: Double(perMinute) / 60)
    }

    /// Seconds for an empty bucket to fill up again (infinite when it never refills).
    public var secondsToFill: TimeInterval { Double(capacity) / refillPerSecond }
}

/// Token buckets keyed by a string (an IP, an `authId`, a session), for rate limits.
///
/// It never reads a clock: every call passes `now`, so tests move time by hand.
///
/// **Bounded memory.** A key that is not tracked behaves as a full bucket, so a bucket that has
/// refilled to capacity carries no state and may be forgotten. At most `maximumKeys` buckets are
/// kept. When a new key arrives and the table is full, the limiter first drops every bucket that
/// has refilled; if that frees less than a tenth of the table, it then evicts the least recently
/// used buckets down to 90 % of `maximumKeys`. That sweep is O(n) but frees at least n/10 slots,
/// so each call costs O(1) amortized. An attacker spraying keys can therefore make the limiter
/// forget a drained bucket (the key then starts again from a full bucket), but never grow memory
/// past `maximumKeys` buckets. Size `maximumKeys` well above the number of keys that are
/// legitimately active within `rule.secondsToFill`.
public final class RateLimiter: Sendable {
    /// The shape shared by every bucket.
    public let rule: TokenBucketRule
    /// The most buckets tracked at once.
    public let maximumKeys: Int

    private let table: Locked<BucketTable>

    /// A limiter applying `rule` to each key, tracking at most `maximumKeys` keys.
    /// - Precondition: `maximumKeys >= 1`.
    public init(rule: TokenBucketRule, maximumKeys: Int = 100_000) {
        precondition(maximumKeys >= 1, "the limiter must track at least one key")
        self.rule = rule
        self.maximumKeys = maximumKeys
        self.table = Locked(BucketTable())
    }

    /// Takes one token from `key`'s bucket and returns true, or returns false when the bucket is
    /// empty. A refused call takes nothing (the bucket keeps refilling as if it had not been made);
    /// it only marks the key as recently used, so a key being hammered is the last to be evicted.
    public func allow(_ key: String, now: Date) -> Bool {
        table.withLock { table in
            if let slot = table.index[key] {
                let tokens = refilled(table.nodes[slot], now: now)
                table.markUsed(slot)
                guard tokens >= 1 else { return false }
                table.nodes[slot].tokens = tokens - 1
                table.nodes[slot].updated = max(table.nodes[slot].updated, now)
                return true
            }
            // An unknown key has a full bucket, and a bucket holds at least one token.
            if table.index.count >= maximumKeys { makeRoom(in: &table, now: now) }
            table.insert(key: key, tokens: Double(rule.capacity - 1), updated: now)
            return true
        }
    }

    /// Forgets every bucket that has refilled to capacity by `now`. Optional: the limiter does this
    /// itself when it is full, but a periodic call keeps the table small between bursts. O(n).
    public func prune(now: Date) {
        table.withLock { table in dropFullBuckets(in: &table, now: now) }
    }

    /// How many keys have a bucket right now (at most `maximumKeys`).
    public var trackedKeyCount: Int { table.withLock { $0.index.count } }

    /// Whether `key` has a bucket (a key without one behaves as full). For tests.
    func isTracked(_ key: String) -> Bool { table.withLock { $0.index[key] != nil } }

    /// The tokens `key` would have at `now`, without taking any. For tests.
    func tokens(for key: String, now: Date) -> Double {
        table.withLock { table in
            guard let slot = table.index[key] else { return Double(rule.capacity) }
            return refilled(table.nodes[slot], now: now)
        }
    }

    private func refilled(_ node: BucketTable.Node, now: Date) -> Double {
        // A clock that steps back refills nothing, and never drains a bucket either.
        let elapsed = max(0, now.timeIntervalSince(node.updated))
        return min(Double(rule.capacity), node.tokens + elapsed * rule.refillPerSecond)
    }

    private func dropFullBuckets(in table: inout BucketTable, now: Date) {
        var slot = table.leastRecent
        while slot != BucketTable.none {
            let next = table.nodes[slot].next
            if refilled(table.nodes[slot], now: now) >= Double(rule.capacity) { table.remove(slot) }
            slot = next
        }
    }

    private func makeRoom(in table: inout BucketTable, now: Date) {
        let target = maximumKeys - max(1, maximumKeys / 10)
        dropFullBuckets(in: &table, now: now)
        while table.index.count > target { table.remove(table.leastRecent) }
    }
}

/// The buckets, in a dictionary for lookup and a doubly linked list (in an array, by slot
/// number) for least-recently-used order, so lookup, touch, insert and evict are all O(1).
private struct BucketTable {
    struct Node {
        var key: String
        var tokens: Double
        var updated: Date
        var previous: Int
        var next: Int
    }

    static let none = -1

    var nodes: [Node] = []
    var freeSlots: [Int] = []
    var index: [String: Int] = [:]
    /// The least recently used bucket, the first to evict.
    var leastRecent = none
    /// The most recently used bucket.
    var mostRecent = none

    mutating func insert(key: String, tokens: Double, updated: Date) {
        let node = Node(key: key, tokens: tokens, updated: updated, previous: Self.none, next: Self.none)
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        index[key] = slot
        append(slot)
    }

    mutating func remove(_ slot: Int) {
        unlink(slot)
        index[nodes[slot].key] = nil
        nodes[slot].key = ""
        freeSlots.append(slot)
    }

    mutating func markUsed(_ slot: Int) {
        guard slot != mostRecent else { return }
        unlink(slot)
        append(slot)
    }

    private mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous == Self.none { leastRecent = next } else { nodes[previous].next = next }
        if next == Self.none { mostRecent = previous } else { nodes[next].previous = previous }
        nodes[slot].previous = Self.none
        nodes[slot].next = Self.none
    }

    private mutating func append(_ slot: Int) {
        nodes[slot].previous = mostRecent
        nodes[slot].next = Self.none
        if mostRecent == Self.none { leastRecent = slot } else { nodes[mostRecent].next = slot }
        mostRecent = slot
    }
}
