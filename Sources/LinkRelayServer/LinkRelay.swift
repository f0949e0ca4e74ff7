import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOPosix
import NevisAPI
import NevisSandbox
import ProveAPI
import ProveSandbox
import QRCode
import ServiceLifecycle

/// A built relay: its server and services to run, and handles tests and the executable use.
public struct LinkRelay: Sendable {
    public let configuration: RelayConfiguration
    /// The store, the verifier, the sweeper and the other background work, then the server.
    let services: [any Service]
    /// The embedded Prove simulator, when `--prove sandbox`.
    public let sandbox: ProveSandbox?
    /// The embedded Nevis simulator: one instance for its routes and the relay's in-process client.
    public let nevisSandbox: NevisSandbox?
    public let metrics: RelayMetrics
    let store: any RelayStore
    /// The state machine, its flows, the verifier and the expiry sweeper.
    let parts: SessionParts
    var service: SessionService { parts.service }
    let clock: any RelayClock
    let frontDoor: FrontDoor.Services
    let hub: ChannelHub
    let draining: Draining
    let running: AsyncStream<Void>
    /// SIGHUP's reload of `--tenants`.
    let tenantsReload: TenantsReload
    /// With `--backup-dir`: the SQLite store's backups, written on SIGUSR1.
    var backups: SQLiteBackups? = nil
    /// With `--metrics-listen`: the operators' listener's table.
    var metricsRoutes: Routes? = nil

    /// Answers `request` through the route table without a socket, as `FrontDoor` would: the route's guard
    /// first (`Route.admit`), then its handler; a HEAD's answer has the GET's headers and no body. A
    /// channel's request passes the channel's checks (`ChannelGate`): a refusal, or an answer that opens
    /// nothing, is returned; a channel that would open is nil (none opens here).
    func respond(to request: RelayRequest) async -> Answer? {
        var answer = await answer(to: request)
        if request.method == .HEAD, var head = answer {
            head.headers.replaceOrAdd(name: "Content-Length", value: String(head.body.readableBytes))
            head.body.clear()
            answer = head
        }
        return answer
    }

    private func answer(to request: RelayRequest) async -> Answer? {
        var request = request
        let (routes, errors) = (frontDoor.routes, frontDoor.errors)
        guard let (route, parameters) = routes.match(request.method, request.path) else {
            return routes.unmatched(request, errors: errors)
        }
        request.parameters = parameters
        if let refusal = route.admit(&request) { return refusal }
        switch route.reply(to: request, errors: errors) {
        case .now(let answer): return answer
        case .later(let work): return await route.answer(work, errors: errors)
        case .channel(let channel):
            let opening = await withCheckedContinuation { done in
                frontDoor.channels.admit(channel) { done.resume(returning: $0) }
            }
            switch opening {
            case .refused(let error): return errors.answer(for: error, audience: .api)
            case .answered(let answer): return answer
            case .stream(_, _, let slot), .webSocket(_, _, let slot):
                slot.release()
                return nil
            }
        }
    }

    /// The route table as `linkrelay routes` prints it (`Routes.printed`), then the operators' listener's
    /// with `--metrics-listen`.
    public var routeTable: String {
        let main = frontDoor.routes.printed()
        guard let metricsRoutes, let listen = configuration.metricsListen else { return main }
        return main + "\n--metrics-listen \(listen.host):\(listen.port)\n" + metricsRoutes.printed()
    }

    /// Returns once every listener is bound (or at once if they already are).
    public func waitUntilRunning() async {
        for await _ in running {}
    }

