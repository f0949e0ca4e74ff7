import Foundation
import LinkRelayCore
import LinkRelaySupport
import NevisAPI
import ProveAPI
import ProveSandbox

#if canImport(Glibc)
    import Glibc
#else
    import Darwin
#endif

/// Everything `linkrelay serve` can be told, resolved and checked. See API.md "Running".
public struct RelayConfiguration: Sendable {
    public enum Store: Sendable, Equatable {
        case memory
        case sqlite(path: String)
        case postgres(PostgresURL)
    }

    public enum Prove: Sendable {
        /// The embedded simulator, mounted at `{public-url}/sandbox/prove`.
        case sandbox
        /// `prefillCredentials`: Pre-Fill's project's, when it is not Unify's (`PROVE_PREFILL_CLIENT_ID`).
        case remote(baseURL: String, credentials: ProveCredentials, prefillCredentials: ProveCredentials? = nil)
    }

    public static let maximumHold = 600

    public enum Nevis: Sendable, Equatable {
        /// The embedded simulator of both backends, at `{public-url}/sandbox/nevis`.
        case sandbox
        /// A real backend, with its secret: Auth Cloud's access key, or nevisFIDO's dispatch token (if any).
        case remote(NevisBackend, secret: String?)
    }

    /// The names `--prove` takes besides a base URL, as the help and the docs list them.
    public static let proveValues = (["sandbox"] + ProveEnvironment.named.map(\.name)).joined(separator: ", ")

    public var host = "127.0.0.1"
    public var port = 8080
    public var publicURL = "http://127.0.0.1:8080"
    public var store = Store.sqlite(path: "linkrelay.sqlite")
    public var holdSeconds = 180
    /// Every tenant with its keys, webhook and origins (`--api-key`, `--tenants`, `--webhook-url`).
    public var tenants: [TenantSettings] = []
    /// True when no key was configured and one was made up at start for `default` (it is then printed once).
    public var apiKeyGenerated = false
    /// `--ops-key` and the tenants file's `"opsKeys"`: the keys `/ops` takes; none: `default`'s API keys.
    public var opsKeys: [String] = []
    /// What SIGHUP reads again (`reloadedTenants`); nil without `--tenants`.
    public var tenantsFile: TenantsFile?

