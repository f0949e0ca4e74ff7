import LinkRelaySupport
import Logging
import ServiceLifecycle
import UnixSignals

/// SIGHUP's work: the tenants file read again, and its keys, ops keys, origins and webhooks in force from
/// the next request on. Sessions, channels and queued webhook messages go on as they were. A file that
/// does not parse or validate changes nothing and is named in one line.
final class TenantsReload: Sendable {
    private let configuration: RelayConfiguration
    private let apiKeys: APIKeys
    private let origins: AllowedOrigins
    /// With `--tenants` the relay always has a sender, so that a reload can add the first webhook.
    private let webhooks: WebhookSender?
    private let logger: Logger
    /// The tenants in force, to tell what a reload changed.
    private let current: Locked<[TenantSettings]>

    init(
        configuration: RelayConfiguration, apiKeys: APIKeys, origins: AllowedOrigins, webhooks: WebhookSender?,
        logger: Logger
    ) {
        self.configuration = configuration
        self.apiKeys = apiKeys
        self.origins = origins
        self.webhooks = webhooks
        self.logger = logger
        current = Locked(configuration.tenants)
    }

    /// What a reload did, by tenant name.
    struct Changes: Sendable, Equatable {
        var added: [String] = []
        var removed: [String] = []
        var changed: [String] = []
    }

    enum Outcome: Sendable, Equatable {
        /// No `--tenants`: nothing to read.
        case noFile
        /// The file's fault, as logged; the tenants in force stay.
        case refused(String)
        case applied(Changes)
    }

    /// Says, once SIGHUP is the reload's, what it will do.
    func trapped() {
        if let file = configuration.tenantsFile {
            logger.notice("SIGHUP reads the tenants file again", metadata: ["file": .string(file.path)])
        } else {
            logger.debug("SIGHUP handled; no --tenants file to read again")
        }
    }

    /// Reads the tenants file again and applies it, logging one line either way.
    @discardableResult
    func reload() -> Outcome {
        let read: (tenants: [TenantSettings], opsKeys: [String])?
        do {
            read = try configuration.reloadedTenants()
        } catch {
            logger.error(
                "SIGHUP: the tenants file is not applied; the tenants in force stay", metadata: ["error": "\(error)"])
            return .refused(error.description)
        }
        guard let (tenants, opsKeys) = read else {
            logger.notice("SIGHUP ignored: no --tenants file to read again")
            return .noFile
        }
        webhooks?.replaceWebhooks(tenants.compactMap { tenant in tenant.webhook.map { (tenant.name, $0) } })
        origins.replace(tenants: tenants)
        apiKeys.replace(tenants: tenants, opsKeys: opsKeys)
        let before = current.withLock { old in
            defer { old = tenants }
            return old
        }
        let changes = Self.changes(from: before, to: tenants)
        logger.notice(
            "SIGHUP: tenants reloaded",
            metadata: [
                "tenants.added": .string(changes.added.joined(separator: ",")),
                "tenants.removed": .string(changes.removed.joined(separator: ",")),
                "tenants.changed": .string(changes.changed.joined(separator: ",")),
                "ops_keys": "\(opsKeys.count)",
            ])
        return .applied(changes)
    }

    static func changes(from before: [TenantSettings], to after: [TenantSettings]) -> Changes {
        var changes = Changes()
        for tenant in after {
            guard let old = before.first(where: { $0.name == tenant.name }) else {
                changes.added.append(tenant.name)
                continue
            }
            if !old.isSame(as: tenant) { changes.changed.append(tenant.name) }
        }
        changes.removed = before.map(\.name).filter { name in !after.contains { $0.name == name } }
        return changes
    }
}

/// SIGHUP: `TenantsReload.reload()`. Only where the process's signals are the relay's
/// (`serviceGroup(handlingSignals:)`); from its start on, SIGHUP never ends the process.
struct ReloadOnSignal: Service {
    let reload: TenantsReload

    func run() async {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        reload.trapped()
        for await _ in signals.cancelOnGracefulShutdown() { reload.reload() }
    }
}
