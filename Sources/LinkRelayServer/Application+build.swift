import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdCore
import LinkRelayCore
import Logging
import ProveAPI
import ProveSandbox
import ServiceLifecycle

/// A built relay: its server and services to run, and handles tests and the executable use.
public struct LinkRelay: Sendable {
    public let configuration: RelayConfiguration
    /// The store, the verifier, the sweeper and the other background work, then the server.
    let services: [any Service]
    /// The embedded Prove simulator, when `--prove sandbox`.
    public let sandbox: ProveSandbox?
    public let metrics: RelayMetrics
    let service: SessionService
    let hub: ChannelHub
    let draining: Draining
    let running: AsyncStream<Void>

    public var store: any SessionStore { service.store }

    /// Returns once the server listens (or at once if it already does).
    public func waitUntilRunning() async {
        for await _ in running {}
    }

    /// The relay as one service group: on a signal (or `triggerGracefulShutdown()`) the drain runs
    /// first, then the server stops, then the verifier, sweeper and store. The whole shutdown is
    /// bounded: after `--drain-timeout` and a few seconds more, whatever still runs is cancelled.
    /// With `handlingSignals`, SIGTERM and SIGINT start the shutdown.
    public func serviceGroup(handlingSignals: Bool = true, logger: Logger) -> ServiceGroup {
        let drain = Drain(
            hub: hub, draining: draining, timeout: .milliseconds(Int64(configuration.drainTimeout * 1000)),
            logger: logger)
        var group = ServiceGroupConfiguration(
            services: (services + [drain]).map { .init(service: $0) },
            gracefulShutdownSignals: handlingSignals ? [.sigterm, .sigint] : [], logger: logger)
        group.maximumGracefulShutdownDuration = .milliseconds(Int64(configuration.drainTimeout * 1000)) + .seconds(5)
        return ServiceGroup(configuration: group)
    }
}