    /// The relay as one service group: on a signal (or `triggerGracefulShutdown()`) the drain runs
    /// first, then the server stops, then the verifier, sweeper and store. The whole shutdown is
    /// bounded: after `--drain-timeout` and a few seconds more, whatever still runs is cancelled.
    /// With `handlingSignals`, SIGTERM and SIGINT start the shutdown, SIGUSR1 writes a backup and SIGHUP
    /// reads the tenants file again.
    /// Without `listening`, no listener binds: the background services run for a test that feeds
    /// connections to the front door itself.
    public func serviceGroup(handlingSignals: Bool = true, listening: Bool = true, logger: Logger) -> ServiceGroup {
        let drain = Drain(
            hub: hub, draining: draining, clock: clock, delay: configuration.drainDelay, sandbox: sandbox,
            timeout: .milliseconds(Int64(configuration.drainTimeout * 1000)),
            logger: logger, nevisSandbox: nevisSandbox)
        // Stopped before the store's teardown, so that a backup under way ends before the store closes.
        let signalled: [any Service] =
            handlingSignals
            ? [BackupOnSignal(backups: backups, logger: logger), ReloadOnSignal(reload: tenantsReload)] : []
        var group = ServiceGroupConfiguration(
            services: ((listening ? services : services.filter { !($0 is RelayServer) }) + signalled + [drain])
                .map { .init(service: $0) },
            gracefulShutdownSignals: handlingSignals ? [.sigterm, .sigint] : [], logger: logger)
        group.maximumGracefulShutdownDuration =
            .milliseconds(Int64((configuration.drainDelay + configuration.drainTimeout) * 1000)) + .seconds(5)
        return ServiceGroup(configuration: group)
    }
}

