import LinkRelayCore
import Logging
import ServiceLifecycle

/// With several instances on PostgreSQL, what one starts another may have to finish. Every
/// `PostgresSessionStore.heartbeat` seconds this says that its instance runs, and takes over what a
/// gone instance left: landed sessions that no running instance is verifying, and live sessions whose
/// hold ended `presumedGone` seconds ago. Claims and the version check of every write make each of
/// those happen once, whichever instances try. On shutdown the instance leaves, so that its work is
/// taken over at once.
struct InstanceCoordinator: Service {
    let store: PostgresSessionStore
    let verifier: Verifier
    let clock: any RelayClock
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                do {
                    try await store.heartbeat()
                    for id in try await store.orphanedVerifications() { verifier.kick(id) }
                    for id in try await store.overdueSessions(grace: PostgresSessionStore.presumedGone) {
                        try await verifier.expire(sessionID: id)
                    }
                } catch {
                    logger.warning(
                        "Could not take over the work of gone instances", metadata: ["error": "\(error)"])
                }
                let next = clock.now().addingTimeInterval(Double(PostgresSessionStore.heartbeat))
                try await clock.sleep(until: next)
            }
        }
        try? await store.leave()
    }
}
