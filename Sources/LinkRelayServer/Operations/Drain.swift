import Foundation
import LinkRelayCore
import Logging
import NevisSandbox
import ProveSandbox
import ServiceLifecycle

/// The first step of a shutdown (listed after the server, so it is told first): `/readyz` turns
/// 503, and for `delay` nothing else changes, so that load balancers see it and send new clients
/// elsewhere. Then every channel gets its ending (WebSocket 1012, SSE a `retry:` hint, a held
/// long-poll its answer), and it waits until they are gone or `timeout` has passed. Only then does
/// the server stop accepting connections; landings and API calls keep working meanwhile.
struct Drain: Service {
    let hub: ChannelHub
    let draining: Draining
    let clock: any RelayClock
    let delay: TimeInterval
    /// The embedded sandbox, whose requests held by a fault (a hang, a latency) are let go at once.
    let sandbox: ProveSandbox?
    let timeout: Duration
    let logger: Logger
    /// The embedded Nevis sandbox, let go of in the same way.
    var nevisSandbox: NevisSandbox? = nil

    func run() async throws {
        try? await gracefulShutdown()
        draining.start()
        await sandbox?.shutDown()
        nevisSandbox?.shutDown()
        if delay > 0 {
            logger.notice("Shutting down: /readyz answers 503", metadata: ["seconds": "\(delay)"])
            try? await clock.sleep(until: clock.now().addingTimeInterval(delay))
        }
        logger.notice("Shutting down: draining channels", metadata: ["channels": "\(hub.listenerCount)"])
        hub.beginShutdown()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await hub.drained() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        logger.notice("Drained", metadata: ["channels_left": "\(hub.listenerCount)"])
    }
}