/// Builds the relay for `configuration`: opens the store, sets up Prove (or the sandbox), routes and services.
public func buildLinkRelay(
    _ configuration: RelayConfiguration, logger: Logger, clock: any RelayClock = EventLoopClock()
) async throws -> LinkRelay {
    let store: any RelayStore
    var postgres: PostgresSessionStore?
    var backups: SQLiteBackups?
    switch configuration.store {
    case .memory: store = MemorySessionStore()
    case .sqlite(let path):
        let sqlite = try await SQLiteSessionStore.open(path: path, logger: logger)
        store = sqlite
        backups = configuration.backupDirectory.map { SQLiteBackups(directory: $0, store: sqlite) }
    case .postgres(let url):
        let opened = try await PostgresSessionStore.open(url: url, logger: logger)
        (store, postgres) = (opened, opened)
    }

    let metrics = RelayMetrics(clock: clock, tenants: configuration.tenants.map(\.name))
    metrics.connectionCap(configuration.maxConnections)
    // Prove's and Nevis's calls go through the outbound policy's client (no redirects, answers capped at
    // 1 MiB, timeouts); it lives as long as the process, so no path can leave it unshut.
    let httpClient = ProviderHTTPClient.relay
    // Back-off between attempts waits on an event loop's timer, as the relay's other waits do (`EventLoopClock`).
    let retry = RetryPolicy(sleep: { try await EventLoopClock().sleep(for: $0) })
    let sandbox: ProveSandbox?
    let prove: any ProveClient
    // `--nevis sandbox` comes with `--prove sandbox` only: Nevis's simulator is mounted beside Prove's.
    let nevisSandbox = configuration.nevis == .sandbox ? NevisSandbox(publicBaseURL: configuration.publicURL) : nil
    // The relay asks its own sandboxes in process; while a fault is set, over loopback through the same
    // client it uses for the provider, so that the fault acts on that client.
    let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : configuration.host
    let loopback = "http://" + (host.contains(":") ? "[\(host)]" : host) + ":\(configuration.port)/sandbox"
    switch configuration.prove {
    case .sandbox:
        let embedded = ProveSandbox(publicBaseURL: configuration.publicURL)
        sandbox = embedded
        let overHTTP = HTTPProveClient(
            baseURL: loopback + "/prove",
            credentials: ProveCredentials(clientID: ProveSandbox.clientID, clientSecret: ProveSandbox.clientSecret),
            httpClient: httpClient, retry: retry, observer: metrics, logger: logger)
        prove = SandboxProveClient(sandbox: embedded, overHTTP: overHTTP, observer: metrics, logger: logger)
    case .remote(let baseURL, let credentials, let prefillCredentials):
        sandbox = nil
        prove = HTTPProveClient(
            baseURL: baseURL, credentials: credentials, prefillCredentials: prefillCredentials,
            httpClient: httpClient, retry: retry, observer: metrics, logger: logger)
    }

    if sandbox != nil, configuration.sandboxPublic, !RelayConfiguration.isLoopback(configuration.host) {
        logger.warning(
            "The embedded sandbox is served beyond loopback (--sandbox-public): anyone who reaches this address can read every link and tap any session",
            metadata: ["host": .string(configuration.host)])
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

    let (nevis, nevisBreaker) = try nevisClient(
        configuration, sandbox: nevisSandbox.map { ($0, loopback + "/nevis") }, httpClient: httpClient, retry: retry,
        clock: clock, metrics: metrics, logger: logger)

    let hub = ChannelHub()
    let webhooks = configuration.tenants.compactMap { tenant in tenant.webhook.map { (tenant.name, $0) } }
    // Whether messages go out, and where: an operator reads it before the first one is due.
    if webhooks.isEmpty { logger.info("Webhooks off: no tenant has a webhook URL") }
    for (tenant, settings) in webhooks {
        logger.info("Webhooks on", metadata: ["tenant": .string(tenant), "webhook.origin": .string(settings.origin)])
    }
    // With a tenants file, a sender even without a webhook: SIGHUP's reload may add one.
    let webhookSender =
        webhooks.isEmpty && configuration.tenantsFile == nil
        ? nil : WebhookSender(webhooks: webhooks, outbox: store, clock: clock, metrics: metrics, logger: logger)
    let parts = SessionParts(
        store: store, bus: hub,
        prove: BreakerProveClient(
            wrapped: prove, breaker: breaker, clock: clock, refused: { metrics.breakerRefused() }), clock: clock,
        metrics: metrics, logger: logger,
        publicURL: configuration.publicURL, defaultHold: configuration.holdSeconds,
        webhooks: webhookSender.map { sender in
            WebhookReporter(reports: sender.hasWebhook, committed: sender.wake)
        },
        identityRetention: configuration.identityRetention, nevis: nevis)
    let service = parts.service
    let pages = try await Pages.load(directory: configuration.templatesDirectory, sandbox: sandbox != nil)
    let draining = Draining()
    let securityEvents = SecurityEvents(metrics: metrics, logger: logger, clock: clock)
    let limits = RequestLimits(
        limits: configuration.limits, trustedProxies: configuration.trustedProxies, clock: clock,
        securityEvents: securityEvents)
    // With PostgreSQL, other instances' writes reach this instance's channels through the listener,
    // and the coordinator takes over what a gone instance left.
    var listener: PostgresListener?
    var instances: [any Service] = []
    if let postgres, case .postgres(let url) = configuration.store {
        let bus = PostgresListener(url: url, store: postgres, hub: hub, logger: logger)
        listener = bus
        instances = [bus, InstanceCoordinator(store: postgres, verifier: parts.verifier, clock: clock, logger: logger)]
    }

    let writer = ResponseWriter(
        strictTransportSecurity: configuration.publicURL.hasPrefix("https://"), metrics: metrics)
    let liveSessions = LiveSessions(store: store, clock: clock, metrics: metrics)
    let operations = OpsController(
        store: store, draining: draining, listener: listener, liveSessions: liveSessions)
    let origins = AllowedOrigins(defaults: configuration.allowedOrigins, tenants: configuration.tenants)
    let gate = ChannelGate(store: store, origins: origins, securityEvents: securityEvents)
    let channels = ChannelsController(gate: gate, limits: limits)
    let apiKeys = APIKeys(tenants: configuration.tenants, opsKeys: configuration.opsKeys)
    let tenantsReload = TenantsReload(
        configuration: configuration, apiKeys: apiKeys, origins: origins, webhooks: webhookSender, logger: logger)
    let sessions = SessionsController(
        service: service, apiKeys: apiKeys, publicURL: configuration.publicURL, limits: limits, gate: gate)
    let errors = ErrorMapping(pages: pages, logger: logger, publicURL: configuration.publicURL)
    let routes = Routes(
        guards: Guards(apiKeys: apiKeys, gate: gate, limits: limits, pages: pages, errors: errors),
        landing: LandingController(
            service: service, metrics: metrics, clock: clock, logger: logger, pages: pages, limits: limits,
            repeatLandings: RepeatLandings(),
            confirmOnPhone: configuration.confirmOnPhone, integratorName: configuration.integratorName,
            publicURL: configuration.publicURL, deepLinks: configuration.deepLinks),
        channels: channels,
        sessions: sessions,
        webhooks: WebhooksController(sender: webhookSender),
        operations: operations,
        opsPage: OpsPage(
            metrics: metrics, live: liveSessions, sharedStore: postgres != nil, breaker: breaker,
            nevisBreaker: nevisBreaker, webhooks: webhookSender, pages: pages, clock: clock, operations: operations),
        pages: pages,
        demo: sandbox.map {
            DemoController(
                service: service, sandbox: $0, pages: pages, publicURL: configuration.publicURL,
                securityEvents: securityEvents)
        },
        sandbox: sandbox.map { SandboxController(sandbox: $0, nevis: nevisSandbox) },
        apiDescription: try APIDescription.load(
            directory: configuration.templatesDirectory, publicURL: configuration.publicURL),
        deepLinks: configuration.deepLinks,
        publicPath: URLComponents(string: configuration.publicURL)?.path ?? "",
        metricsElsewhere: configuration.metricsListen != nil)
    let channelServices = ChannelServices(
        hub: hub, store: store, clock: clock, metrics: metrics, writer: writer, securityEvents: securityEvents)
    func frontDoorServices(_ routes: Routes) -> FrontDoor.Services {
        FrontDoor.Services(
            routes: routes, errors: errors, channels: channels,
            channelServices: channelServices, securityEvents: securityEvents,
            headerTimeout: .seconds(Int64(configuration.headerTimeout)),
            bodyTimeout: .seconds(Int64(configuration.bodyTimeout)))
    }
    let frontDoor = frontDoorServices(routes)
    // Running once every listener is bound: the operators' own may bind after the public one.
    let (running, runningContinuation) = AsyncStream<Void>.makeStream()
    let unbound = Locked(configuration.metricsListen == nil ? 1 : 2)
    let bound: @Sendable () -> Void = {
        if unbound.withLock({ count in
            count -= 1
            return count == 0
        }) {
            runningContinuation.finish()
        }
    }
    // Operators' scrapes on an address of their own: few connections, no per-address cap.
    let metricsRoutes = Routes(operations: operations)
    let metricsServer = configuration.metricsListen.map { listen in
        RelayServer(
            host: listen.host, port: listen.port, maxConnections: 64, perAddress: nil,
            frontDoor: frontDoorServices(metricsRoutes), logger: logger
        ) { channel in
            logger.notice("Metrics listening", metadata: ["address": "\(channel.localAddress.map { "\($0)" } ?? "?")"])
            bound()
        }
    }

    let mode = sandbox == nil ? "prove" : "SANDBOX (simulated Prove)"
    let server = RelayServer(
        host: configuration.host, port: configuration.port, maxConnections: configuration.maxConnections,
        perAddress: configuration.connectionsPerAddress.map {
            OpenConnections.PerAddress(
                maximum: $0, trustedProxies: configuration.trustedProxies, securityEvents: securityEvents)
        },
        frontDoor: frontDoor, logger: logger, counted: metrics.connectionsOpen
    ) { channel in
        logger.notice(
            "LinkRelay listening",
            metadata: [
                "address": "\(channel.localAddress.map { "\($0)" } ?? "?")",
                "public_url": .string(configuration.publicURL), "mode": .string(mode),
                "event_loops": "\(Array(MultiThreadedEventLoopGroup.singleton.makeIterator()).count)",
            ])
        bound()
    }
    let optional: [(any Service)?] = [webhookSender, metricsServer]
    let services: [any Service] =
        [
            Teardown(store: store, logger: logger),
            parts.verifier,
            parts.expirySweeper,
            RetentionSweeper(
                service: service, store: store, clock: clock, logger: logger, metrics: metrics,
                retentionDays: configuration.retentionDays),
            ChannelHeartbeat(hub: hub, clock: clock),
            MemoryTrim(
                tunesGlibc: configuration.mallocTuning, activity: { hub.activity },
                release: {
                    await store.releaseMemory()
                    parts.expiries.compact()
                    hub.compact()
                }),
        ] + instances + optional.compactMap { $0 } + [server]
    return LinkRelay(
        configuration: configuration, services: services, sandbox: sandbox, nevisSandbox: nevisSandbox,
        metrics: metrics, store: store, parts: parts, clock: clock, frontDoor: frontDoor, hub: hub, draining: draining,
        running: running, tenantsReload: tenantsReload, backups: backups,
        metricsRoutes: configuration.metricsListen == nil ? nil : metricsRoutes)
}

/// The Nevis client `--nevis` names, behind its own circuit breaker (for the ops page too); nil without `--nevis`.
private func nevisClient(
    _ configuration: RelayConfiguration, sandbox: (NevisSandbox, loopback: String)?, httpClient: ProviderHTTPClient,
    retry: RetryPolicy, clock: any RelayClock, metrics: RelayMetrics, logger: Logger
) throws -> (client: (any NevisClient)?, breaker: CircuitBreaker?) {
    let observe: NevisCallObserver = { metrics.nevisCall(endpoint: $0, status: $1, duration: $2) }
    let drawQR: NevisQRDrawer = { link in try? QRCode(Array(link.utf8)).pngDataURI() }
    let client: any NevisClient
    // Which Nevis the relay asks, read before the first operation: the backend and its host, no secret.
    switch configuration.nevis {
    case nil: logger.info("Nevis off: \"flow\":\"nevis\" is refused")
    case .sandbox: logger.info("Nevis: the embedded sandbox", metadata: ["nevis.url": .string(sandbox?.loopback ?? "")])
    case .remote(.authCloud(let url), _):
        logger.info("Nevis: Authentication Cloud", metadata: ["nevis.url": .string(url)])
    case .remote(.fido(let url, let dispatcher), _):
        logger.info(
            "Nevis: nevisFIDO", metadata: ["nevis.url": .string(url), "nevis.dispatcher": .string(dispatcher.rawValue)])
    }
    switch (configuration.nevis, sandbox) {
    case (nil, _): return (nil, nil)
    case (.sandbox, let (embedded, loopback)?):
        let overHTTP = try AuthCloudClient(
            baseURL: loopback, accessKey: NevisSandbox.accessKey, httpClient: httpClient, retry: retry,
            observe: observe, logger: logger, drawQR: drawQR)
        client = SandboxNevisClient(sandbox: embedded, overHTTP: overHTTP, observer: observe, logger: logger)
    case (.sandbox, nil): return (nil, nil)
    case (.remote(let backend, let secret), _):
        client = try makeNevisClient(
            backend: backend, accessKey: secret, fidoToken: secret, httpClient: httpClient, retry: retry,
            observe: observe, logger: logger, drawQR: drawQR)
    }
    let breaker = CircuitBreaker(
        failureThreshold: configuration.breakerFailures, openDuration: configuration.breakerCooldown
    ) { from, to in
        metrics.nevisBreakerChanged(open: to != .closed)
        logger.warning(
            "Circuit breaker around Nevis changed",
            metadata: ["from": .string(from.rawValue), "to": .string(to.rawValue)])
    }
    let guarded = BreakerNevisClient(
        wrapped: client, breaker: breaker, clock: clock, refused: { metrics.nevisBreakerRefused() })
    return (guarded, breaker)
}
