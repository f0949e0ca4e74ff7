import Foundation

/// A circuit breaker around a dependency (the Prove API), so that an outage makes the relay fail
/// fast instead of piling calls, retries and backoff sleeps onto a service that is down.
///
/// - **closed**: every call goes through. `failureThreshold` failures in a row open the breaker;
///   a success resets the count.
/// - **open**: `acquire` refuses at once (no call, no retry, no sleep) until `openDuration` has
///   passed since the breaker opened.
/// - **half-open**: the first `acquire` after that gets the single probe permit; every other
///   caller is still refused while the probe is in flight. The probe's success closes the breaker,
///   its failure opens it again for another `openDuration`.
///
/// **One outcome per logical call.** Retries belong inside the breaker: acquire one permit, run
/// the call with all its retries, then `record` one outcome. A failure is a call whose retries are
/// spent on timeouts, transport errors, 5xx or 429. A call that reaches no verdict about the
/// dependency's health, for example Prove answering a 4xx "bad request" to our input, is
/// recorded as a **success**: the dependency answered.
///
/// **Abandoned permits.** A permit dropped without `record` (the call was cancelled) never wedges
/// the breaker. In closed state it simply counts nothing. A half-open probe not recorded within
/// `probeTimeout` (by default `openDuration`) is considered abandoned: the next `acquire` gets a
/// fresh probe, and the abandoned probe's outcome, if it ever arrives, is ignored.
///
/// **Stale permits.** Each permit belongs to the breaker's state at the time it was issued. An
/// outcome recorded after the breaker has changed state since (a slow call issued before the
/// breaker opened, an abandoned probe) is ignored, so only the probe decides in half-open.
///
/// It never reads a clock: every call passes `now`. The `open` → `halfOpen` change happens in the
/// first `acquire` at or after the end of the open period, so `state` reads `open` until then.
public final class CircuitBreaker: Sendable {
    /// Where the breaker stands.
    public enum State: String, Sendable {
        /// Calls go through; consecutive failures are counted.
        case closed
        /// Calls are refused at once.
        case open
        /// A single probe call decides whether to close or open again.
        case halfOpen = "half_open"
    }

    /// Leave to make one call. Pass it back to `record` with the call's outcome, exactly once.
    public struct Permit: Sendable, Equatable {
        /// Whether this is the half-open probe whose outcome closes or re-opens the breaker.
        public let isProbe: Bool
        /// The breaker's generation when the permit was issued; outcomes from older ones are stale.
        let generation: UInt64
    }

    /// Consecutive failures (in closed state) that open the breaker.
    public let failureThreshold: Int
    /// How long the breaker stays open before letting a probe through.
    public let openDuration: TimeInterval
    /// How long a half-open probe may stay unrecorded before another probe may go.
    public let probeTimeout: TimeInterval

    private let onStateChange: (@Sendable (State, State) -> Void)?
    private let core: Locked<Core>

    /// A breaker that opens after `failureThreshold` consecutive failures and stays open for
    /// `openDuration` seconds. A probe unrecorded for `probeTimeout` seconds (default
    /// `openDuration`) is abandoned. `onStateChange(old, new)` is called on every state change, in
    /// order, outside the breaker's lock (it may call back into the breaker), possibly on the
    /// thread of another caller and after the call that caused the change has returned.
    /// - Precondition: `failureThreshold >= 1`; the durations are finite and not negative.
    public init(
        failureThreshold: Int = 5, openDuration: TimeInterval = 10, probeTimeout: TimeInterval? = nil,
        onStateChange: (@Sendable (CircuitBreaker.State, CircuitBreaker.State) -> Void)? = nil
    ) {
        precondition(failureThreshold >= 1, "the failure threshold is at least one")
        precondition(openDuration >= 0 && openDuration.isFinite, "the open duration must be finite and >= 0")
        let probeTimeout = probeTimeout ?? openDuration
        precondition(probeTimeout >= 0 && probeTimeout.isFinite, "the probe timeout must be finite and >= 0")
        self.failureThreshold = failureThreshold
        self.openDuration = openDuration
        self.probeTimeout = probeTimeout
        self.onStateChange = onStateChange
        self.core = Locked(Core(notifies: onStateChange != nil))
    }

