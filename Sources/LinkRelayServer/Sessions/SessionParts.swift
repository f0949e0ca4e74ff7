import Foundation
import LinkRelayCore
import Logging
import NevisAPI
import ProveAPI

/// The sessions' part of the relay, wired: the state machine with its flows, the verifier and the expiry
/// sweeper, around the two queues they share. The relay and the tests build it alike.
struct SessionParts {
    let service: SessionService
    let verifier: Verifier
    let expirySweeper: ExpirySweeper
    /// Compacted with the relay's other memory (`MemoryTrim`).
    let expiries: ExpiryQueue

    init(
        store: any SessionStore & ClusterClaims, bus: any EventBus, prove: any ProveClient, clock: any RelayClock,
        metrics: RelayMetrics, logger: Logger, publicURL: String, defaultHold: Int, webhooks: WebhookReporter? = nil,
        identityRetention: TimeInterval = 900, nevis: (any NevisClient)? = nil
    ) {
        let flows = Flows(
            unify: UnifyFlow(prove: prove, clock: clock),
            prefill: PrefillFlow(prove: prove, clock: clock, metrics: metrics, identityRetention: identityRetention),
            nevis: NevisFlow(client: nevis))
        let verifications = VerificationQueue()
        expiries = ExpiryQueue()
        service = SessionService(
            store: store, bus: bus, flows: flows, verifications: verifications, expiries: expiries, clock: clock,
            metrics: metrics, logger: logger, publicURL: publicURL, defaultHold: defaultHold, webhooks: webhooks)
        verifier = Verifier(
            queue: verifications, lastQuestions: LastQuestions(), service: service, flows: flows, store: store,
            clock: clock, metrics: metrics, logger: logger)
        expirySweeper = ExpirySweeper(queue: expiries, verifier: verifier, store: store, clock: clock, logger: logger)
    }
}
