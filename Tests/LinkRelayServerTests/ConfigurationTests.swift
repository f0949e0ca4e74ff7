import Foundation
import LinkRelayCore
import ProveAPI
import Testing

@testable import LinkRelayServer

/// One setting that must stop start-up, and the flag its message must name.
struct ConfigurationFailure: Sendable, CustomTestStringConvertible {
    var flags: [String: [String]] = [:]
    var environment: [String: String] = [:]
    var names: String
    var testDescription: String { "\(names): \(flags) \(environment)" }
}

private func resolve(
    _ flags: [String: [String]] = [:], _ environment: [String: String] = [:]
) throws(ConfigurationError) -> RelayConfiguration {
    try RelayConfiguration.resolve(flags: flags, environment: environment)
}

@Suite("Configuration", .timeLimit(.minutes(1)))
struct ConfigurationTests {
    static let key1 = "key-one-0123456789abcdef"
    static let key2 = "key-two-0123456789abcdef"
    static let key3 = "key-three-0123456789abcdef"

    @Test("Defaults")
    func defaults() throws {
        let config = try resolve()
        #expect(config.host == "127.0.0.1")
        #expect(config.port == 8080)
        #expect(config.store == .sqlite(path: "linkrelay.sqlite"))
        #expect(config.holdSeconds == 180)
        #expect(config.apiKeyGenerated)
        #expect(config.apiKeys.count == 1)
        #expect((config.apiKeys.first?.count ?? 0) >= 16)
        #expect(try resolve().apiKeys != config.apiKeys, "a fresh random key each start")
        guard case .sandbox = config.prove else {
            Issue.record("prove is \(config.prove), not sandbox")
            return
        }
        #expect(config.publicURL == "http://127.0.0.1:8080")
        #expect(config.allowedOrigins == ["http://127.0.0.1:8080"])
        #expect(!config.confirmOnPhone)
        #expect(config.limits == Limits())
        #expect(config.trustedProxies.isEmpty)
        #expect(config.drainTimeout == 10)
        #expect(config.integratorName == "127.0.0.1")
        #expect(config.mallocTuning, "memory comes back after bursts unless turned off")
        #expect(config.eventLoops == nil, "one event loop per core")
        #expect(!config.logLocalTime, "logs in UTC")
    }

    @Test("glibc tuning is turned off, the event loops counted, and local log times asked for, by flag or environment")
    func operatorSettings() throws {
        #expect(try !resolve(["malloc-tuning": ["off"]]).mallocTuning)
        #expect(try !resolve([:], ["LINKRELAY_MALLOC_TUNING": "off"]).mallocTuning)
        #expect(try resolve(["malloc-tuning": ["on"]], ["LINKRELAY_MALLOC_TUNING": "off"]).mallocTuning)
        #expect(try resolve(["log-time": ["local"]]).logLocalTime)
        #expect(try resolve([:], ["LINKRELAY_LOG_TIME": "local"]).logLocalTime)
        #expect(try !resolve(["log-time": ["utc"]]).logLocalTime)
        let empty = try resolve([:], ["LINKRELAY_MALLOC_TUNING": "", "LINKRELAY_CONFIRM_ON_PHONE": ""])
        #expect(empty.mallocTuning && !empty.confirmOnPhone, "an empty variable in an environment file is unset")
        #expect(try resolve(["event-loops": ["1"]]).eventLoops == 1)
        #expect(try resolve([:], ["LINKRELAY_EVENT_LOOPS": "4"]).eventLoops == 4)
    }

    @Test("The default public URL follows host and port")
    func publicURLFollowsHostAndPort() throws {
        let config = try resolve(["host": ["10.1.2.3"], "port": ["9000"], "sandbox-public": ["on"]])
        #expect(config.publicURL == "http://10.1.2.3:9000")
        #expect(config.allowedOrigins == ["http://10.1.2.3:9000"])
    }

    @Test("The allowed origin defaults to the public URL's origin, without its path")
    func originOfPublicURL() throws {
        let config = try resolve(["public-url": ["https://relay.example/prefix/"]])
        #expect(config.publicURL == "https://relay.example/prefix")
        #expect(config.allowedOrigins == ["https://relay.example"])
    }