/// Builds the relay for `configuration`: opens the store, sets up Prove (or the sandbox), routes and services.
public func buildLinkRelay(
    _ configuration: RelayConfiguration, logger: Logger, clock: any RelayClock = EventLoopClock()
) async throws -> LinkRelay {
    let store: any SessionStore
    var postgres: PostgresSessionStore?
    switch configuration.store {
    case .memory: store = MemorySessionStore()
    case .sqlite(let path): store = try await SQLiteSessionStore.open(path: path, logger: logger)
    case .postgres(let url):
        let opened = try await PostgresSessionStore.open(url: url, logger: logger)
        (store, postgres) = (opened, opened)
    }

    let metrics = RelayMetrics()
    // The process-wide client: it lives as long as the process, so no path can leave it unshut.
    let httpClient = HTTPClient.shared
    // Back-off between attempts waits on an event loop's timer, as the relay's other waits do (`EventLoopClock`).
    let retry = RetryPolicy(sleep: { try await EventLoopClock().sleep(for: $0) })
    let sandbox: ProveSandbox?
    let prove: any ProveClient
    switch configuration.prove {
    case .sandbox:
        let embedded = ProveSandbox(publicBaseURL: configuration.publicURL)
        sandbox = embedded
        // The relay asks its own sandbox in process; while a fault is set, over loopback through the same
        // client it uses for Prove, so that the fault acts on that client.
        let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : configuration.host
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let overHTTP = HTTPProveClient(
            baseURL: "http://\(hostPart):\(configuration.port)/sandbox/prove",
            credentials: ProveCredentials(clientID: ProveSandbox.clientID, clientSecret: ProveSandbox.clientSecret),
            httpClient: httpClient, retry: retry, observer: metrics, logger: logger)
        prove = SandboxProveClient(sandbox: embedded, overHTTP: overHTTP, observer: metrics, logger: logger)
    case .remote(let baseURL, let credentials):
        sandbox = nil
        prove = HTTPProveClient(
            baseURL: baseURL, credentials: credentials, httpClient: httpClient, retry: retry, observer: metrics,
            logger: logger)
    }

    if let sandbox {
        for (endpoint, fault) in configuration.sandboxFaults {
            try await sandbox.setFault(fault, for: endpoint)
            logger.notice("Sandbox fault set", metadata: ["endpoint": .string(endpoint), "fault": "\(fault)"])
        }
    }
    let breaker = CircuitBreaker(
        failureThreshold: configuration.breakerFailures, openDuration: configuration.breakerCooldown
    ) { from, to in
        metrics.breakerChanged(open: to != .closed)
        logger.warning(
            "Circuit breaker around Prove changed",
            metadata: ["from": .string(from.rawValue), "to": .string(to.rawValue)])
    }

    let hub = ChannelHub()
    let service = SessionService(
        store: store, bus: hub, prove: BreakerProveClient(wrapped: prove, breaker: breaker, clock: clock), clock: clock,
        metrics: metrics, logger: logger,
        publicURL: configuration.publicURL, defaultHold: configuration.holdSeconds)
    let pages = try await Pages.load(directory: configuration.templatesDirectory, sandbox: sandbox != nil)
    let draining = Draining()

    let limits = RequestLimits(
        limits: configuration.limits, trustedProxies: configuration.trustedProxies, clock: clock, metrics: metrics,
        logger: logger)

    let router = Router(context: RelayContext.self)
    let strictTransportSecurity = configuration.publicURL.hasPrefix("https://")
    router.add(middleware: SecurityHeadersMiddleware(strictTransportSecurity: strictTransportSecurity))
    router.add(middleware: ErrorMiddleware(pages: pages))
    SessionsController(
        service: service, apiKeys: configuration.apiKeys, publicURL: configuration.publicURL, limits: limits
    ).addRoutes(to: router)
    let repeatLandings = RepeatLandings(
        final: pages.page("final", ["rejected": false]), rejected: pages.page("final", ["rejected": true]),
        busy: pages.page("error-busy", status: .tooManyRequests), strictTransportSecurity: strictTransportSecurity)
    let landing = LandingController(
        service: service, pages: pages, limits: limits, repeatLandings: repeatLandings,
        confirmOnPhone: configuration.confirmOnPhone,
        integratorName: configuration.integratorName,
        publicOrigin: RelayConfiguration.origin(of: configuration.publicURL))
    landing.addRoutes(to: router)
    let channels = ChannelServices(
        gate: ChannelGate(store: store, allowedOrigins: Set(configuration.allowedOrigins), logger: logger), hub: hub,
        store: store, clock: clock, metrics: metrics, limits: limits, landing: landing, landings: repeatLandings,
        strictTransportSecurity: strictTransportSecurity)
    ChannelsController(gate: channels.gate).addRoutes(to: router)
    // With PostgreSQL, other instances' writes reach this instance's channels through the listener,
    // and the coordinator takes over what a gone instance left.
    var listener: PostgresListener?
    var instances: [any Service] = []
    if let postgres, case .postgres(let url) = configuration.store {
        let bus = PostgresListener(url: url, store: postgres, hub: hub, logger: logger)
        listener = bus
        instances = [bus, InstanceCoordinator(store: postgres, service: service)]
    }
    OpsController(service: service, draining: draining, pages: pages, listener: listener).addRoutes(to: router)
    if let sandbox {
        sandbox.addRoutes(to: router)
        DemoController(service: service, sandbox: sandbox, pages: pages, publicURL: configuration.publicURL)
            .addRoutes(to: router)
    } else {
        router.get("/") { _, _ in pages.render("demo") }
    }

    let (running, runningContinuation) = AsyncStream<Void>.makeStream()
    let mode = sandbox == nil ? "prove" : "SANDBOX (simulated Prove)"
    let responder = router.buildResponder()
    let http1 = HTTP1Channel { request, writer, channel in
        try await answer(request, writer, on: channel, with: responder, logger: logger)
    }
    let server = RelayServer(
        host: configuration.host, port: configuration.port, maxConnections: configuration.maxConnections,
        child: RelayChildChannel(http1: http1, services: channels), logger: logger
    ) { channel in
        logger.notice(
            "LinkRelay listening",
            metadata: [
                "address": "\(channel.localAddress.map { "\($0)" } ?? "?")",
                "public_url": .string(configuration.publicURL), "mode": .string(mode),
            ])
        runningContinuation.finish()
    }
    let services: [any Service] =
        [
            Teardown(store: store, logger: logger),
            Verifier(service: service),
            ExpirySweeper(service: service),
            ChannelHeartbeat(hub: hub, clock: clock),
            MemoryTrim(
                activity: { hub.activity },
                release: {
                    await store.releaseMemory()
                    service.expiries.compact()
                    hub.compact()
                }),
        ] + instances + [server]
    return LinkRelay(
        configuration: configuration, services: services, sandbox: sandbox, metrics: metrics,
        service: service, hub: hub, draining: draining, running: running)
}

