import Foundation
import LinkRelayCore
import Testing

@testable import LinkRelayServer

/// `--api-key TENANT:KEY` and `--tenants FILE`: who owns which key, webhook and origins, and what stops start-up.
@Suite("Tenants: configuration", .timeLimit(.minutes(1)))
struct TenantSettingsTests {
    static let keyA = "key-of-acme-0123456789"
    static let keyB = "key-of-bank-b-0123456789"
    static let keyDefault = "key-of-default-0123456789"
    static let secret = WebhookFixtures.secret

    /// Resolves with `file` written as the `--tenants` file.
    static func resolve(_ flags: [String: [String]] = [:], file: String? = nil) throws -> RelayConfiguration {
        var flags = flags
        var path: URL?
        if let file {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("tenants-\(UUID().uuidString).json")
            try Data(file.utf8).write(to: url)
            flags["tenants"] = [url.path]
            path = url
        }
        defer { path.map { try? FileManager.default.removeItem(at: $0) } }
        return try RelayConfiguration.resolve(flags: flags, environment: [:])
    }

    @Test("A bare key is default's, TENANT:KEY the tenant's; keys of one tenant stay together")
    func keysFromFlags() throws {
        let config = try Self.resolve(["api-key": [Self.keyDefault, "acme:" + Self.keyA, "acme:" + Self.keyB]])
        #expect(config.tenants.map(\.name) == ["default", "acme"])
        #expect(config.tenants.map(\.apiKeys) == [[Self.keyDefault], [Self.keyA, Self.keyB]])
        #expect(!config.apiKeyGenerated)
        let keys = APIKeys(tenants: config.tenants)
        #expect(keys.caller("acme:" + Self.keyA) == nil, "the tenant's name is not part of the key")
        #expect(keys.caller(Self.keyB) == .init(tenant: "acme", keyID: APIKeys.keyID(Self.keyB)))
        #expect(keys.caller(Self.keyDefault)?.tenant == "default")
        // A colon after something that is no tenant's name is part of a bare key.
        let colon = try Self.resolve(["api-key": ["Not_A_Tenant:0123456789abcdef"]])
        #expect(colon.tenants.map(\.name) == ["default"])
        #expect(colon.apiKeys == ["Not_A_Tenant:0123456789abcdef"])
    }

    @Test("The file gives each tenant its keys, webhook and origins; the flags' webhook is default's")
    func file() throws {
        let config = try Self.resolve(
            [
                "api-key": [Self.keyDefault], "webhook-url": ["https://default.example/hook"],
                "webhook-secret": [Self.secret], "allowed-origin": ["https://shop.example"],
            ],
            file: """
                {"tenants":[
                  {"name":"acme","apiKeys":["\(Self.keyA)"],
                   "webhook":{"url":"https://acme.example/hooks","secret":"\(Self.secret)"},
                   "allowedOrigins":["https://acme.example","http://127.0.0.1:5173"]},
                  {"name":"bank-b","apiKeys":["\(Self.keyB)"]}]}
                """)
        #expect(config.tenants.map(\.name) == ["default", "acme", "bank-b"])
        #expect(config.tenants[0].webhook?.url.absoluteString == "https://default.example/hook")
        #expect(config.tenants[1].webhook?.url.absoluteString == "https://acme.example/hooks")
        #expect(config.tenants[2].webhook == nil)
        let origins = AllowedOrigins(defaults: config.allowedOrigins, tenants: config.tenants)
        #expect(origins.allows("https://acme.example", tenant: "acme"))
        #expect(!origins.allows("https://shop.example", tenant: "acme"), "a tenant's own list replaces the default")
        #expect(origins.allows("https://shop.example", tenant: "bank-b"), "no list of its own: --allowed-origin")
        #expect(origins.allows("https://shop.example", tenant: "default"))
        #expect(origins.any == ["https://acme.example", "http://127.0.0.1:5173", "https://shop.example"])
    }