    @Test("Environment variables are used when flags are absent")
    func environment() throws {
        let config = try resolve(
            [:],
            [
                "LINKRELAY_HOST": "0.0.0.0", "LINKRELAY_PORT": "9090", "LINKRELAY_PUBLIC_URL": "https://relay.example",
                "LINKRELAY_STORE": "memory", "LINKRELAY_HOLD": "60", "LINKRELAY_API_KEY": Self.key1,
                "LINKRELAY_ALLOWED_ORIGINS": "https://app.example", "LINKRELAY_PROVE": "sandbox",
                "LINKRELAY_CONFIRM_ON_PHONE": "on", "LINKRELAY_LIMITS": "off",
                "LINKRELAY_TRUSTED_PROXIES": "10.0.0.1", "LINKRELAY_SANDBOX_PUBLIC": "on",
            ])
        #expect(config.host == "0.0.0.0")
        #expect(config.port == 9090)
        #expect(config.publicURL == "https://relay.example")
        #expect(config.store == .memory)
        #expect(config.holdSeconds == 60)
        #expect(config.apiKeys == [Self.key1])
        #expect(!config.apiKeyGenerated)
        #expect(config.allowedOrigins == ["https://app.example"])
        #expect(config.confirmOnPhone)
        #expect(config.limits == nil)
        #expect(config.trustedProxies.map(\.description) == ["10.0.0.1/32"])
    }

    @Test("Flags win over the environment")
    func flagsWin() throws {
        let config = try resolve(
            [
                "port": ["7070"], "store": ["sqlite:/tmp/x.sqlite"], "hold": ["30"], "api-key": [Self.key2],
                "allowed-origin": ["https://flag.example"], "limits": ["on"], "public-url": ["http://flag.example:1"],
            ],
            [
                "LINKRELAY_PORT": "9090", "LINKRELAY_STORE": "memory", "LINKRELAY_HOLD": "60",
                "LINKRELAY_API_KEY": Self.key1, "LINKRELAY_ALLOWED_ORIGINS": "https://env.example",
                "LINKRELAY_LIMITS": "off", "LINKRELAY_PUBLIC_URL": "https://env.example",
            ])
        #expect(config.port == 7070)
        #expect(config.store == .sqlite(path: "/tmp/x.sqlite"))
        #expect(config.holdSeconds == 30)
        #expect(config.apiKeys == [Self.key2])
        #expect(config.allowedOrigins == ["https://flag.example"])
        #expect(config.limits != nil)
        #expect(config.publicURL == "http://flag.example:1")
    }

    @Test("A flag given twice: the last value wins")
    func repeatedFlag() throws {
        #expect(try resolve(["port": ["7070", "7071"]]).port == 7071)
    }

    @Test("API keys, origins and trusted proxies are comma-separated lists, in flags and env")
    func lists() throws {
        let fromFlags = try resolve([
            "api-key": ["\(Self.key1), \(Self.key2)", Self.key3],
            "allowed-origin": ["https://a.example,https://b.example", "https://c.example"],
            "trusted-proxy": ["10.0.0.1, 10.0.0.2,"],
        ])
        #expect(fromFlags.apiKeys == [Self.key1, Self.key2, Self.key3])
        #expect(fromFlags.allowedOrigins == ["https://a.example", "https://b.example", "https://c.example"])
        #expect(fromFlags.trustedProxies.map(\.description) == ["10.0.0.1/32", "10.0.0.2/32"])

        let fromEnvironment = try resolve(
            [:],
            [
                "LINKRELAY_API_KEY": "\(Self.key1),\(Self.key2)",
                "LINKRELAY_ALLOWED_ORIGINS": "https://a.example, https://b.example",
                "LINKRELAY_TRUSTED_PROXIES": "10.0.0.1,10.0.0.2",
            ])
        #expect(fromEnvironment.apiKeys == [Self.key1, Self.key2])
        #expect(fromEnvironment.allowedOrigins == ["https://a.example", "https://b.example"])
        #expect(fromEnvironment.trustedProxies.map(\.description) == ["10.0.0.1/32", "10.0.0.2/32"])
    }

