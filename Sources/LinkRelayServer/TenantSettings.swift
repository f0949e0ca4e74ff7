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

    /// The tenants of `--api-key` entries (`TENANT:KEY`, a bare `KEY` being `default`'s) and of the
    /// `--tenants` file, with `--webhook-url`/`--webhook-secret` as `default`'s webhook. A tenant or a
    /// key named twice, anywhere, is refused; a key is never echoed.
    static func resolve(
        keyEntries: [String], file: (path: String, data: Data)?, defaultWebhook: WebhookSettings?
    ) throws(ConfigurationError) -> [TenantSettings] {
        var fromFlags: [(name: String, keys: [String])] = []
        for entry in keyEntries {
            let (name, key) = split(entry)
            guard key.count >= 16 else {
                throw ConfigurationError("--api-key: a key of \(key.count) characters is too short (at least 16)")
            }
            if let index = fromFlags.firstIndex(where: { $0.name == name }) {
                fromFlags[index].keys.append(key)
            } else {
                fromFlags.append((name, [key]))
            }
        }
        var tenants = fromFlags.map { TenantSettings(name: $0.name, apiKeys: $0.keys) }
        if let file {
            for tenant in try read(file.data, path: file.path) {
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
        var owners: [String: String] = [:]
        for tenant in tenants {
            for key in tenant.apiKeys {
                if let other = owners.updateValue(tenant.name, forKey: key) {
                    throw ConfigurationError(
                        other == tenant.name
                            ? "--api-key: a key of tenant \(tenant.name) is named twice"
                            : "--api-key: one key is named for tenants \(other) and \(tenant.name)")
                }
            }
        }
        return tenants
    }

    /// `TENANT:KEY` when the part before the first colon is a tenant's name; else a bare key of `default`.
    static func split(_ entry: String) -> (tenant: String, key: String) {
        if let colon = entry.firstIndex(of: ":"), Tenant.isValidName(String(entry[..<colon])) {
            return (String(entry[..<colon]), String(entry[entry.index(after: colon)...]))
        }
        return (Tenant.defaultName, entry)
    }

    /// `{"tenants":[{"name","apiKeys":[…],"webhook":{"url","secret"}?,"allowedOrigins":[…]?}]}`, every
    /// problem one line naming the file and the tenant.
    static func read(_ data: Data, path: String) throws(ConfigurationError) -> [TenantSettings] {
        func refuse(_ problem: String) -> ConfigurationError { ConfigurationError("--tenants \(path): \(problem)") }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            Set(root.keys) == ["tenants"], let entries = root["tenants"] as? [Any]
        else { throw refuse(#"expected {"tenants":[{"name","apiKeys":[…],"webhook"?,"allowedOrigins"?}]}"#) }
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
            if let short = keys.first(where: { $0.count < 16 }) {
                throw problem("a key of \(short.count) characters is too short (at least 16)")
            }
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
        return tenants
    }
}
