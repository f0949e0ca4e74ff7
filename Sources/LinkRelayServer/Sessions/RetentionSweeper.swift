import Foundation
import LinkRelayCore
import ServiceLifecycle

/// Keeps identity data and ended sessions only as long as they are configured to be kept: every
/// `interval`, erases the Pre-Fill individuals whose time is up (`--identity-retention`), then deletes
/// the sessions that ended more than `--retention` days ago (with their events and Idempotency-Keys) and
/// the delivered and failed webhook messages as old.
///
/// Deletions go in batches of `batch`, each its own short write, with a pause between them: the store's
/// one writer takes the taps' writes between two batches, so a purge of a long backlog never holds up a
/// tap for more than one batch. With PostgreSQL every instance sweeps; the stores skip rows another
/// instance is deleting.
struct RetentionSweeper: Service {
    let service: SessionService
    /// Days ended sessions and settled webhook messages are kept.
    let retentionDays: Int
    var interval: TimeInterval = 10
    /// What paces the passes: real time, whatever the service's clock (a pass reads that clock).
    var pacing: any RelayClock = EventLoopClock()
    var batch = 200
    var pause: Duration = .milliseconds(20)

    /// How long a webhook message is tried before it is given up (`failed`): a failed message is kept
    /// for the retention from then.
    static let retryPeriod = WebhookSender.retryFor

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                await sweep()
                try await pacing.sleep(until: pacing.now().addingTimeInterval(interval))
            }
        }
    }

    /// One pass; returns what it erased and deleted.
    @discardableResult
    func sweep() async -> (erased: Int, sessions: Int, messages: Int) {
        let now = service.clock.now()
        var erased = 0
        do {
            for id in try await service.store.sessionsWithIndividual(keptUntil: now, limit: batch) {
                try await service.eraseIndividual(sessionID: id)
                erased += 1
            }
        } catch {
            service.logger.warning("Erasing identity data failed; trying again later", metadata: ["error": "\(error)"])
        }
        service.metrics.retained(.individuals, erased)
        let cutoff = now.addingTimeInterval(-TimeInterval(retentionDays) * 86_400)
        let sessions = await inBatches(.sessions) { [service, batch] in
            try await service.store.deleteSessions(endedBefore: cutoff, limit: batch)
        }
        let messages = await inBatches(.webhookMessages) { [service, batch] in
            try await service.store.pruneWebhooks(
                deliveredBefore: cutoff, failedBefore: cutoff.addingTimeInterval(-Self.retryPeriod), limit: batch)
        }
        if sessions + messages > 0 {
            service.logger.info(
                "Retention: deleted what was past it",
                metadata: ["sessions": "\(sessions)", "webhook_messages": "\(messages)", "days": "\(retentionDays)"])
        }
        return (erased, sessions, messages)
    }

    /// Runs `delete` until a batch comes back short, pausing between batches; returns how many went.
    private func inBatches(_ what: RelayMetrics.Retained, _ delete: @Sendable () async throws -> Int) async -> Int {
        var total = 0
        do {
            while true {
                let deleted = try await delete()
                service.metrics.retained(what, deleted)
                total += deleted
                guard deleted >= batch, !Task.isCancelled else { break }
                try await Task.sleep(for: pause)
            }
        } catch {
            service.logger.warning(
                "Deleting past the retention failed; trying again later",
                metadata: ["what": .string(what.rawValue), "error": "\(error)"])
        }
        return total
    }
}