    @Test("Each limit has its own flag and environment variable")
    func limitFlags() throws {
        let config = try resolve(
            [
                "limit-landing-per-ip": ["7"], "limit-landing-per-link": ["3"], "limit-create-per-key": ["50"],
                "trusted-proxy": ["10.0.0.0/8", "fd00::/8"], "drain-timeout": ["25"], "integrator-name": ["Acme Bank"],
            ],
            ["LINKRELAY_LIMIT_CHANNELS_PER_SESSION": "2", "LINKRELAY_LIMIT_CHANNELS_PER_IP": "9"])
        var expected = Limits()
        expected.landingPerIP = 7
        expected.landingPerLink = 3
        expected.createPerKey = 50
        expected.channelsPerSession = 2
        expected.channelsPerIP = 9
        #expect(config.limits == expected)
        #expect(config.trustedProxies.map(\.description) == ["10.0.0.0/8", "fd00::/8"])
        #expect(config.drainTimeout == 25)
        #expect(config.integratorName == "Acme Bank")
    }

    @Test(
        "Bad hardening settings stop start-up with one line",
        arguments: [
            (["limit-landing-per-ip": ["0"]], "--limit-landing-per-ip"),
            (["limit-channels-per-ip": ["many"]], "--limit-channels-per-ip"),
            (["trusted-proxy": ["proxy.example"]], "--trusted-proxy"),
            (["trusted-proxy": ["10.0.0.0/33"]], "--trusted-proxy"),
            (["drain-timeout": ["-1"]], "--drain-timeout"),
            (["breaker-failures": ["0"]], "--breaker-failures"),
            (["sandbox-fault": ["unify:explode"]], "--sandbox-fault"),
            (["max-connections": ["0"]], "--max-connections"),
            (["limit-connections-per-address": ["0"]], "--limit-connections-per-address"),
            (["header-timeout": ["0"]], "--header-timeout"),
            (["body-timeout": ["601"]], "--body-timeout"),
            (["drain-delay": ["soon"]], "--drain-delay"),
            (["metrics-listen": ["9090"]], "--metrics-listen"),
            (["metrics-listen": ["127.0.0.1:99999"]], "--metrics-listen"),
        ])
    func badHardeningSettings(_ flags: [String: [String]], _ named: String) {
        expectRefusal(flags, [:], named)
    }

    @Test("Connections are capped below the open-file limit, or at --max-connections")
    func maxConnections() throws {
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(try resolve().maxConnections == max(64, Int(limit.rlim_cur) - 1024))
        #expect(try resolve(["max-connections": ["500"]]).maxConnections == 500)
        #expect(try resolve([:], ["LINKRELAY_MAX_CONNECTIONS": "700"]).maxConnections == 700)
    }

    @Test("Connections per address default to a tenth of the cap, and --limits off lifts them")
    func connectionsPerAddress() throws {
        #expect(try resolve(["max-connections": ["50"]]).connectionsPerAddress == 5)
        #expect(try resolve(["max-connections": ["5"]]).connectionsPerAddress == 1)
        #expect(try resolve(["limit-connections-per-address": ["7"]]).connectionsPerAddress == 7)
        #expect(try resolve(["limits": ["off"]]).connectionsPerAddress == nil)
        let timeouts = try resolve(["header-timeout": ["3"], "body-timeout": ["4"], "drain-delay": ["0"]])
        #expect(timeouts.headerTimeout == 3 && timeouts.bodyTimeout == 4 && timeouts.drainDelay == 0)
        let metrics = try #require(try resolve(["metrics-listen": ["[::1]:9090"]]).metricsListen)
        #expect(metrics.host == "::1" && metrics.port == 9090)
        let defaults = try resolve()
        #expect(defaults.headerTimeout == 10 && defaults.bodyTimeout == 10 && defaults.drainDelay == 5)
    }

    @Test(
        "The sandbox is refused beyond loopback unless --sandbox-public says so",
        arguments: ["0.0.0.0", "::", "10.1.2.3", "relay.example"])
    func sandboxOnlyOnLoopback(_ host: String) throws {
        expectRefusal(["host": [host]], [:], "--host")
        let flags = ["host": [host], "port": ["8080"], "public-url": ["https://relay.example"]]
        #expect(try resolve(flags.merging(["sandbox-public": ["on"]]) { $1 }).sandboxPublic)
        let prove = ["PROVE_CLIENT_ID": "id", "PROVE_CLIENT_SECRET": "secret"]
        #expect(try resolve(flags.merging(["prove": ["uat"]]) { $1 }, prove).host == host)
        for loopback in ["127.0.0.1", "127.8.9.10", "::1", "localhost"] {
            let flags = ["host": [loopback], "port": ["8080"], "public-url": ["https://relay.example"]]
            #expect(try resolve(flags).host == loopback)
        }
    }

