import Foundation

/// Counts of concurrent holders per key, each capped at `maximum`: "channels per session",
/// "channels per IP". A key's entry is removed when its count falls to zero, so memory follows
/// the number of open connections.
///
/// Every successful `acquire` must be paired with exactly one `release` (use `defer`).
public final class ConnectionLimiter: Sendable {
    /// The most concurrent holders per key.
    public let maximum: Int

    private let counts: Locked<[String: Int]>

    /// A limiter allowing `maximum` concurrent holders per key.
    /// - Precondition: `maximum >= 1`.
    public init(maximum: Int) {
        precondition(maximum >= 1, "a connection limit allows at least one connection")
        self.maximum = maximum
        self.counts = Locked([:])
    }

    /// Counts one more holder for `key` and returns true, or returns false (counting nothing)
    /// when `key` already has `maximum` holders.
    public func acquire(_ key: String) -> Bool {
        counts.withLock { counts in
            let current = counts[key, default: 0]
            guard current < maximum else { return false }
            counts[key] = current + 1
            return true
        }
    }

    /// Counts one holder fewer for `key`, removing the entry at zero. Releasing a key that holds
    /// nothing does nothing (the count never goes negative).
    public func release(_ key: String) {
        counts.withLock { counts in
            guard let current = counts[key] else { return }
            counts[key] = current > 1 ? current - 1 : nil
        }
    }

    /// How many holders `key` has now.
    public func count(for key: String) -> Int { counts.withLock { $0[key, default: 0] } }

    /// How many keys have at least one holder.
    public var trackedKeyCount: Int { counts.withLock { $0.count } }
}
