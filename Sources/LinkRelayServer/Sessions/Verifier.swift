import Foundation
import LinkRelayCore
import Logging
import ProveAPI
import ServiceLifecycle
import Synchronization

/// Asks Prove for the result of every landed session (`/v3/unify-status`, `/v3/validate` for Pre-Fill)
/// and records it.
///
/// While Prove says `pending` it asks again, never past the session's hold. At start it picks up
/// every session that was landed but not finished before a restart.
struct Verifier: Service {
    let service: SessionService
    var pendingInterval: TimeInterval = 1
    var unavailableInterval: TimeInterval = 2

    func run() async throws {
        do {
            for session in try await service.store.activeSessions() where session.verificationPending {
                service.verifications.kick(session.id)
            }
        } catch {
            service.logger.error("Verifier could not read pending sessions", metadata: ["error": "\(error)"])
        }
        service.verifications.start { id in await verify(sessionID: id) }
        try? await gracefulShutdown()
        await service.verifications.stop()
    }

    func verify(sessionID: String) async {
        var logger = service.logger
        logger[metadataKey: "session"] = .string(sessionID)
        // Prove's answer, kept while storing it is retried: `/v3/validate` answers only once.
        var answered: (result: SessionResult, prefill: PrefillProgress?)?
        while !Task.isCancelled {
            let session: Session
            do {
                // With several instances, only the one that holds the session's claim gets it.
                guard let stored = try await service.store.sessionToVerify(id: sessionID) else { return }
                session = stored
            } catch {
                logger.error("Verifier could not read the session", metadata: ["error": "\(error)"])
                guard await pause(unavailableInterval, before: nil) else { return }
                continue
            }
            guard session.verificationPending, !session.state.isTerminal,
                !session.isPastHold(at: service.clock.now())
            else { return }
            // Prove's flow is not stored yet (the create's last write failed and is being retried).
            guard session.isStarted else {
                service.verifications.noteProblem(sessionID, "the session's Prove flow is not stored yet")
                guard await pause(unavailableInterval, before: session.expiresAt) else { return }
                continue
            }
            do {
                if answered == nil { answered = try await service.askProve(session, until: session.expiresAt) }
                if let answered {
                    try await service.finish(session, result: answered.result, prefill: answered.prefill)
                    service.verifications.forget(sessionID)
                    return
                }
                service.verifications.noteProblem(sessionID, "Prove still said pending")
                logger.debug("Prove says the result is pending")
                guard await pause(pendingInterval, before: session.expiresAt) else { return }
            } catch ProveClientError.rejected(let status, let body) {
                // Prove refused the question itself (not a retryable fault): the session cannot succeed.
                let endpoint = session.flow == .prefill ? "validate" : "unify-status"
                let reason = "Prove rejected \(endpoint) with \(status)" + (body?.code.map { " (code \($0))" } ?? "")
                logger.warning("Verification failed", metadata: ["reason": .string(reason)])
                let result = SessionResult(outcome: .failed, proveSuccess: nil, reason: reason)
                try? await service.finish(session, result: result)
                service.verifications.forget(sessionID)
                return
            } catch {
                // Prove unreachable (or the breaker open): keep asking until the hold ends; the expiry
                // then ends the session `failed` with this reason.
                service.verifications.noteProblem(sessionID, "\(error)")
                logger.warning("Verification will be retried", metadata: ["error": "\(error)"])
                guard await pause(unavailableInterval, before: session.expiresAt) else { return }
            }
        }
    }

    /// Waits `interval` on the relay's clock. False when cancelled or when that would pass `deadline`.
    private func pause(_ interval: TimeInterval, before deadline: Date?) async -> Bool {
        let wake = service.clock.now().addingTimeInterval(interval)
        if let deadline, wake >= deadline { return false }
        do {
            try await service.clock.sleep(until: wake)
            return true
        } catch {
            return false
        }
    }
}

extension SessionResult {
    init(_ status: UnifyStatusResponse, outcome: Outcome) {
        self.init(
            outcome: outcome, proveSuccess: status.success, phoneNumber: status.phoneNumber, proveId: status.proveId,
            deviceId: status.deviceId, clientHumanId: status.clientHumanId, clientRequestId: status.clientRequestId,
            evaluation: status.evaluation?.mapValues {
                Evaluation(result: $0.result, failureReasons: $0.failureReasons)
            })
    }
}