/// The first step of a shutdown (listed after the server, so it is told first): `/readyz` turns
/// 503, every channel gets its ending (WebSocket 1012, SSE a `retry:` hint, a held long-poll its
/// answer), and it waits until they are gone or `timeout` has passed. Only then does the server stop
/// accepting connections; landings and API calls keep working meanwhile.
struct Drain: Service {
    let hub: ChannelHub
    let draining: Draining
    let timeout: Duration
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        draining.start()
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

/// Runs until shutdown, then closes the store. Listed first among the services, so it stops last.
struct Teardown: Service {
    let store: any SessionStore
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

/// Headers every response carries: `nosniff`, and HSTS when the public URL is https (the relay may sit
/// behind a TLS-terminating proxy, so it goes by the public URL, not by how the request arrived).
struct SecurityHeadersMiddleware: RouterMiddleware {
    let strictTransportSecurity: Bool

    func handle(_ request: Request, context: RelayContext, next: (Request, RelayContext) async throws -> Response)
        async throws -> Response
    {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        Self.add(to: &response.headers, strictTransportSecurity: strictTransportSecurity)
        return response
    }

    static func add(to headers: inout HTTPFields, strictTransportSecurity: Bool) {
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        if strictTransportSecurity {
            headers[.strictTransportSecurity] = "max-age=63072000; includeSubDomains"
        }
    }
}

/// Turns every error into what its caller can read: an HTML page for the phone's landing,
/// problem+json for everything else. Unexpected errors are logged by type, never echoed.
struct ErrorMiddleware: RouterMiddleware {
    let pages: Pages

    func handle(_ request: Request, context: RelayContext, next: (Request, RelayContext) async throws -> Response)
        async throws -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            let problem = Self.problem(for: error, logger: context.logger)
            if request.uri.path.hasPrefix("/l/") { return Self.landingPage(for: problem, pages).response }
            throw problem
        }
    }

    static func problem(for error: any Error, logger: Logger) -> Problem {
        switch error {
        case let known as Problem:
            return known
        case let http as any HTTPResponseError:
            return Problem(
                status: http.status, title: http.status.reasonPhrase,
                detail: http.status == .notFound ? "No such resource." : http.status.reasonPhrase)
        default:
            logger.error("Request failed", metadata: ["error.type": "\(type(of: error))"])
            return Problem(
                status: .internalServerError, title: "Internal Server Error", detail: "The relay could not answer.")
        }
    }

    /// The phone's page for a problem on its landing.
    static func landingPage(for problem: Problem, _ pages: Pages) -> Page {
        switch problem.status {
        case .notFound: pages.page("error-unknown", status: .notFound)
        case .badRequest: pages.page("error-bad-link", status: .badRequest)
        default: pages.page("error-unavailable", status: problem.status)
        }
    }
}
