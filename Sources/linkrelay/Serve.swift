import ArgumentParser
import Foundation
import LinkRelayServer
import Logging

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay (the default). Every flag also has an environment variable: docs/configuration.md.")

    @Option(help: "Listen address (LINKRELAY_HOST, default 127.0.0.1).") var host: String?
    @Option(help: "Listen port, 0 for any free port (LINKRELAY_PORT, default 8080).") var port: String?
    @Option(help: "Base of every absolute URL the relay hands out (LINKRELAY_PUBLIC_URL).") var publicURL: String?
    @Option(
        help: """
            memory, sqlite:PATH or \(PostgresURL.form) (also postgresql://) (LINKRELAY_STORE, default \
            sqlite:linkrelay.sqlite).
            """)
    var store: String?
    @Option(help: "Seconds a session waits for the tap, at most 600 (LINKRELAY_HOLD, default 180).") var hold: String?
    @Option(
        help:
            "Server-to-server API key, KEY (tenant default) or TENANT:KEY; repeatable or comma-separated (LINKRELAY_API_KEY)."
    )
    var apiKey: [String] = []
    @Option(
        help: "JSON file of tenants: their API keys, webhook and allowed origins (LINKRELAY_TENANTS); see the README.")
    var tenants: String?
    @Option(
        help:
            "Key that opens /ops and nothing else; repeatable or comma-separated (LINKRELAY_OPS_KEYS, default: the default tenant's API keys)."
    )
    var opsKey: [String] = []
    @Option(
        help:
            "Seconds a Pre-Fill individual is kept after the complete step or Prove's 15 minutes, 0-86400 (LINKRELAY_IDENTITY_RETENTION, default 900)."
    )
    var identityRetention: String?
    @Option(
        help:
            "Days ended sessions and delivered or failed webhook messages are kept, 1-3650 (LINKRELAY_RETENTION, default 7)."
    )
    var retention: String?
    @Option(help: "Browser origin allowed on channels; repeatable (LINKRELAY_ALLOWED_ORIGINS).")
    var allowedOrigin: [String] = []
    @Option(help: "\(RelayConfiguration.proveValues) or a base URL (LINKRELAY_PROVE, default sandbox).")
    var prove: String?
    @Option(
        help:
            "sandbox, https://{instance}.mauth.nevis.cloud (NEVIS_ACCESS_KEY) or fido:https://HOST (NEVIS_FIDO_TOKEN) (LINKRELAY_NEVIS, default sandbox with --prove sandbox, else none)."
    )
    var nevis: String?
    @Option(
        help:
            "nevisFIDO's dispatcher: link-png-qr-code, link or png-qr-code (LINKRELAY_NEVIS_DISPATCHER, default link-png-qr-code)."
    )
    var nevisDispatcher: String?
    @Flag(help: "The landing GET only shows a page; its POST counts as the tap (LINKRELAY_CONFIRM_ON_PHONE).")
    var confirmOnPhone = false
    @Option(help: "Who the confirm page says is asking (LINKRELAY_INTEGRATOR_NAME, default the public URL's host).")
    var integratorName: String?
    @Option(help: "on, or off to lift every rate and connection limit (LINKRELAY_LIMITS).") var limits: String?
    @Option(help: "Peer whose X-Forwarded-For names the client; repeatable (LINKRELAY_TRUSTED_PROXIES).")
    var trustedProxy: [String] = []
    @Option(help: "Landings per client IP per minute (LINKRELAY_LIMIT_LANDING_PER_IP, default 60).")
    var limitLandingPerIp: String?
    @Option(help: "Landings per link per minute (LINKRELAY_LIMIT_LANDING_PER_LINK, default 20).")
    var limitLandingPerLink: String?
    @Option(help: "Session creations per API key per minute (LINKRELAY_LIMIT_CREATE_PER_KEY, default 600).")
    var limitCreatePerKey: String?
    @Option(help: "Channels open at once per session (LINKRELAY_LIMIT_CHANNELS_PER_SESSION, default 4).")
    var limitChannelsPerSession: String?
    @Option(help: "Channels open at once per client IP (LINKRELAY_LIMIT_CHANNELS_PER_IP, default 100).")
    var limitChannelsPerIp: String?
    @Option(help: "Seconds a shutdown waits for channels to go (LINKRELAY_DRAIN_TIMEOUT, default 10).")
    var drainTimeout: String?
    @Option(help: "Failed Prove calls in a row that open the breaker (LINKRELAY_BREAKER_FAILURES, default 5).")
    var breakerFailures: String?
    @Option(help: "Seconds the open breaker fails fast before a probe (LINKRELAY_BREAKER_COOLDOWN, default 10).")
    var breakerCooldown: String?
    @Option(
        help:
            "A fault for the embedded sandbox, e.g. unify-status:error=1,status=503; repeatable (LINKRELAY_SANDBOX_FAULTS, ;-separated)."
    )
    var sandboxFault: [String] = []
    @Option(help: "Directory of the Mustache templates (LINKRELAY_TEMPLATES, default ./templates).")
    var templates: String?
    @Option(
        help: "Connections open at once (LINKRELAY_MAX_CONNECTIONS, default the open-file limit minus 1,024).")
    var maxConnections: String?
    @Option(
        help:
            "off: glibc's allocator as it comes, and no re-exec at start; on tunes it to give memory back after bursts, see docs/memory.md (LINKRELAY_MALLOC_TUNING, default on)."
    )
    var mallocTuning: String?
    @Option(
        help:
            "Event-loop threads serving the connections, 1 to 1024 (LINKRELAY_EVENT_LOOPS, default one per core)."
    )
    var eventLoops: String?
    @Option(help: "utc or local: the time zone of log timestamps (LINKRELAY_LOG_TIME, default utc).")
    var logTime: String?
    @Option(
        help:
            "Connections open at once per client address (LINKRELAY_LIMIT_CONNECTIONS_PER_ADDRESS, default a tenth of --max-connections)."
    )
    var limitConnectionsPerAddress: String?
    @Option(help: "Seconds a request's head may take once begun (LINKRELAY_HEADER_TIMEOUT, default 10).")
    var headerTimeout: String?
    @Option(help: "Seconds between two reads of a request's body (LINKRELAY_BODY_TIMEOUT, default 10).")
    var bodyTimeout: String?
    @Option(
        help:
            "Seconds a shutdown keeps answering, /readyz 503, before the listener closes (LINKRELAY_DRAIN_DELAY, default 5)."
    )
    var drainDelay: String?
    @Option(help: "on: serve the embedded sandbox on a non-loopback --host (LINKRELAY_SANDBOX_PUBLIC, default off).")
    var sandboxPublic: String?
    @Option(help: "HOST:PORT where /metrics is served instead of the main listener (LINKRELAY_METRICS_LISTEN).")
    var metricsListen: String?
    @Option(
        help:
            "TEAMID.BUNDLEID of an iOS app whose Universal Links the landings are; repeatable (LINKRELAY_IOS_APP_IDS).")
    var iosAppId: [String] = []
    @Option(
        help: "PACKAGE=SHA256 of an Android app whose App Links the landings are; repeatable (LINKRELAY_ANDROID_APPS).")
    var androidApp: [String] = []
    @Option(help: "The iOS app's App Store URL, shown on the landing page (LINKRELAY_APP_STORE_URL).")
    var appStoreUrl: String?
    @Option(help: "The Android app's Play Store URL, shown on the landing page (LINKRELAY_PLAY_STORE_URL).")
    var playStoreUrl: String?
    @Option(help: "Finish calls per session per minute (LINKRELAY_LIMIT_FINISH_PER_SESSION, default 10).")
    var limitFinishPerSession: String?
    @Option(help: "http(s) URL that session events are POSTed to, signed (LINKRELAY_WEBHOOK_URL).")
    var webhookUrl: String?
    @Option(help: "whsec_ and a base64 key of 24 to 64 bytes: signs the webhooks (LINKRELAY_WEBHOOK_SECRET).")
    var webhookSecret: String?
    @Option(help: "Directory where SIGUSR1 writes a backup of the SQLite store, newest 3 kept (LINKRELAY_BACKUP_DIR).")
    var backupDir: String?

    func run() async throws {
        // Until the relay's services take SIGUSR1 and SIGHUP over (libdispatch then installs its handler),
        // one that arrives during a long start (the store's integrity check) is dropped instead of ending it.
        signal(SIGUSR1, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        var flags: [String: [String]] = [
            "api-key": apiKey, "ops-key": opsKey, "allowed-origin": allowedOrigin, "trusted-proxy": trustedProxy,
            "sandbox-fault": sandboxFault, "ios-app-id": iosAppId, "android-app": androidApp,
        ]
        for (name, value) in [
            ("host", host), ("port", port), ("public-url", publicURL), ("store", store), ("hold", hold),
            ("prove", prove), ("limits", limits), ("templates", templates), ("drain-timeout", drainTimeout),
            ("integrator-name", integratorName),
            ("breaker-failures", breakerFailures), ("breaker-cooldown", breakerCooldown),
            ("limit-landing-per-ip", limitLandingPerIp), ("limit-landing-per-link", limitLandingPerLink),
            ("limit-create-per-key", limitCreatePerKey), ("limit-channels-per-session", limitChannelsPerSession),
            ("limit-channels-per-ip", limitChannelsPerIp), ("max-connections", maxConnections),
            ("malloc-tuning", mallocTuning), ("event-loops", eventLoops), ("log-time", logTime),
            ("limit-connections-per-address", limitConnectionsPerAddress), ("header-timeout", headerTimeout),
            ("body-timeout", bodyTimeout), ("drain-delay", drainDelay), ("sandbox-public", sandboxPublic),
            ("metrics-listen", metricsListen), ("app-store-url", appStoreUrl), ("play-store-url", playStoreUrl),
            ("limit-finish-per-session", limitFinishPerSession), ("webhook-url", webhookUrl),
            ("webhook-secret", webhookSecret), ("tenants", tenants), ("identity-retention", identityRetention),
            ("retention", retention), ("backup-dir", backupDir), ("nevis", nevis),
            ("nevis-dispatcher", nevisDispatcher),
        ] {
            if let value { flags[name] = [value] }
        }
        if confirmOnPhone { flags["confirm-on-phone"] = ["on"] }

        let configuration: RelayConfiguration
        do {
            configuration = try RelayConfiguration.resolve(
                flags: flags, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw refuse(error.description)
        }
        #if canImport(Glibc)
            // Before anything is logged or printed: the process starts again with the settings. NIO's
            // event loops already run (Swift's tasks run on them), so their count takes a start too.
            var environment: [String: String] = [:]
            if configuration.mallocTuning { environment["GLIBC_TUNABLES"] = MallocTunables.wanted }
            if let loops = configuration.eventLoops { environment["NIO_SINGLETON_GROUP_LOOP_COUNT"] = String(loops) }
            StartEnvironment.restart(with: environment)
        #endif
        let logger = makeLogger("linkrelay", localTime: configuration.logLocalTime)
        if configuration.apiKeyGenerated {
            // Written once to standard output for the operator, never logged; unbuffered, so it shows
            // at once even when standard output is a file or a pipe.
            FileHandle.standardOutput.write(
                Data(
                    "API key for this run (set --api-key or LINKRELAY_API_KEY to choose one): \(configuration.apiKeys[0])\n"
                        .utf8))
        }
        let relay: LinkRelay
        do {
            relay = try await buildLinkRelay(configuration, logger: logger)
        } catch let error as ConfigurationError {
            throw refuse(error.description)
        } catch {
            throw refuse("cannot start: \(error)")
        }
        #if canImport(Glibc)
            // Once the relay is sure to start: a refusal stays the one line on standard error.
            if configuration.mallocTuning, let tunables = MallocTunables.current {
                logger.notice("glibc malloc tuning on", metadata: ["GLIBC_TUNABLES": .string(tunables)])
            }
        #endif
        defer { LogOutput.standardError.flush() }
        try await relay.serviceGroup(logger: logger).run()
    }
}