    @Test("Sandbox faults need the sandbox")
    func faultsNeedTheSandbox() {
        expectRefusal(
            ["sandbox-fault": ["unify:hang"], "prove": ["http://prove.example"]],
            ["PROVE_CLIENT_ID": "id", "PROVE_CLIENT_SECRET": "secret"], "--sandbox-fault")
    }

    private func expectRefusal(_ flags: [String: [String]], _ environment: [String: String], _ named: String) {
        #expect {
            try resolve(flags, environment)
        } throws: { error in
            let line = (error as? ConfigurationError)?.description ?? ""
            return line.hasPrefix(named) && !line.contains("\n")
        }
    }

    @Test("--prove uat with credentials resolves to Prove's UAT base URL")
    func proveUAT() throws {
        let config = try resolve(
            ["prove": ["uat"]], ["PROVE_CLIENT_ID": "client-id", "PROVE_CLIENT_SECRET": "client-secret"])
        guard case .remote(let baseURL, let credentials, let prefillCredentials) = config.prove else {
            Issue.record("prove is \(config.prove), not remote")
            return
        }
        #expect(baseURL == "https://platform.uat.proveapis.com")
        #expect(credentials.clientID == "client-id")
        #expect(credentials.clientSecret == "client-secret")
        #expect(prefillCredentials == nil, "Pre-Fill uses the same project unless told otherwise")
    }

    @Test("Pre-Fill's project may have credentials of its own; one of the pair alone stops start-up")
    func provePrefillCredentials() throws {
        let base = ["PROVE_CLIENT_ID": "unify-id", "PROVE_CLIENT_SECRET": "unify-secret"]
        let config = try resolve(
            ["prove": ["prod-us"]],
            base.merging(["PROVE_PREFILL_CLIENT_ID": "prefill-id", "PROVE_PREFILL_CLIENT_SECRET": "prefill-secret"]) {
                $1
            })
        guard case .remote(let baseURL, _, let prefill?) = config.prove else {
            Issue.record("prove is \(config.prove), not remote with Pre-Fill credentials")
            return
        }
        #expect(baseURL == "https://platform.proveapis.com")
        #expect(prefill.clientID == "prefill-id" && prefill.clientSecret == "prefill-secret")
        #expect(throws: ConfigurationError.self) {
            try resolve(["prove": ["uat"]], base.merging(["PROVE_PREFILL_CLIENT_ID": "prefill-id"]) { $1 })
        }
    }

    @Test("--prove with a base URL, from the environment")
    func proveURL() throws {
        let config = try resolve(
            [:],
            [
                "LINKRELAY_PROVE": "http://127.0.0.1:9999/sandbox/prove/", "PROVE_CLIENT_ID": "sandbox-client",
                "PROVE_CLIENT_SECRET": "sandbox-secret",
            ])
        guard case .remote(let baseURL, _, _) = config.prove else {
            Issue.record("prove is \(config.prove), not remote")
            return
        }
        #expect(baseURL == "http://127.0.0.1:9999/sandbox/prove")
    }

    static let failures: [ConfigurationFailure] = [
        .init(flags: ["port": ["70000"]], names: "--port"),
        .init(flags: ["port": ["abc"]], names: "--port"),
        .init(flags: ["port": ["-1"]], names: "--port"),
        .init(environment: ["LINKRELAY_PORT": "abc"], names: "--port"),
        .init(flags: ["hold": ["0"]], names: "--hold"),
        .init(flags: ["hold": ["601"]], names: "--hold"),
        .init(flags: ["hold": ["1.5"]], names: "--hold"),
        .init(flags: ["store": ["mysql://x"]], names: "--store"),
        .init(flags: ["store": ["postgres://x"]], names: "--store"),
        .init(flags: ["store": ["postgres://user@host/db?sslmode=allow"]], names: "--store"),
        .init(flags: ["store": ["sqlite:"]], names: "--store"),
        .init(flags: ["prove": ["nonsense"]], names: "--prove"),
        .init(flags: ["prove": ["uat"]], names: "--prove"),
        .init(flags: ["prove": ["uat"]], environment: ["PROVE_CLIENT_ID": "id"], names: "--prove"),
        .init(flags: ["prove": ["prod"]], environment: ["PROVE_CLIENT_SECRET": "secret"], names: "--prove"),
        .init(flags: ["api-key": ["short-key"]], names: "--api-key"),
        .init(flags: ["api-key": [key1 + ",tooshort"]], names: "--api-key"),
        .init(flags: ["limits": ["maybe"]], names: "--limits"),
        .init(flags: ["malloc-tuning": ["fast"]], names: "--malloc-tuning"),
        .init(flags: ["event-loops": ["0"]], names: "--event-loops"),
        .init(environment: ["LINKRELAY_EVENT_LOOPS": "two"], names: "--event-loops"),
        .init(flags: ["log-time": ["gmt"]], names: "--log-time"),
        .init(flags: ["public-url": ["ftp://x"]], names: "--public-url"),
        .init(flags: ["public-url": ["relay.example"]], names: "--public-url"),
        .init(
            flags: ["public-url": ["https://" + String(repeating: "a", count: 80) + ".example"]],
            names: "--public-url"),
        .init(flags: ["public-url": ["https://relay.example/a%20b"]], names: "--public-url"),
    ]

    @Test("A bad setting is one line that names its flag", arguments: failures)
    func failure(_ failure: ConfigurationFailure) {
        do {
            let config = try RelayConfiguration.resolve(flags: failure.flags, environment: failure.environment)
            Issue.record("resolved to \(config.publicURL) instead of failing")
        } catch {
            #expect(error.description.contains(failure.names), "\(error.description)")
            #expect(!error.description.contains("\n"))
            #expect(!error.description.isEmpty)
        }
    }

    @Test("A PostgreSQL URL gives the server, the account, the database and the TLS mode")
    func postgresURL() throws {
        let full = try resolve(["store": ["postgresql://relay:pa%40ss@db.internal:6543/linkrelay?sslmode=require"]])
        #expect(
            full.store
                == .postgres(
                    try PostgresURL("postgres://relay:pa%40ss@db.internal:6543/linkrelay?sslmode=require")))
        guard case .postgres(let url) = full.store else { return }
        #expect(url.host == "db.internal")
        #expect(url.port == 6543)
        #expect(url.username == "relay")
        #expect(url.password == "pa@ss")
        #expect(url.database == "linkrelay")
        #expect(url.tls == .require)

        let short = try PostgresURL("postgres://relay@127.0.0.1/linkrelay")
        #expect(short.port == 5432)
        #expect(short.password == nil)
        #expect(short.tls == .prefer)
    }

    @Test(
        "A bad PostgreSQL URL names --store and never echoes the password",
        arguments: [
            "postgres://db.internal/linkrelay", "postgres://relay:s3cr3t@/linkrelay",
            "postgres://relay:s3cr3t@db/linkrelay?sslmode=sometimes",
        ])
    func badPostgresURL(_ url: String) {
        do {
            _ = try resolve(["store": [url]])
            Issue.record("resolved")
        } catch {
            #expect(error.description.contains("--store"))
            #expect(!error.description.contains("s3cr3t"))
        }
    }

    @Test("Prove's client secret never appears in a configuration error")
    func secretNotEchoed() {
        do {
            _ = try resolve(["prove": ["nonsense"]], ["PROVE_CLIENT_ID": "id", "PROVE_CLIENT_SECRET": "s3cr3t-value"])
            Issue.record("resolved")
        } catch {
            #expect(!error.description.contains("s3cr3t-value"))
        }
    }

    @Test("The longest public URL whose links still fit in 128 characters is accepted")
    func publicURLAtLimit() throws {
        // "/l/" and a 32-character key follow the public URL.
        let room = 128 - 3 - LandingRedirect.linkKeyLength
        let host = String(repeating: "a", count: room - "https://".count - ".example".count) + ".example"
        let url = "https://" + host
        #expect(url.count == room)
        #expect(try resolve(["public-url": [url]]).publicURL == url)
        #expect(throws: ConfigurationError.self) { try resolve(["public-url": [url + "x"]]) }
    }

    /// Allowed origins as written, and as the relay keeps them: the form a browser sends in `Origin`.
    static let acceptedOrigins: [(given: String, kept: String)] = [
        ("https://app.example", "https://app.example"),
        ("https://app.example:8443", "https://app.example:8443"),
        ("HTTPS://App.Example", "https://app.example"),
        ("https://app.example:443", "https://app.example"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
        ("https://203.0.113.9", "https://203.0.113.9"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("http://LOCALHOST", "http://localhost"),
        ("http://127.0.0.1:19600", "http://127.0.0.1:19600"),
        ("http://127.8.9.10:80", "http://127.8.9.10"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("http://[0:0:0:0:0:0:0:1]", "http://[::1]"),
        ("https://[2001:DB8::1]", "https://[2001:db8::1]"),
    ]

    @Test("An allowed origin is kept as a browser sends it: lower case, no default port", arguments: acceptedOrigins)
    func acceptedOrigin(_ origin: (given: String, kept: String)) throws {
        #expect(try RelayConfiguration.checkedOrigin(origin.given, setting: "--allowed-origin") == origin.kept)
        #expect(try resolve(["allowed-origin": [origin.given]]).allowedOrigins == [origin.kept])
        #expect(try resolve([:], ["LINKRELAY_ALLOWED_ORIGINS": origin.given]).allowedOrigins == [origin.kept])
    }

    /// Values that are no origin a browser sends, or one that must never be allowed, and a word of why.
    static let refusedOrigins: [(given: String, why: String)] = [
        ("null", "sandboxed frames"),
        ("NULL", "sandboxed frames"),
        ("*", "wildcard"),
        ("https://*.example.com", "wildcard"),
        ("127.0.0.1:19600", "no scheme"),
        ("app.example", "no scheme"),
        ("//app.example", "no scheme"),
        ("https://app.example/", "path"),
        ("https://app.example/login", "path"),
        ("https://app.example?x=1", "query"),
        ("https://app.example#top", "fragment"),
        ("https://user@app.example", "user info"),
        ("https://user:pass@app.example", "user info"),
        ("http://app.example", "use https"),
        ("http://10.0.0.5:8080", "use https"),
        ("http://[2001:db8::1]", "use https"),
        ("http://localhost.evil.example", "use https"),
        ("ws://127.0.0.1", "not https or http"),
        ("file://", "not https or http"),
        ("https://", "no valid host"),
        ("https://app_example.com", "no valid host"),
        ("https://app..example", "no valid host"),
        ("https://app.example.", "no valid host"),
        ("https://-app.example", "no valid host"),
        ("https://bücher.example", "no valid host"),
        ("https://127.1", "no valid host"),
        ("https://[::1", "no valid host"),
        ("https://[127.0.0.1]", "no valid host"),
        ("https://[::ffff:127.0.0.1]", "no valid host"),
        ("https://app.example:", "port"),
        ("https://app.example:0", "port"),
        ("https://app.example:65536", "port"),
        ("https://app.example:+80", "port"),
        ("https://app example", "no valid host"),
    ]

    @Test("A value that is no origin stops start-up with one line naming it and the rule", arguments: refusedOrigins)
    func refusedOrigin(_ origin: (given: String, why: String)) {
        for (flags, environment) in [
            (["allowed-origin": ["https://good.example", origin.given]], [String: String]()),
            ([:], ["LINKRELAY_ALLOWED_ORIGINS": "https://good.example," + origin.given]),
        ] {
            do {
                let config = try resolve(flags, environment)
                Issue.record("\(origin.given) was kept as \(config.allowedOrigins)")
            } catch {
                let line = error.description
                #expect(line.hasPrefix("--allowed-origin: \"\(origin.given)\" "), "\(line)")
                #expect(line.contains(origin.why), "\(line)")
                #expect(line.contains("scheme://host[:port]"), "the rule: \(line)")
                #expect(!line.contains("\n"))
            }
        }
    }

    @Test("The setting a refusal names is the caller's, for a tenant's list too")
    func originSettingNamed() {
        #expect(throws: ConfigurationError.self) {
            try RelayConfiguration.checkedOrigin("null", setting: "--tenants acme: allowedOrigins")
        }
        do {
            _ = try RelayConfiguration.checkedOrigin("https://a.example/\n", setting: "--tenants acme: allowedOrigins")
            Issue.record("a path was taken")
        } catch {
            #expect(error.description.hasPrefix("--tenants acme: allowedOrigins: \"https://a.example/\\n\""))
            #expect(!error.description.contains("\n"), "a newline in the value is written escaped: one line")
        }
    }

    @Test("The default origin, the public URL's, is written as a browser sends it")
    func defaultOriginNormalized() throws {
        let defaultPort = try resolve(["public-url": ["https://Relay.Example:443/base"]])
        #expect(defaultPort.allowedOrigins == ["https://relay.example"])
        let otherPort = try resolve(["public-url": ["https://relay.example:8443"]])
        #expect(otherPort.allowedOrigins == ["https://relay.example:8443"])
    }
}