    /// The tenants file with what joins it from the flags, as the start resolved them.
    public struct TenantsFile: Sendable {
        public var path: String
        var keyEntries: [String]
        var opsKeyEntries: [String]
        var defaultWebhook: WebhookSettings?
        /// The key made up for `default` at start (no key configured), which a reload keeps.
        var generatedKey: String?
    }
    /// `--allowed-origin`: the origins of every tenant that names none of its own.
    public var allowedOrigins: [String] = []
    /// Seconds a Pre-Fill individual is kept after the complete step or Prove's 15 minutes (`--identity-retention`).
    public var identityRetention: TimeInterval = 900
    /// Days ended sessions and settled webhook messages are kept (`--retention`).
    public var retentionDays = 7
    public var prove = Prove.sandbox
    /// Nil: `"flow":"nevis"` is refused (422). The default: the sandbox when Prove's is.
    public var nevis: Nevis? = .sandbox
    public var confirmOnPhone = false
    /// glibc's allocator tuned for memory given back after bursts (`--malloc-tuning`, on unless turned
    /// off): see `MemoryTrim`.
    public var mallocTuning = true
    /// The event-loop threads that serve every connection (`--event-loops`); nil: one per core.
    public var eventLoops: Int?
    /// Log lines stamped in the process's time zone instead of UTC (`--log-time local`).
    public var logLocalTime = false
    /// Who the confirm page says is asking (`--integrator-name`); the public URL's host when not set.
    public var integratorName = ""
    /// Rate and connection limits; nil with `--limits off`.
    public var limits: Limits? = Limits()
    public var trustedProxies: [IPNetwork] = []
    /// The longest a shutdown waits for channels to go after telling them to reconnect.
    public var drainTimeout: TimeInterval = 10
    /// The circuit breaker around Prove: opens after this many failed calls in a row...
    public var breakerFailures = 5
    /// ...and lets one probe through after this many seconds.
    public var breakerCooldown: TimeInterval = 10
    /// Faults the embedded sandbox starts with (`--sandbox-fault`).
    public var sandboxFaults: [(endpoint: String, fault: SandboxFault)] = []
    /// Where the Mustache pages are; found next to the working directory or the sources when nil.
    public var templatesDirectory: String?
    /// Connections open at once; beyond it the relay accepts no more until one closes.
    public var maxConnections = RelayConfiguration.defaultMaxConnections
    /// Connections open at once from one client address (IPv6: one /64); nil with `--limits off`.
    /// A tenth of `maxConnections` unless set: one address cannot take the whole relay.
    public var connectionsPerAddress: Int? = nil
    /// How long a request's head may take to arrive once its first byte has (nginx's
    /// `client_header_timeout`); a new connection has this long for its first request too.
    public var headerTimeout: TimeInterval = 10
    /// The longest gap between two reads of a request's body (nginx's `client_body_timeout`).
    public var bodyTimeout: TimeInterval = 10
    /// How long a shutdown keeps accepting, answering `/readyz` with 503, before the listener closes:
    /// time for a load balancer to see the drain and send no more.
    public var drainDelay: TimeInterval = 5
    /// The embedded sandbox on an address other than loopback (`--sandbox-public`): its routes need no
    /// key, so it is refused there unless asked for.
    public var sandboxPublic = false
    /// Where `/metrics` is served instead of the main listener (`--metrics-listen HOST:PORT`), for
    /// deployments that keep it off the public address.
    public var metricsListen: (host: String, port: Int)?
    /// The apps whose Universal Links / App Links the relay's landings are (`--ios-app-id`, ...).
    public var deepLinks = DeepLinks()
    /// Where SIGUSR1 writes a backup of the SQLite store (`--backup-dir`); nil: SIGUSR1 writes none.
    public var backupDirectory: String?

    /// Every tenant's API keys, in order.
    public var apiKeys: [String] { tenants.flatMap(\.apiKeys) }
    /// The default tenant's webhook (`--webhook-url`, `--webhook-secret`, or its entry in `--tenants`).
    public var webhooks: WebhookSettings? { tenants.first { $0.name == Tenant.defaultName }?.webhook }

