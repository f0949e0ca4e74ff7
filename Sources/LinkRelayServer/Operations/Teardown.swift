import LinkRelayCore
import Logging
import ServiceLifecycle

/// Runs until shutdown, then closes the store. Listed first among the services, so it stops last.
struct Teardown: Service {
    let store: any StoreHealth
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        do {
            try await store.close()
        } catch {
            logger.error("Closing the store failed", metadata: ["error": "\(error)"])
        }
    }
}