    @Test("With only a file, no key is made up; without any key, default gets a random one")
    func generatedKey() throws {
        let fileOnly = try Self.resolve(file: #"{"tenants":[{"name":"acme","apiKeys":["\#(Self.keyA)"]}]}"#)
        #expect(!fileOnly.apiKeyGenerated)
        #expect(fileOnly.apiKeys == [Self.keyA])
        let none = try Self.resolve(["webhook-url": ["https://default.example/hook"], "webhook-secret": [Self.secret]])
        #expect(none.apiKeyGenerated)
        #expect(none.tenants.count == 1 && none.tenants[0].name == "default" && none.tenants[0].apiKeys.count == 1)
        #expect(none.webhooks != nil)
    }

    static let refusals: [(flags: [String: [String]], file: String?, says: String)] = [
        (["api-key": [keyA, keyA]], nil, "--api-key: a key of tenant default is named twice"),
        (["api-key": ["acme:" + keyA, "bank:" + keyA]], nil, "--api-key: one key is named for tenants acme and bank"),
        (["api-key": ["acme:short"]], nil, "--api-key: a key of 5 bytes is not 20 to 256 characters long"),
        (["api-key": [String(repeating: "k", count: 19)]], nil, "--api-key: a key of 19 bytes is not 20 to 256"),
        (["api-key": [String(repeating: "k", count: 257)]], nil, "--api-key: a key of 257 bytes is not 20 to 256"),
        (
            ["api-key": [String(repeating: " ", count: 20)]], nil,
            "--api-key: a key holds a space or a character that is not printable ASCII"
        ),
        (["api-key": ["acme:nul-\u{0}-0123456789abcdef"]], nil, "--api-key: a key holds a space or a character"),
        (["api-key": ["key-with-é-0123456789abcdef"]], nil, "--api-key: a key holds a space or a character"),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["                    "]}]}"#,
            "tenant acme: a key holds a space or a character that is not printable ASCII"
        ),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"]}],"opsKeys":["ops"]}"#,
            "opsKeys: a key of 3 bytes is not 20 to 256"
        ),
        (["ops-key": ["short-ops-key"]], nil, "--ops-key: a key of 13 bytes is not 20 to 256"),
        (["ops-key": [keyB, keyB]], nil, "--ops-key: a key is named twice"),
        (
            ["api-key": [keyA], "ops-key": [keyA]], nil,
            "--ops-key: an ops key is an API key of tenant default too; an ops key opens /ops only"
        ),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyB)"]}],"opsKeys":["\#(keyB)"]}"#,
            "an ops key is an API key of tenant acme too"
        ),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"]},]}"#,
            "not JSON: a trailing comma at line 1, column 66"
        ),
        (
            ["api-key": ["acme:" + keyB]], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"]}]}"#,
            "tenant acme is named in --api-key and the file"
        ),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"]},{"name":"acme","apiKeys":["\#(keyB)"]}]}"#,
            "tenant acme is named twice in the file"
        ),
        (
            ["api-key": [keyA]], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"]}]}"#,
            "one key is named for tenants default and acme"
        ),
        ([:], #"{"tenants":[{"name":"Acme","apiKeys":["\#(keyA)"]}]}"#, "name must be 1 to 32 of a-z, 0-9 and -"),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":[]}]}"#,
            "tenant acme: apiKeys must be a list of at least one key"
        ),
        ([:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"],"webhooks":{}}]}"#, "unknown field(s) webhooks"),
        (
            [:],
            #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"],"webhook":{"url":"ftp://x/y","secret":"\#(secret)"}}]}"#,
            "tenant acme: webhook: url"
        ),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"],"allowedOrigins":["null"]}]}"#,
            "tenant acme: allowedOrigins: \"null\" is what sandboxed frames"
        ),
        (
            [:],
            #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"],"allowedOrigins":["https://acme.example/path"]}]}"#,
            "allowedOrigins: \"https://acme.example/path\" has a path"
        ),
        ([:], #"{"tenant":[]}"#, "expected {\"tenants\""),
        (
            [:], #"{"tenants":[{"name":"acme","apiKeys":["\#(keyA)"],"name":"bank"}]}"#,
            "\"name\" is named twice in tenants[0]"
        ),
        ([:], "not json", "not JSON: a word other than true, false or null at line 1, column 1"),
        (
            ["webhook-url": ["https://default.example/hook"], "webhook-secret": [secret]],
            #"{"tenants":[{"name":"default","apiKeys":["\#(keyA)"],"webhook":{"url":"https://d.example/h","secret":"\#(secret)"}}]}"#,
            "--webhook-url: the default tenant's webhook is set in --tenants too"
        ),
    ]

    @Test(
        "A key or tenant named twice, or a bad entry, stops start-up with one line that echoes no key or secret",
        arguments: refusals.indices)
    func refused(_ index: Int) throws {
        let (flags, file, says) = Self.refusals[index]
        do {
            _ = try Self.resolve(flags, file: file)
            Issue.record("accepted: \(says)")
        } catch let error as ConfigurationError {
            #expect(error.description.contains(says), "\(error.description)")
            #expect(!error.description.contains("\n"))
            for secret in [Self.keyA, Self.keyB, String(Self.secret.dropFirst(6))] {
                #expect(!error.description.contains(secret))
            }
        }
    }

    @Test("Ops keys come from --ops-key, LINKRELAY_OPS_KEYS and the file's opsKeys; 20 and 256 characters are keys")
    func opsKeys() throws {
        let ops = "ops-key-0123456789abcdef"
        let fromFile = "ops-key-of-the-file-0123456789"
        let config = try Self.resolve(
            ["ops-key": [ops], "api-key": [String(repeating: "a", count: 20), String(repeating: "b", count: 256)]],
            file: #"{"tenants":[{"name":"acme","apiKeys":["\#(Self.keyA)"]}],"opsKeys":["\#(fromFile)"]}"#)
        #expect(config.opsKeys == [ops, fromFile])
        #expect(config.tenants.map(\.name) == ["default", "acme"])
        let environment = try RelayConfiguration.resolve(
            flags: [:], environment: ["LINKRELAY_OPS_KEYS": "\(ops), \(fromFile)"])
        #expect(environment.opsKeys == [ops, fromFile])
        #expect(try Self.resolve().opsKeys == [])
    }

    @Test("A tenants file that cannot be read stops start-up naming it")
    func unreadable() throws {
        #expect(throws: ConfigurationError("--tenants /nonexistent/tenants.json: cannot read the file")) {
            try RelayConfiguration.resolve(flags: ["tenants": ["/nonexistent/tenants.json"]], environment: [:])
        }
    }

    @Test("Retention settings: defaults, ranges")
    func retention() throws {
        let defaults = try Self.resolve()
        #expect(defaults.identityRetention == 900 && defaults.retentionDays == 7)
        let set = try Self.resolve(["identity-retention": ["0"], "retention": ["3650"]])
        #expect(set.identityRetention == 0 && set.retentionDays == 3650)
        for flags in [["identity-retention": ["86401"]], ["retention": ["0"]], ["retention": ["x"]]] {
            #expect(throws: ConfigurationError.self) { try Self.resolve(flags) }
        }
    }
}