    /// The process's open-file limit minus 1,024 descriptors kept for everything else (the store,
    /// calls to Prove, the runtime's own). Without that room, a flood of connections took the last
    /// descriptor and libdispatch, needing one, stopped the process.
    public static var defaultMaxConnections: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < 1 << 31 else { return 1_000_000 }
        return max(64, Int(limit.rlim_cur) - 1024)
    }

    public init() {}

    /// The setting names of API.md, as `serve` flags without dashes, e.g. `public-url`.
    public static let settings: [(flag: String, env: String)] =
        [
            ("host", "LINKRELAY_HOST"), ("port", "LINKRELAY_PORT"), ("public-url", "LINKRELAY_PUBLIC_URL"),
            ("store", "LINKRELAY_STORE"), ("hold", "LINKRELAY_HOLD"), ("api-key", "LINKRELAY_API_KEY"),
            ("allowed-origin", "LINKRELAY_ALLOWED_ORIGINS"), ("prove", "LINKRELAY_PROVE"),
            ("confirm-on-phone", "LINKRELAY_CONFIRM_ON_PHONE"), ("limits", "LINKRELAY_LIMITS"),
            ("trusted-proxy", "LINKRELAY_TRUSTED_PROXIES"), ("templates", "LINKRELAY_TEMPLATES"),
            ("integrator-name", "LINKRELAY_INTEGRATOR_NAME"), ("drain-timeout", "LINKRELAY_DRAIN_TIMEOUT"),
            ("breaker-failures", "LINKRELAY_BREAKER_FAILURES"),
            ("breaker-cooldown", "LINKRELAY_BREAKER_COOLDOWN"), ("sandbox-fault", "LINKRELAY_SANDBOX_FAULTS"),
            ("max-connections", "LINKRELAY_MAX_CONNECTIONS"), ("malloc-tuning", "LINKRELAY_MALLOC_TUNING"),
            ("event-loops", "LINKRELAY_EVENT_LOOPS"),
            ("log-time", "LINKRELAY_LOG_TIME"), ("header-timeout", "LINKRELAY_HEADER_TIMEOUT"),
            ("body-timeout", "LINKRELAY_BODY_TIMEOUT"), ("drain-delay", "LINKRELAY_DRAIN_DELAY"),
            ("limit-connections-per-address", "LINKRELAY_LIMIT_CONNECTIONS_PER_ADDRESS"),
            ("sandbox-public", "LINKRELAY_SANDBOX_PUBLIC"), ("metrics-listen", "LINKRELAY_METRICS_LISTEN"),
            ("ios-app-id", "LINKRELAY_IOS_APP_IDS"), ("android-app", "LINKRELAY_ANDROID_APPS"),
            ("app-store-url", "LINKRELAY_APP_STORE_URL"), ("play-store-url", "LINKRELAY_PLAY_STORE_URL"),
            ("webhook-url", "LINKRELAY_WEBHOOK_URL"), ("webhook-secret", "LINKRELAY_WEBHOOK_SECRET"),
            ("tenants", "LINKRELAY_TENANTS"), ("ops-key", "LINKRELAY_OPS_KEYS"),
            ("identity-retention", "LINKRELAY_IDENTITY_RETENTION"),
            ("retention", "LINKRELAY_RETENTION"),
            ("backup-dir", "LINKRELAY_BACKUP_DIR"), ("nevis", "LINKRELAY_NEVIS"),
            ("nevis-dispatcher", "LINKRELAY_NEVIS_DISPATCHER"),
        ] + Limits.settings.map { ($0.flag, $0.env) }

    /// Resolves settings from flags (which win) and the environment. Throws one clear line per problem.
    ///
    /// `flags` maps a flag name (see `settings`) to the values given on the command line.
    public static func resolve(
        flags: [String: [String]], environment: [String: String]
    ) throws(ConfigurationError) -> RelayConfiguration {
        func values(_ flag: String) -> [String]? {
            if let given = flags[flag], !given.isEmpty { return given }
            guard let env = settings.first(where: { $0.flag == flag })?.env, let value = environment[env] else {
                return nil
            }
            return [value]
        }
        func value(_ flag: String) -> String? { values(flag)?.last }
        func list(_ flag: String) -> [String] {
            (values(flag) ?? []).flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
        /// A list of keys: an entry of spaces alone is kept, for `keyProblem` to refuse.
        func keys(_ flag: String) -> [String] {
            (values(flag) ?? []).flatMap { $0.split(separator: ",") }.map { entry in
                let trimmed = entry.trimmingCharacters(in: .whitespaces)
                return trimmed.isEmpty ? String(entry) : trimmed
            }
        }

        var config = RelayConfiguration()
        if let host = value("host") {
            guard !host.isEmpty else { throw ConfigurationError("--host: empty") }
            config.host = host
        }
        if let port = value("port") {
            guard let number = Int(port), (0...65535).contains(number) else {
                throw ConfigurationError("--port: \"\(port)\" is not a port number (0-65535)")
            }
            config.port = number
        }
        if let hold = value("hold") {
            guard let seconds = Int(hold), (1...maximumHold).contains(seconds) else {
                throw ConfigurationError("--hold: \"\(hold)\" must be whole seconds from 1 to \(maximumHold)")
            }
            config.holdSeconds = seconds
        }
        if let store = value("store") {
            if store == "memory" {
                config.store = .memory
            } else if store.hasPrefix("sqlite:"), store.count > 7 {
                config.store = .sqlite(path: String(store.dropFirst(7)))
            } else if store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") {
                config.store = .postgres(try PostgresURL(store))
            } else {
                throw ConfigurationError("--store: \"\(store)\" is not memory, sqlite:PATH or postgres://...")
            }
        }
        switch value("prove") ?? "sandbox" {
        case "sandbox":
            config.prove = .sandbox
        case let other:
            guard let base = ProveEnvironment.baseURL(for: other) else {
                throw ConfigurationError("--prove: \"\(other)\" is not \(Self.proveValues) or an http(s) URL")
            }
            guard let id = environment["PROVE_CLIENT_ID"], !id.isEmpty,
                let secret = environment["PROVE_CLIENT_SECRET"], !secret.isEmpty
            else {
                throw ConfigurationError("--prove \(other): set PROVE_CLIENT_ID and PROVE_CLIENT_SECRET")
            }
            let prefillID = environment["PROVE_PREFILL_CLIENT_ID"] ?? ""
            let prefillSecret = environment["PROVE_PREFILL_CLIENT_SECRET"] ?? ""
            guard prefillID.isEmpty == prefillSecret.isEmpty else {
                throw ConfigurationError(
                    "--prove \(other): set both PROVE_PREFILL_CLIENT_ID and PROVE_PREFILL_CLIENT_SECRET, or neither")
            }
            config.prove = .remote(
                baseURL: base, credentials: ProveCredentials(clientID: id, clientSecret: secret),
                prefillCredentials: prefillID.isEmpty
                    ? nil : ProveCredentials(clientID: prefillID, clientSecret: prefillSecret))
        }
        config.nevis = try nevis(
            value("nevis"), dispatcher: value("nevis-dispatcher"), environment: environment,
            proveSandbox: { if case .sandbox = config.prove { true } else { false } }())
        config.confirmOnPhone = try boolean(value("confirm-on-phone"), flag: "confirm-on-phone", default: false)
        config.mallocTuning = try boolean(value("malloc-tuning"), flag: "malloc-tuning", default: true)
        if let logTime = value("log-time") {
            guard ["utc", "local"].contains(logTime) else {
                throw ConfigurationError("--log-time: \"\(logTime)\" is not utc or local")
            }
            config.logLocalTime = logTime == "local"
        }
        func number(_ flag: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
            guard let text = value(flag) else { return nil }
            guard let number = Int(text), range.contains(number) else {
                throw ConfigurationError(
                    "--\(flag): \"\(text)\" must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        var limits = Limits()
        for setting in Limits.settings {
            if let given = try number(setting.flag, in: 1...1_000_000) { limits[keyPath: setting.field] = given }
        }
        config.limits = limits
        if let enabled = value("limits") {
            switch enabled {
            case "on": break
            case "off": config.limits = nil
            default: throw ConfigurationError("--limits: \"\(enabled)\" is not on or off")
            }
        }
        config.trustedProxies = try list("trusted-proxy").map { (text) throws(ConfigurationError) in
            guard let network = IPNetwork(text) else {
                throw ConfigurationError("--trusted-proxy: \"\(text)\" is not an IP address or network (10.0.0.0/8)")
            }
            return network
        }
        if let seconds = try number("drain-timeout", in: 0...600) { config.drainTimeout = TimeInterval(seconds) }
        if let failures = try number("breaker-failures", in: 1...1000) { config.breakerFailures = failures }
        if let connections = try number("max-connections", in: 1...10_000_000) { config.maxConnections = connections }
        config.eventLoops = try number("event-loops", in: 1...1024)
        let perAddress = try number("limit-connections-per-address", in: 1...10_000_000)
        config.connectionsPerAddress = config.limits == nil ? nil : perAddress ?? max(1, config.maxConnections / 10)
        if let seconds = try number("header-timeout", in: 1...600) { config.headerTimeout = TimeInterval(seconds) }
        if let seconds = try number("body-timeout", in: 1...600) { config.bodyTimeout = TimeInterval(seconds) }
        if let seconds = try number("drain-delay", in: 0...600) { config.drainDelay = TimeInterval(seconds) }
        if let listen = value("metrics-listen") {
            // HOST:PORT, with an IPv6 host in brackets.
            let (host, port) =
                listen.lastIndex(of: ":").map { (listen[..<$0], listen[listen.index(after: $0)...]) }
                ?? ("", "")
            let bare = host.hasPrefix("[") && host.hasSuffix("]") ? host.dropFirst().dropLast() : host
            guard !bare.isEmpty, let number = Int(port), (1...65535).contains(number) else {
                throw ConfigurationError(
                    "--metrics-listen: \"\(listen)\" is not HOST:PORT (127.0.0.1:9090, [::1]:9090)")
            }
            config.metricsListen = (String(bare), number)
        }
        config.deepLinks = try DeepLinks.resolve(
            iosAppIDs: list("ios-app-id"), androidApps: list("android-app"), appStoreURL: value("app-store-url"),
            playStoreURL: value("play-store-url"))
        config.sandboxPublic = try boolean(value("sandbox-public"), flag: "sandbox-public", default: false)
        if case .sandbox = config.prove, !config.sandboxPublic, !isLoopback(config.host) {
            throw ConfigurationError(
                "--host \(config.host): the embedded sandbox's routes need no key and would let anyone on the network "
                    + "tap any session; listen on loopback, use a real --prove, or add --sandbox-public on")
        }
        if let seconds = try number("breaker-cooldown", in: 1...600) { config.breakerCooldown = TimeInterval(seconds) }
        // Fault specs hold commas, so several are separated by semicolons in the environment.
        let faultSpecs = (values("sandbox-fault") ?? []).flatMap { $0.split(separator: ";") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if !faultSpecs.isEmpty, case .remote = config.prove {
            throw ConfigurationError("--sandbox-fault: only with --prove sandbox")
        }
        for spec in faultSpecs {
            do {
                config.sandboxFaults.append(try ProveSandbox.parseFault(spec))
            } catch {
                throw ConfigurationError("--sandbox-fault: \(error)")
            }
        }
        config.templatesDirectory = value("templates")

        if config.port == 0 { config.port = try freePort(host: config.host) }
        if let publicURL = value("public-url") {
            config.publicURL = try checkedPublicURL(publicURL)
        } else {
            let host = config.host.contains(":") ? "[\(config.host)]" : config.host
            config.publicURL = "http://\(host):\(config.port)"
        }
        // The longest finalTargetUrl the relay makes must pass Prove's rules.
        let sample = config.publicURL + "/l/" + String(repeating: "A", count: LandingRedirect.linkKeyLength)
        if let violation = FinalTargetURL.validate(sample) {
            throw ConfigurationError(
                "--public-url: links made from it break Prove's finalTargetUrl rules: \(violation)")
        }
        if let name = value("integrator-name") {
            guard (1...80).contains(name.count) else {
                throw ConfigurationError("--integrator-name: give 1 to 80 characters")
            }
            config.integratorName = name
        } else {
            config.integratorName = URLComponents(string: config.publicURL)?.host ?? config.publicURL
        }
        var defaultWebhook: WebhookSettings?
        switch (value("webhook-url"), value("webhook-secret")) {
        case (nil, nil): break
        case (let url?, let secret?): defaultWebhook = try WebhookSettings(url: url, secret: secret)
        case (nil, _): throw ConfigurationError("--webhook-secret: set --webhook-url too")
        case (_, nil): throw ConfigurationError("--webhook-url: set --webhook-secret too (whsec_ and base64)")
        }
        let origins = try list("allowed-origin").map { (text) throws(ConfigurationError) in
            try checkedOrigin(text, setting: "--allowed-origin")
        }
        config.allowedOrigins = origins.isEmpty ? [origin(of: config.publicURL)] : origins
        var tenantsFile: (String, Data)?
        if let path = value("tenants") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("--tenants \(path): cannot read the file")
            }
            tenantsFile = (path, data)
        }
        (config.tenants, config.opsKeys) = try TenantSettings.resolve(
            keyEntries: keys("api-key"), opsKeyEntries: keys("ops-key"), file: tenantsFile,
            defaultWebhook: defaultWebhook)
        var generatedKey: String?
        if config.apiKeys.isEmpty {
            let key = "lr_" + Secrets.token(length: 32)
            TenantSettings.give(key, toDefaultOf: &config.tenants)
            config.apiKeyGenerated = true
            generatedKey = key
        }
        if let (path, _) = tenantsFile {
            config.tenantsFile = TenantsFile(
                path: path, keyEntries: keys("api-key"), opsKeyEntries: keys("ops-key"), defaultWebhook: defaultWebhook,
                generatedKey: generatedKey)
        }
        if let seconds = try number("identity-retention", in: 0...86_400) {
            config.identityRetention = TimeInterval(seconds)
        }
        if let days = try number("retention", in: 1...3650) { config.retentionDays = days }
        if let directory = value("backup-dir") {
            config.backupDirectory = try checkedBackupDirectory(directory, store: config.store)
        }
        return config
    }

    /// The tenants and ops keys as the tenants file says now, with the flags' as at start: what SIGHUP
    /// applies. Nil without `--tenants`; throws the line that names the file's fault.
    public func reloadedTenants() throws(ConfigurationError) -> (tenants: [TenantSettings], opsKeys: [String])? {
        guard let source = tenantsFile else { return nil }
        guard let data = FileManager.default.contents(atPath: source.path) else {
            throw ConfigurationError("--tenants \(source.path): cannot read the file")
        }
        var (tenants, opsKeys) = try TenantSettings.resolve(
            keyEntries: source.keyEntries, opsKeyEntries: source.opsKeyEntries, file: (source.path, data),
            defaultWebhook: source.defaultWebhook)
        if let key = source.generatedKey, tenants.allSatisfy({ $0.apiKeys.isEmpty }) {
            TenantSettings.give(key, toDefaultOf: &tenants)
        }
        return (tenants, opsKeys)
    }

    /// One allowed browser origin (an `--allowed-origin` value, a tenant's `allowedOrigins` entry), in the
    /// form a browser sends as `Origin`: `scheme://host[:port]`, `https`, or `http` for a loopback host
    /// (`localhost`, 127.0.0.0/8, `[::1]`). Returned as browsers serialize an origin, so that the gate's
    /// plain string compare with `Origin` holds: scheme and host in lower case, an IPv6 host in its
    /// canonical form, and the scheme's default port (443, 80) dropped, since a browser never sends it.
    /// `--nevis`: `sandbox`, an Authentication Cloud URL (with `NEVIS_ACCESS_KEY`) or `fido:URL` (nevisFIDO,
    /// with `--nevis-dispatcher` and, if its dispatch endpoint wants one, `NEVIS_FIDO_TOKEN`). Without it:
    /// the sandbox when Prove's is, else none.
    static func nevis(
        _ value: String?, dispatcher: String?, environment: [String: String], proveSandbox: Bool
    ) throws(ConfigurationError) -> Nevis? {
        let dispatcherValues = NevisDispatcher.allCases.map(\.rawValue).joined(separator: ", ")
        var chosen = NevisDispatcher.linkQRCode
        if let dispatcher {
            guard let known = NevisDispatcher(rawValue: dispatcher) else {
                throw ConfigurationError("--nevis-dispatcher: \"\(dispatcher)\" is not \(dispatcherValues)")
            }
            guard value?.hasPrefix("fido:") == true else {
                throw ConfigurationError("--nevis-dispatcher: only with --nevis fido:URL")
            }
            chosen = known
        }
        guard let value else { return proveSandbox ? .sandbox : nil }
        if value == "sandbox" {
            guard proveSandbox else { throw ConfigurationError("--nevis sandbox: only with --prove sandbox") }
            return .sandbox
        }
        let isFIDO = value.hasPrefix("fido:")
        let url = isFIDO ? String(value.dropFirst(5)) : value
        guard let parsed = URL(string: url), let host = parsed.host, !host.isEmpty,
            parsed.scheme == "https" || (parsed.scheme == "http" && isLoopback(host))
        else {
            throw ConfigurationError(
                "--nevis: \"\(value)\" is not sandbox, https://{instance}.mauth.nevis.cloud or fido:https://HOST")
        }
        if isFIDO {
            let token = environment["NEVIS_FIDO_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return .remote(.fido(baseURL: url, dispatcher: chosen), secret: token)
        }
        guard let key = environment["NEVIS_ACCESS_KEY"], !key.isEmpty else {
            throw ConfigurationError("--nevis \(value): set NEVIS_ACCESS_KEY (the Authentication Cloud access key)")
        }
        return .remote(.authCloud(baseURL: url), secret: key)
    }

    /// `null` (what sandboxed frames and local files send, from any site), wildcards, paths (even a
    /// trailing `/`), queries, fragments, user info, a missing scheme and a host that is no DNS name or
    /// IP address each stop start-up with one line naming `setting`, the value and the rule.
    public static func checkedOrigin(_ text: String, setting: String) throws(ConfigurationError) -> String {
        func refused(_ why: String) -> ConfigurationError {
            ConfigurationError(
                "\(setting): \(text.debugDescription) \(why); an allowed origin is scheme://host[:port], https "
                    + "(http only for localhost, 127.0.0.0/8 or [::1]), with no path, query, user info or wildcard")
        }
        if text.lowercased() == "null" {
            throw refused("is what sandboxed frames and local files send, from any site, so it cannot be allowed")
        }
        if text.contains("*") { throw refused("is a wildcard: list each origin") }
        guard let separator = text.range(of: "://") else { throw refused("has no scheme") }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw refused("is not https or http") }
        let authority = text[separator.upperBound...]
        if authority.contains(where: { "/?#\\".contains($0) }) {
            throw refused("has a path, a query or a fragment (a trailing / too)")
        }
        if authority.contains("@") { throw refused("has user info") }
        // The host (an IPv6 one in brackets), then the port after the last colon outside them.
        let bracketEnd = authority.hasPrefix("[") ? authority.firstIndex(of: "]") : nil
        let colon = authority[(bracketEnd ?? authority.startIndex)...].lastIndex(of: ":")
        let rawHost = authority[..<(colon ?? authority.endIndex)]
        var port = colon.map { authority[authority.index(after: $0)...] }
        let host: String
        let bare: String
        if authority.hasPrefix("[") {
            guard let bracketEnd, rawHost.last == "]",
                let address = IPAddress(authority[authority.index(after: authority.startIndex)..<bracketEnd]),
                !address.isIPv4, !address.isIPv4Mapped
            else { throw refused("has no valid host") }
            bare = address.description
            host = "[" + bare + "]"
        } else {
            host = rawHost.lowercased()
            bare = host
            let labels = host.split(separator: ".", omittingEmptySubsequences: false)
            let isName =
                (1...253).contains(host.count)
                && labels.allSatisfy { label in
                    (1...63).contains(label.count) && label.first != "-" && label.last != "-"
                        && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
                }
            // A host that ends in a number is an IPv4 address to a browser (`127.1` is 127.0.0.1): only the
            // dotted-quad form is taken, as the browser would send it.
            let endsInNumber = labels.last.map { !$0.isEmpty && $0.allSatisfy(\.isNumber) } ?? false
            guard isName, !endsInNumber || IPAddress(host)?.isIPv4 == true else { throw refused("has no valid host") }
        }
        if let given = port {
            guard (1...5).contains(given.count), given.allSatisfy({ $0.isASCII && $0.isNumber }),
                let number = Int(given), (1...65535).contains(number)
            else { throw refused("has a port that is not 1-65535") }
            port = number == (scheme == "https" ? 443 : 80) ? nil : Substring(String(number))
        }
        guard scheme == "https" || isLoopback(bare) else {
            throw refused("is http on a host that is not loopback: use https")
        }
        return scheme + "://" + host + (port.map { ":" + $0 } ?? "")
    }

    /// `--backup-dir` is for the SQLite store (PostgreSQL has its own tools), and must be a directory the
    /// relay can write into: found out at start, not at the first SIGUSR1.
    private static func checkedBackupDirectory(_ directory: String, store: Store) throws(ConfigurationError)
        -> String
    {
        guard case .sqlite = store else {
            throw ConfigurationError(
                "--backup-dir: only with --store sqlite:PATH (back PostgreSQL up with its own tools)")
        }
        var status = stat()
        guard stat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw ConfigurationError("--backup-dir: \"\(directory)\" is not a directory")
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw ConfigurationError("--backup-dir: \"\(directory)\" is not writable by this process")
        }
        var trimmed = directory
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        return trimmed
    }

    /// Whether `host` listens on loopback only: `localhost`, 127.0.0.0/8 or ::1.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || IPAddress(host)?.isLoopback == true
    }

    /// An empty value (`LINKRELAY_CONFIRM_ON_PHONE=` in an environment file) is no setting at all.
    private static func boolean(_ value: String?, flag: String, default: Bool) throws(ConfigurationError) -> Bool {
        guard let value, !value.isEmpty else { return `default` }
        switch value.lowercased() {
        case "1", "true", "on", "yes": return true
        case "0", "false", "off", "no": return false
        default: throw ConfigurationError("--\(flag): \"\(value)\" is not on or off")
        }
    }

    private static func checkedPublicURL(_ url: String) throws(ConfigurationError) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        guard url.hasPrefix("http://") || url.hasPrefix("https://"), URL(string: url)?.host?.isEmpty == false else {
            throw ConfigurationError("--public-url: \"\(url)\" is not an absolute http(s) URL")
        }
        return url
    }

    /// `scheme://host[:port]` of a URL, as a browser sends it in `Origin`: scheme and host in lower case,
    /// without the scheme's default port.
    static func origin(of url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased()
        else { return url }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let defaultPort = ["http": 80, "ws": 80, "https": 443, "wss": 443][scheme]
        guard let port = components.port, port != defaultPort else { return "\(scheme)://\(hostPart)" }
        return "\(scheme)://\(hostPart):\(port)"
    }

    /// Finds a free port before the server starts, so that the public URL is known up front.
    ///
    /// Ports come from 20000-31999, below Linux's ephemeral range (32768 and up): a port the kernel
    /// hands to outgoing connections (the relay's own calls to Prove, say) can never collide with it.
    /// Plain socket calls: nothing here waits on an event loop.
    private static func freePort(host: String) throws(ConfigurationError) -> Int {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<64 {
            let port = Int.random(in: 20000..<32000, using: &generator)
            if try canBind(host: host, port: port) { return port }
        }
        throw ConfigurationError("--port 0: no free port found between 20000 and 31999")
    }

    private static func canBind(host: String, port: Int) throws(ConfigurationError) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ConfigurationError("--port 0: cannot open a socket") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(host == "localhost" ? "127.0.0.1" : host)
        guard address.sin_addr.s_addr != INADDR_NONE else {
            throw ConfigurationError("--host: port 0 needs an IPv4 address, not \(host)")
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
