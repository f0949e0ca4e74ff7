import Foundation
import LinkRelayCore
import LinkRelaySupport

/// The last hour on this instance, minute by minute: taps and how sessions ended, Prove's and Nevis's
/// calls by endpoint, webhook attempts by outcome, Pre-Fill steps by outcome, the relay's answers by
/// class and the breakers' refusals. The ops page charts it; `RelayMetrics` feeds it where it
/// counts the same things for `/metrics`, so the page and Prometheus agree.
final class RecentActivity: Sendable {
    /// What happens to sessions: the first tap, then one of the ways a session ends.
    enum Kind: String, CaseIterable, Sendable {
        case tapped
        case verified
        case failed
        case possessionRequired = "possession_required"
        case cancelled
        case expired
    }

    /// Prove's `success` on a Pre-Fill step.
    enum StepOutcome: CaseIterable, Sendable { case success, failure }

    /// The relay's answers by class; 503 apart, since the breaker's and the store's refusals are 503s.
    enum AnswerClass: CaseIterable, Sendable {
        case success
        case clientError
        case unavailable
        case serverError

        init(status: Int) {
            switch status {
            case 503: self = .unavailable
            case 500...: self = .serverError
            case 400...: self = .clientError
            default: self = .success
            }
        }
    }

    /// Calls the open breaker refused at once.
    enum BreakerRefusal: CaseIterable, Sendable { case refused }

    /// How Nevis answered one call, classed as `LinkRelayNevisErrorRateHigh` classes
    /// `linkrelay_nevis_calls_total`'s `status`.
    enum NevisAnswer: CaseIterable, Sendable {
        /// 2xx.
        case answered
        /// 4xx but 429: Nevis refused the request (an unknown user, one without a device), so it is up.
        case refused
        /// 5xx, 429, a timeout or a transport error: the rule's errors.
        case failed

        init(status: String) {
            switch Int(status) {
            case (200..<300)?: self = .answered
            case 429?, (500..<600)?: self = .failed
            case (400..<500)?: self = .refused
            default: self = .failed
            }
        }
    }

    /// One Nevis endpoint's calls in a minute: latencies and errors (`failed`) as Prove's, and the
    /// answers by class.
    struct NevisMinute: MinuteTotal {
        var calls = ProveMinute()
        var answers = Counts<NevisAnswer>()

        static var zero: Self { Self() }

        mutating func add(_ other: Self) {
            calls.add(other.calls)
            answers.add(other.answers)
        }
    }

    /// A copy of the last hour, each series oldest minute first, the last one the current minute.
    struct Snapshot: Sendable {
        var at: Date
        var sessions: [Counts<Kind>]
        var prove: [String: [ProveMinute]]
        var webhooks: [Counts<WebhookOutcome>]
        var prefill: [RelayMetrics.PrefillStep: [Counts<StepOutcome>]]
        var answers: [Counts<AnswerClass>]
        var breakerRefusals: [Counts<BreakerRefusal>]
        var nevis: [String: [NevisMinute]]
        var nevisBreakerRefusals: [Counts<BreakerRefusal>]
    }

    private struct State {
        var sessions = MinuteSeries<Counts<Kind>>()
        var prove: [String: MinuteSeries<ProveMinute>] = [:]
        var webhooks = MinuteSeries<Counts<WebhookOutcome>>()
        var prefill: [RelayMetrics.PrefillStep: MinuteSeries<Counts<StepOutcome>>] = [:]
        var answers = MinuteSeries<Counts<AnswerClass>>()
        var breakerRefusals = MinuteSeries<Counts<BreakerRefusal>>()
        var nevis: [String: MinuteSeries<NevisMinute>] = [:]
        var nevisBreakerRefusals = MinuteSeries<Counts<BreakerRefusal>>()
    }

    let clock: any RelayClock
    private let state = Locked(State())

    init(clock: any RelayClock) { self.clock = clock }

    func record(_ kind: Kind) {
        let now = clock.now()
        state.withLock { $0.sessions.update(at: now) { $0[kind] += 1 } }
    }

    /// One call to Prove (one HTTP attempt, as `linkrelay_prove_calls_total` counts them). The endpoints
    /// are the client's own few names, so the table stays small.
    func proveCall(endpoint: String, failed: Bool, seconds: Double) {
        let now = clock.now()
        state.withLock { state in
            state.prove[endpoint, default: MinuteSeries()].update(at: now) {
                $0.record(failed: failed, seconds: seconds)
            }
        }
    }

    func webhookAttempt(_ outcome: WebhookOutcome) {
        let now = clock.now()
        state.withLock { $0.webhooks.update(at: now) { $0[outcome] += 1 } }
    }

    func prefillStep(_ step: RelayMetrics.PrefillStep, success: Bool) {
        let now = clock.now()
        state.withLock {
            $0.prefill[step, default: MinuteSeries()].update(at: now) { $0[success ? .success : .failure] += 1 }
        }
    }

    func answered(status: Int) {
        let now = clock.now()
        state.withLock { $0.answers.update(at: now) { $0[AnswerClass(status: status)] += 1 } }
    }

    func breakerRefused() {
        let now = clock.now()
        state.withLock { $0.breakerRefusals.update(at: now) { $0[.refused] += 1 } }
    }

    /// One call to Nevis (one HTTP attempt, or one in-process question to the embedded sandbox, as
    /// `linkrelay_nevis_calls_total` counts them). The endpoints are the clients' own four names.
    func nevisCall(endpoint: String, status: String, seconds: Double) {
        let answer = NevisAnswer(status: status)
        let now = clock.now()
        state.withLock { state in
            state.nevis[endpoint, default: MinuteSeries()].update(at: now) {
                $0.calls.record(failed: answer == .failed, seconds: seconds)
                $0.answers[answer] += 1
            }
        }
    }

    func nevisBreakerRefused() {
        let now = clock.now()
        state.withLock { $0.nevisBreakerRefusals.update(at: now) { $0[.refused] += 1 } }
    }

    func snapshot() -> Snapshot {
        let now = clock.now()
        return state.withLock { state in
            Snapshot(
                at: now, sessions: state.sessions.lastHour(endingAt: now),
                prove: state.prove.mapValues { $0.lastHour(endingAt: now) },
                webhooks: state.webhooks.lastHour(endingAt: now),
                prefill: state.prefill.mapValues { $0.lastHour(endingAt: now) },
                answers: state.answers.lastHour(endingAt: now),
                breakerRefusals: state.breakerRefusals.lastHour(endingAt: now),
                nevis: state.nevis.mapValues { $0.lastHour(endingAt: now) },
                nevisBreakerRefusals: state.nevisBreakerRefusals.lastHour(endingAt: now))
        }
    }
}
