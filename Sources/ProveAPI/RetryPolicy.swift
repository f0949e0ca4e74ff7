/// Retry settings: capped exponential backoff with full jitter (`delay = random(0...min(maxDelay,
/// baseDelay * 2^(retry-1)))`), raised to `Retry-After` when the server sends one, and never past the deadline.
public struct RetryPolicy: Sendable {
    /// The maximum number of attempts of one call, including the first (at least 1).
    public var maxAttempts: Int
    public var baseDelay: Duration
    public var maxDelay: Duration
    /// The longest one attempt may take, however much time is left before the deadline: a stalled
    /// connection costs this much, not the rest of the session's hold.
    public var attemptTimeout: Duration
    /// Sleeps between attempts. Tests inject a recorder to observe delays without waiting.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// Returns a uniformly distributed value in `0..<1`; the jitter source.
    public var random: @Sendable () -> Double

    public init(
        maxAttempts: Int = 4,
        baseDelay: Duration = .milliseconds(100),
        maxDelay: Duration = .seconds(2),
        attemptTimeout: Duration = .seconds(10),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.attemptTimeout = attemptTimeout
        self.sleep = sleep
        self.random = random
    }

    /// The backoff cap before the given retry (1 = the delay after the first failed attempt).
    public func backoffCap(retry: Int) -> Duration {
        let exponent = min(max(retry - 1, 0), 30)
        let uncapped = baseDelay * (1 << exponent)
        return min(uncapped, maxDelay)
    }

    /// The full-jitter delay before the given retry: uniformly random in `0...backoffCap(retry:)`.
    public func jitteredDelay(retry: Int) -> Duration {
        let fraction = min(max(random(), 0), 1)
        return backoffCap(retry: retry) * fraction
    }
}