    /// The current state. `open` stays `open` past its end until the next `acquire`.
    public var state: State { core.withLock { $0.phase.state } }

    /// Consecutive failures counted in closed state (zero in the other states). For tests and metrics.
    public var consecutiveFailures: Int {
        core.withLock { core in
            if case .closed(let failures) = core.phase { return failures }
            return 0
        }
    }

    /// When an open breaker lets its probe through (at the first `acquire` from then on); nil unless open.
    public var openUntil: Date? {
        core.withLock { core in
            if case .open(let until) = core.phase { return until }
            return nil
        }
    }

    /// Leave to call the dependency, or nil to fail fast (the breaker is open, or half-open with
    /// its probe in flight).
    public func acquire(now: Date) -> Permit? {
        let (permit, deliver) = core.withLock { core -> (Permit?, Bool) in
            let permit: Permit?
            switch core.phase {
            case .closed:
                permit = Permit(isProbe: false, generation: core.generation)
            case .open(let until):
                if now >= until {
                    core.enter(.halfOpen(probeDeadline: now.addingTimeInterval(probeTimeout)))
                    permit = Permit(isProbe: true, generation: core.generation)
                } else {
                    permit = nil
                }
            case .halfOpen(let probeDeadline):
                if now >= probeDeadline {
                    // The probe in flight is abandoned: replace it (no state change).
                    core.enter(.halfOpen(probeDeadline: now.addingTimeInterval(probeTimeout)))
                    permit = Permit(isProbe: true, generation: core.generation)
                } else {
                    permit = nil
                }
            }
            return (permit, core.claimDelivery())
        }
        if deliver { deliverStateChanges() }
        return permit
    }

    /// Reports the outcome of the call made with `permit`: `success` is false only when the call,
    /// with its retries spent, says the dependency is unhealthy. Stale permits are ignored.
    public func record(_ permit: Permit, success: Bool, now: Date) {
        let deliver = core.withLock { core -> Bool in
            guard permit.generation == core.generation else { return false }
            switch core.phase {
            case .closed(let failures):
                if success {
                    core.phase = .closed(failures: 0)
                } else if failures + 1 >= failureThreshold {
                    core.enter(.open(until: now.addingTimeInterval(openDuration)))
                } else {
                    core.phase = .closed(failures: failures + 1)
                }
            case .halfOpen:
                guard permit.isProbe else { return false }
                core.enter(success ? .closed(failures: 0) : .open(until: now.addingTimeInterval(openDuration)))
            case .open:
                // No permit is issued while open, so none can match this generation.
                break
            }
            return core.claimDelivery()
        }
        if deliver { deliverStateChanges() }
    }

    /// Calls `onStateChange` for queued changes, in order, outside the lock. Only one caller
    /// delivers at a time; changes queued meanwhile (even by the callback itself) are delivered by
    /// it before it stops.
    private func deliverStateChanges() {
        while let change = nextStateChange() {
            onStateChange?(change.old, change.new)
        }
    }

    private func nextStateChange() -> (old: State, new: State)? {
        core.withLock { core in
            guard !core.pending.isEmpty else {
                core.delivering = false
                return nil
            }
            return core.pending.removeFirst()
        }
    }
}

private enum Phase {
    case closed(failures: Int)
    case open(until: Date)
    case halfOpen(probeDeadline: Date)

    var state: CircuitBreaker.State {
        switch self {
        case .closed: .closed
        case .open: .open
        case .halfOpen: .halfOpen
        }
    }
}

private struct Core {
    var phase = Phase.closed(failures: 0)
    /// Bumped on every state change and every new probe; permits carry it.
    var generation: UInt64 = 0
    let notifies: Bool
    var pending: [(old: CircuitBreaker.State, new: CircuitBreaker.State)] = []
    var delivering = false

    init(notifies: Bool) { self.notifies = notifies }

    /// Moves to `next` and starts a new generation, queueing a notification if the state changed.
    mutating func enter(_ next: Phase) {
        let old = phase.state
        phase = next
        generation &+= 1
        if notifies && old != next.state { pending.append((old, next.state)) }
    }

    /// True when the caller must deliver the queued notifications (nobody else is doing it).
    mutating func claimDelivery() -> Bool {
        guard !pending.isEmpty && !delivering else { return false }
        delivering = true
        return true
    }
}
