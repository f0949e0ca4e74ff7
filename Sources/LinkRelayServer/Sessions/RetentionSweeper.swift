import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import ServiceLifecycle

/// Keeps identity data and ended sessions only as long as they are configured to be kept: every
/// `interval`, erases the Pre-Fill individuals whose time is up (`--identity-retention`), then deletes
/// the sessions that ended more than `--retention` days ago (with their events and Idempotency-Keys) and
/// the delivered and failed webhook messages as old.
///
/// Deletions go in small writes with a pause between them, so that the store's one writer takes the
/// taps' writes in between and a tap that meets a deletion waits for a few rows only. A session's row
/// sits on its own page of each of its table's indexes (ids and link keys are random), so a write deletes
/// `sessionBatch` of them; old webhook messages sit together in every index (their ids sort by time),
/// so a write takes `messageBatch`. At most 250 sessions a second go: a backlog of 100,000 took 7
/// minutes and left the taps' p99 as it was (Benchmarks/purge.sh). A pass deletes for at most
/// `interval`, then the next begins at once while there is more, so erasures are never held up longer.
/// With PostgreSQL every instance sweeps; the stores skip rows another instance is deleting.
///
/// A pass that erased or deleted ends by truncating the store's journal (`RetentionStore.truncateJournal`:
/// SQLite's WAL), so that an erased individual's bytes leave the disk within the pass, not whenever
/// enough writes would have recycled the WAL.
struct RetentionSweeper: Service {
    /// Erases individuals: the state machine.
    let service: SessionService
    let store: any RetentionStore & WebhookOutbox
    let clock: any RelayClock
    let logger: Logger
    let metrics: RelayMetrics
    /// Days ended sessions and settled webhook messages are kept.
    let retentionDays: Int
    var interval: TimeInterval = 10
    /// What paces the passes and their deletions: real time, whatever the service's clock (a pass reads
    /// that clock for what is due).
    var pacing: any RelayClock = EventLoopClock()
    var sessionBatch = 5
    var messageBatch = 100
    var pause: Duration = .milliseconds(20)
    /// Whether an erasure or deletion still waits for the store's journal to be truncated: set by a pass
    /// that erased or deleted sessions, cleared once a truncation worked, so that one that failed is
    /// tried again by the next pass.
    let journalOwed = Locked(false)

    /// How long a webhook message is tried before it is given up (`failed`): a failed message is kept
    /// for the retention from then.
    static let retryPeriod = WebhookSender.retryFor

    /// What a pass erased and deleted; `more`: it stopped at its time with more to delete.
    struct Pass: Sendable {
        var erased = 0
        var sessions = 0
        var messages = 0
        var more = false
    }

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                if await sweep(for: interval).more { continue }
                try await pacing.sleep(until: pacing.now().addingTimeInterval(interval))
            }
        }
    }

    /// One pass: every individual that is due, then deletions for at most `budget` seconds.
    @discardableResult
    func sweep(for budget: TimeInterval = .infinity) async -> Pass {
        let now = clock.now()
        let end = pacing.now().addingTimeInterval(budget)
        var pass = Pass()
        do {
            while true {
                let due = try await store.sessionsWithIndividual(keptUntil: now, limit: messageBatch)
                for id in due { try await service.eraseIndividual(sessionID: id) }
                pass.erased += due.count
                if due.count < messageBatch { break }
            }
        } catch {
            logger.warning("Erasing identity data failed; trying again later", metadata: ["error": "\(error)"])
        }
        metrics.retained(.individuals, pass.erased)
        let cutoff = now.addingTimeInterval(-TimeInterval(retentionDays) * 86_400)
        var more: Bool
        (pass.sessions, more) = await inBatches(.sessions, of: sessionBatch, until: end) { [service] limit in
            try await store.deleteSessions(endedBefore: cutoff, limit: limit)
        }
        if !more {
            (pass.messages, more) = await inBatches(.webhookMessages, of: messageBatch, until: end) { [service] limit in
                try await store.pruneWebhooks(
                    deliveredBefore: cutoff, failedBefore: cutoff.addingTimeInterval(-Self.retryPeriod), limit: limit)
            }
        }
        pass.more = more
        if pass.erased + pass.sessions > 0 { journalOwed.withLock { $0 = true } }
        if journalOwed.withLock({ $0 }) {
            do {
                try await store.truncateJournal()
                journalOwed.withLock { $0 = false }
            } catch {
                logger.warning(
                    "Truncating the store's journal after erasures failed; trying again at the next pass",
                    metadata: ["error": "\(error)"])
            }
        }
        if pass.sessions + pass.messages > 0 {
            logger.info(
                "Retention: deleted what was past it",
                metadata: [
                    "sessions": "\(pass.sessions)", "webhook_messages": "\(pass.messages)", "days": "\(retentionDays)",
                ])
        }
        return pass
    }

    /// Runs `delete` with `batch` until one comes back short or `end` has passed, pausing between them;
    /// returns how many went, and whether it stopped at `end` with more to do.
    private func inBatches(
        _ what: RelayMetrics.Retained, of batch: Int, until end: Date, _ delete: @Sendable (Int) async throws -> Int
    ) async -> (Int, more: Bool) {
        var total = 0
        do {
            while true {
                let deleted = try await delete(batch)
                metrics.retained(what, deleted)
                total += deleted
                guard deleted >= batch, !Task.isCancelled else { return (total, false) }
                guard pacing.now() < end else { return (total, true) }
                try await Task.sleep(for: pause)
            }
        } catch {
            logger.warning(
                "Deleting past the retention failed; trying again later",
                metadata: ["what": .string(what.rawValue), "error": "\(error)"])
            return (total, false)
        }
    }
}
