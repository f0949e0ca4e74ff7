import Foundation
import Logging
import NIOCore
import NevisSandbox
import ProveSandbox
import ServiceLifecycle

/// The sandboxes alone (`linkrelay sandbox --host H --port P`): the Prove simulator at
/// `http://H:P/sandbox/prove`, its outbox at `http://H:P/sandbox/outbox`, and with `nevis` the Nevis simulator
/// at `http://H:P/sandbox/nevis/`, served by the relay's own front door with a route table of the
/// sandbox's routes only. Any other path is a 404.
///
/// On a graceful shutdown (SIGTERM, SIGINT) the sandbox lets go of what its faults hold first (hangs are
/// dropped, latencies cut short), then the server stops accepting and lets each connection finish the
/// request it is answering.
public struct SandboxServer: Sendable {
    public let sandbox: ProveSandbox
    public let nevis: NevisSandbox?
    let server: RelayServer
    /// The bound port, once; finished when the server stops.
    let bound: (stream: AsyncStream<Int>, continuation: AsyncStream<Int>.Continuation)
    let logger: Logger

    /// - Parameters:
    ///   - sandbox: the simulator it serves (tests keep a reference to inspect it).
    ///   - nevis: the Nevis simulator it serves beside it.
    ///   - port: 0 for any free port; ``serving(_:)`` tells which.
    public init(sandbox: ProveSandbox, nevis: NevisSandbox? = nil, host: String, port: Int, logger: Logger) {
        self.sandbox = sandbox
        self.nevis = nevis
        self.logger = logger
        let (bound, reportBound) = AsyncStream<Int>.makeStream()
        self.bound = (bound, reportBound)
        let clock = EventLoopClock()
        let metrics = RelayMetrics(clock: clock)
        let securityEvents = SecurityEvents(metrics: metrics, logger: logger, clock: clock)
        // The front door asks for the channels' services; the sandbox's table has no channel route, so they
        // stay idle.
        let store = MemorySessionStore()
        let channels = ChannelsController(
            gate: ChannelGate(store: store, origins: AllowedOrigins(defaults: []), securityEvents: securityEvents),
            limits: RequestLimits(limits: nil, trustedProxies: [], clock: clock, securityEvents: securityEvents))
        let channelServices = ChannelServices(
            hub: ChannelHub(), store: store, clock: clock, metrics: metrics,
            writer: ResponseWriter(strictTransportSecurity: false), securityEvents: securityEvents)
        let frontDoor = FrontDoor.Services(
            routes: Routes(sandbox: SandboxController(sandbox: sandbox, nevis: nevis)),
            // No `/errors` page here: the sandbox's problems keep `type` about:blank, with their `code`.
            errors: ErrorMapping(pages: Pages.withoutTemplates(), logger: logger, publicURL: nil), channels: channels,
            channelServices: channelServices, securityEvents: securityEvents)
        server = RelayServer(
            host: host, port: port, maxConnections: RelayConfiguration.defaultMaxConnections, perAddress: nil,
            frontDoor: frontDoor, logger: logger
        ) { listener in
            let port = listener.localAddress?.port ?? port
            let base = ProveSandbox.localBaseURL(host: host, port: port)
            var metadata: Logger.Metadata = ["prove": .string(base + "/sandbox/prove")]
            if nevis != nil { metadata["nevis"] = .string(base + "/sandbox/nevis/app") }
            logger.notice("Prove sandbox listening on \(base.dropFirst(7))", metadata: metadata)
            reportBound.yield(port)
            reportBound.finish()
        }
    }

    /// Serves until SIGTERM or SIGINT (`handlingSignals`) or the task is cancelled.
    public func run(handlingSignals: Bool = true) async throws {
        try await serviceGroup(handlingSignals: handlingSignals).run()
    }

    /// Serves while `body` runs, then shuts down as on SIGTERM; `body` gets the port the server is bound to.
    /// A server serves once.
    public func serving<T: Sendable>(_ body: @escaping @Sendable (Int) async throws -> T) async throws -> T {
        let group = serviceGroup(handlingSignals: false)
        return try await withThrowingTaskGroup(of: T?.self) { [bound] tasks in
            tasks.addTask {
                // A server that cannot bind ends here: the wait for the port below ends with it.
                defer { bound.continuation.finish() }
                try await group.run()
                return nil
            }
            var port: Int?
            for await bound in bound.stream { port = bound }
            guard let port else {
                try await tasks.waitForAll()
                throw CancellationError()
            }
            let result: Result<T, any Error>
            do {
                result = .success(try await body(port))
            } catch {
                result = .failure(error)
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return try result.get()
        }
    }

    private func serviceGroup(handlingSignals: Bool) -> ServiceGroup {
        ServiceGroup(
            configuration: .init(
                services: [.init(service: server), .init(service: ShutDownSandbox(sandbox: sandbox, nevis: nevis))],
                gracefulShutdownSignals: handlingSignals ? [.sigterm, .sigint] : [], logger: logger))
    }
}

/// Listed after the server, so that a graceful shutdown reaches it first: the requests the sandbox's faults
/// hold are let go before the server waits for every request in progress.
struct ShutDownSandbox: Service {
    let sandbox: ProveSandbox
    let nevis: NevisSandbox?

    func run() async throws {
        try? await gracefulShutdown()
        await sandbox.shutDown()
        nevis?.shutDown()
    }
}
