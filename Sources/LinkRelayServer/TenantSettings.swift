import Foundation
import LinkRelayCore

/// One tenant as configured (`--api-key TENANT:KEY`, `--tenants FILE`): its API keys, where its webhook
/// messages go, and the browser origins its sessions' channels and finish hook take.
public struct TenantSettings: Sendable {
    public var name: String
    public var apiKeys: [String]
    /// Nil: its sessions' events are not POSTed anywhere.
    public var webhook: WebhookSettings?
    /// Nil: `--allowed-origin`'s.
    public var allowedOrigins: [String]?

    public init(name: String, apiKeys: [String], webhook: WebhookSettings? = nil, allowedOrigins: [String]? = nil) {
        self.name = name
        self.apiKeys = apiKeys
        self.webhook = webhook
        self.allowedOrigins = allowedOrigins
    }

    /// What a key is: 20 to 256 printable ASCII characters without spaces, so that it can be typed,
    /// pasted and sent in a header, and a stray space or NUL in a file cannot make a key that never matches.
    static let keyLengths = 20...256

    /// Why `key` is no key, in words that never echo it; nil when it is one.
    static func keyProblem(_ key: String) -> String? {
        guard keyLengths.contains(key.utf8.count) else {
            return "a key of \(key.utf8.count) bytes is not 20 to 256 characters long"
        }
        guard key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return "a key holds a space or a character that is not printable ASCII"
        }
        return nil
    }

    /// The tenants of `--api-key` entries (`TENANT:KEY`, a bare `KEY` being `default`'s) and of the
    /// `--tenants` file, with `--webhook-url`/`--webhook-secret` as `default`'s webhook; the ops keys of
    /// `--ops-key` and the file's `"opsKeys"`. A tenant or a key named twice, anywhere, is refused; a key
    /// is never echoed.
    static func resolve(
        keyEntries: [String], opsKeyEntries: [String] = [], file: (path: String, data: Data)?,
        defaultWebhook: WebhookSettings?
    ) throws(ConfigurationError) -> (tenants: [TenantSettings], opsKeys: [String]) {
        var fromFlags: [(name: String, keys: [String])] = []
        for entry in keyEntries {
            let (name, key) = split(entry)
            if let problem = keyProblem(key) { throw ConfigurationError("--api-key: \(problem)") }
            if let index = fromFlags.firstIndex(where: { $0.name == name }) {
                fromFlags[index].keys.append(key)
            } else {
                fromFlags.append((name, [key]))
            }
        }
        var tenants = fromFlags.map { TenantSettings(name: $0.name, apiKeys: $0.keys) }
        var opsKeys = opsKeyEntries
        for key in opsKeys {
            if let problem = keyProblem(key) { throw ConfigurationError("--ops-key: \(problem)") }
        }
        if let file {
            let read = try read(file.data, path: file.path)
            opsKeys += read.opsKeys
            for tenant in read.tenants {
                guard !tenants.contains(where: { $0.name == tenant.name }) else {
                    let place = fromFlags.contains { $0.name == tenant.name } ? "in --api-key and" : "twice in"
                    throw ConfigurationError("--tenants \(file.path): tenant \(tenant.name) is named \(place) the file")
                }
                tenants.append(tenant)
            }
        }
        if let defaultWebhook {
            if let index = tenants.firstIndex(where: { $0.name == Tenant.defaultName }) {
                guard tenants[index].webhook == nil else {
                    throw ConfigurationError(
                        "--webhook-url: the default tenant's webhook is set in --tenants too; set it in one place")
                }
                tenants[index].webhook = defaultWebhook
            } else {
                tenants.append(TenantSettings(name: Tenant.defaultName, apiKeys: [], webhook: defaultWebhook))
            }
        }
        guard Set(opsKeys).count == opsKeys.count else { throw ConfigurationError("--ops-key: a key is named twice") }
        var owners: [String: String] = [:]
        for key in opsKeys { owners[key] = "" }
        for tenant in tenants {
            for key in tenant.apiKeys {
                if let other = owners.updateValue(tenant.name, forKey: key) {
                    throw ConfigurationError(
                        other.isEmpty
                            ? "--ops-key: an ops key is an API key of tenant \(tenant.name) too; an ops key opens /ops only"
                            : other == tenant.name
                                ? "--api-key: a key of tenant \(tenant.name) is named twice"
                                : "--api-key: one key is named for tenants \(other) and \(tenant.name)")
                }
            }
        }
        return (tenants, opsKeys)
    }

    /// The same keys, webhook and origins.
    func isSame(as other: TenantSettings) -> Bool {
        name == other.name && apiKeys == other.apiKeys && allowedOrigins == other.allowedOrigins
            && (webhook == nil) == (other.webhook == nil)
            && (webhook.map { mine in other.webhook.map(mine.isSame) ?? false } ?? true)
    }

    /// `key` as `default`'s only key, `default` made first when it is not among `tenants`.
    static func give(_ key: String, toDefaultOf tenants: inout [TenantSettings]) {
        if let index = tenants.firstIndex(where: { $0.name == Tenant.defaultName }) {
            tenants[index].apiKeys = [key]
        } else {
            tenants.insert(TenantSettings(name: Tenant.defaultName, apiKeys: [key]), at: 0)
        }
    }

    /// `TENANT:KEY` when the part before the first colon is a tenant's name; else a bare key of `default`.
    static func split(_ entry: String) -> (tenant: String, key: String) {
        if let colon = entry.firstIndex(of: ":"), Tenant.isValidName(String(entry[..<colon])) {
            return (String(entry[..<colon]), String(entry[entry.index(after: colon)...]))
        }
        return (Tenant.defaultName, entry)
    }

    /// `{"tenants":[{"name","apiKeys":[…],"webhook":{"url","secret"}?,"allowedOrigins":[…]?}],
    /// "opsKeys":[…]?}`, every problem one line naming the file and the tenant.
    static func read(_ data: Data, path: String) throws(ConfigurationError) -> (
        tenants: [TenantSettings], opsKeys: [String]
    ) {
        func refuse(_ problem: String) -> ConfigurationError { ConfigurationError("--tenants \(path): \(problem)") }
        if let broken = StrictJSON.check(data) {
            throw refuse("not JSON: \(broken.found) at line \(broken.line), column \(broken.column)")
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            root["tenants"] != nil, Set(root.keys).isSubset(of: ["tenants", "opsKeys"]),
            let entries = root["tenants"] as? [Any]
        else {
            throw refuse(#"expected {"tenants":[{"name","apiKeys":[…],"webhook"?,"allowedOrigins"?}],"opsKeys"?:[…]}"#)
        }
        var opsKeys: [String] = []
        if let keys = root["opsKeys"] {
            guard let list = keys as? [String] else { throw refuse("opsKeys must be a list of keys") }
            if let problem = list.lazy.compactMap(keyProblem).first { throw refuse("opsKeys: \(problem)") }
            opsKeys = list
        }
        if let duplicate = JSONDuplicateKey.first(in: data) {
            let place = duplicate.path.isEmpty ? "" : " in \(duplicate.path)"
            throw refuse("\"\(duplicate.key)\" is named twice\(place)")
        }
        var tenants: [TenantSettings] = []
        for (index, entry) in entries.enumerated() {
            guard let object = entry as? [String: Any] else { throw refuse("tenants[\(index)] is not an object") }
            guard let name = object["name"] as? String, Tenant.isValidName(name) else {
                throw refuse("tenants[\(index)]: name must be 1 to 32 of a-z, 0-9 and -")
            }
            func problem(_ text: String) -> ConfigurationError { refuse("tenant \(name): \(text)") }
            let unknown = Set(object.keys).subtracting(["name", "apiKeys", "webhook", "allowedOrigins"])
            guard unknown.isEmpty else { throw problem("unknown field(s) \(unknown.sorted().joined(separator: ", "))") }
            guard let keys = object["apiKeys"] as? [String], !keys.isEmpty else {
                throw problem("apiKeys must be a list of at least one key")
            }
            if let fault = keys.lazy.compactMap(keyProblem).first { throw problem(fault) }
            var tenant = TenantSettings(name: name, apiKeys: keys)
            if let webhook = object["webhook"] {
                guard let fields = webhook as? [String: Any], Set(fields.keys) == ["url", "secret"],
                    let url = fields["url"] as? String, let secret = fields["secret"] as? String
                else { throw problem(#"webhook must be {"url","secret"}"#) }
                do {
                    tenant.webhook = try WebhookSettings(url: url, secret: secret)
                } catch {
                    throw problem("webhook: \(error.description.replacingOccurrences(of: "--webhook-", with: ""))")
                }
            }
            if let origins = object["allowedOrigins"] {
                guard let list = origins as? [String] else { throw problem("allowedOrigins must be a list of origins") }
                tenant.allowedOrigins = try list.map { (origin) throws(ConfigurationError) in
                    try RelayConfiguration.checkedOrigin(
                        origin, setting: "--tenants \(path): tenant \(name): allowedOrigins")
                }
            }
            tenants.append(tenant)
        }
        return (tenants, opsKeys)
    }
}
