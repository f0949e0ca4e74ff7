import Foundation
import LinkRelayCore
import Logging
import ProveAPI
import ServiceLifecycle
import Synchronization

/// Asks the provider for the result of every session the phone acted on (its flow's `result`:
/// `/v3/unify-status`, `/v3/validate` for Pre-Fill), and of every Nevis session from its start, and has
/// the state machine record it; and asks the last question as the hold of a session that never landed,
/// or of a Nevis session, ends.
///
/// While the provider says `pending` it asks again, never past the session's hold. At start it picks up
/// every session that was landed but not finished before a restart. It runs its queue, which the state
/// machine fills (`SessionService` kicks it after a landing, a finish or a start without a link).
struct Verifier: Service {
    let queue: VerificationQueue
    let lastQuestions: LastQuestions
    /// Records what the provider answered: the state machine.
    let service: SessionService
    let flows: Flows
    let store: any SessionStore & ClusterClaims
    let clock: any RelayClock
    let metrics: RelayMetrics
    let logger: Logger
    var unavailableInterval: TimeInterval = 2

    func run() async throws {
        do {
            for session in try await store.activeSessions() where session.verificationPending {
                queue.kick(session.id)
            }
        } catch {
            logger.error("Verifier could not read pending sessions", metadata: ["error": "\(error)"])
        }
        queue.start { id in await verify(sessionID: id) }
        try? await gracefulShutdown()
        await queue.stop()
    }

    /// Has `sessionID` verified: another instance gave it up, say.
    func kick(_ sessionID: String) { queue.kick(sessionID) }

    func verify(sessionID: String) async {
        var logger = logger
        logger[metadataKey: "session"] = .string(sessionID)
        // The provider's answer, kept while storing it is retried: `/v3/validate` answers only once.
        var answered: FlowResult?
        var pendingInARow = 0
        while !Task.isCancelled {
            let session: Session
            do {
                // With several instances, only the one that holds the session's claim gets it.
                guard let stored = try await store.sessionToVerify(id: sessionID) else { return }
                session = stored
            } catch {
                logger.error("Verifier could not read the session", metadata: ["error": "\(error)"])
                guard await pause(unavailableInterval, before: nil) else { return }
                continue
            }
            guard session.verificationPending, !session.state.isTerminal, !session.isPastHold(at: clock.now())
            else { return }
            // The provider's flow is not stored yet (the create's last write failed and is being retried).
            guard session.isStarted else {
                queue.noteProblem(sessionID, "the session's flow is not stored yet")
                guard await pause(unavailableInterval, before: session.expiresAt) else { return }
                continue
            }
            let flow = flows.serving(session.flow)
            do {
                if answered == nil {
                    switch try await flow.result(of: session, deadline: clock.deadline(for: session.expiresAt)) {
                    case .done(let result): answered = result
                    case .pending(let phoneHasIt):
                        if phoneHasIt, session.state == .waiting { try await service.phoneHasOperation(session) }
                        pendingInARow += 1
                        queue.noteProblem(sessionID, "\(flow.provider) still said pending")
                        logger.debug("The provider says the result is pending")
                        guard await pause(flow.pause(afterPending: pendingInARow), before: session.expiresAt)
                        else { return }
                        continue
                    }
                }
                if let answered {
                    try await service.finish(session, result: answered.result, prefill: answered.prefill)
                    queue.forget(sessionID)
                    return
                }
            } catch let error as any ProviderRefusal where error.refusal != nil {
                // The provider refused the question itself (not a retryable fault): the session cannot succeed.
                let reason = "\(flow.provider) rejected \(flow.resultQuestion) with \(error.refusal ?? "")"
                logger.warning("Verification failed", metadata: ["reason": .string(reason)])
                let result = SessionResult(outcome: .failed, proveSuccess: nil, reason: reason)
                try? await service.finish(session, result: result)
                queue.forget(sessionID)
                return
            } catch {
                // The provider unreachable (or the breaker open): keep asking until the hold ends; the expiry
                // then ends the session with this reason.
                queue.noteProblem(sessionID, "\(error)")
                logger.warning("Verification will be retried", metadata: ["error": "\(error)"])
                guard await pause(unavailableInterval, before: session.expiresAt) else { return }
            }
        }
    }

    /// Ends a session whose hold has passed (`SessionService.expire`). A session that never landed asks
    /// the provider once first (its flow's `lastQuestion`): the customer may have tapped with the redirect
    /// lost on the way; so does every live session of a flow asked from the start (Nevis), whose answer
    /// may have come since the last question. (The sweeper runs each expiry in a task of its own.)
    func expire(sessionID: String) async throws {
        if let session = try await store.session(id: sessionID), !session.state.isTerminal, session.isStarted,
            session.isPastHold(at: clock.now()),
            flows.serving(session.flow).asksFromStart || (session.state == .waiting && !session.verificationPending),
            lastQuestions.begin(sessionID)
        {
            return try await lastQuestion(session)
        }
        try await service.expire(sessionID: sessionID)
    }

    /// How long past the hold the last question may take.
    static let lastQuestionGrace: TimeInterval = 5

    /// Asks once, within `lastQuestionGrace` past the hold: verified ends the session `verified` (a
    /// `result` with no `tapped` before it), as does any final answer of a flow asked from the start;
    /// anything else, or no answer in time, `expired`.
    private func lastQuestion(_ session: Session) async throws {
        defer { lastQuestions.end(session.id) }
        var verified = false
        let flow = flows.serving(session.flow)
        do {
            if case .done(let answer) = try await flow.lastQuestion(
                session, deadline: clock.deadline(for: session.expiresAt + Self.lastQuestionGrace)),
                answer.result.outcome == .verified || flow.asksFromStart
            {
                try await service.finish(session, result: answer.result, prefill: answer.prefill)
                verified = answer.result.outcome == .verified
            }
        } catch {
            logger.info(
                "No answer to the last question before expiry",
                metadata: ["session": .string(session.id), "error": "\(error)"])
        }
        metrics.lastQuestion(verified: verified)
        // Should this throw, the sweeper tries again later, without asking twice. (A session the answer
        // ended stays as it is.)
        if !verified { try await service.expire(sessionID: session.id) }
        lastQuestions.forget(session.id)
    }

    /// Waits `interval` on the relay's clock. False when cancelled or when that would pass `deadline`.
    private func pause(_ interval: TimeInterval, before deadline: Date?) async -> Bool {
        let wake = clock.now().addingTimeInterval(interval)
        if let deadline, wake >= deadline { return false }
        do {
            try await clock.sleep(until: wake)
            return true
        } catch {
            return false
        }
    }
}
