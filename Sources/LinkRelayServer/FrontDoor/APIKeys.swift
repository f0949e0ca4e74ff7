import Crypto
import Foundation
import LinkRelayCore
import LinkRelaySupport

/// The configured API and ops keys with their tenants, and the one lookup of a presented key: the Bearer
/// token of the API and the finish hook, and the password of the ops page. SIGHUP's reload replaces them
/// (`replace`); a request sees the keys of one configuration, old or new.
final class APIKeys: Sendable {
    /// Who presented a key: its tenant, and the key's id (rate limits count per key).
    struct Caller: Sendable, Equatable {
        var tenant: String
        /// A digest of the key (`keyID`): the same key keeps its id across reloads, and no log or limit
        /// holds the key itself.
        var keyID: String
    }

    private struct Keys {
        var api: [(key: String, caller: Caller)]
        var ops: [String]
    }

    private let keys: Locked<Keys>

    init(tenants: [TenantSettings], opsKeys: [String] = []) {
        keys = Locked(Self.keys(tenants: tenants, opsKeys: opsKeys))
    }

    /// From now on, these keys.
    func replace(tenants: [TenantSettings], opsKeys: [String]) {
        let replacement = Self.keys(tenants: tenants, opsKeys: opsKeys)
        keys.withLock { $0 = replacement }
    }

    private static func keys(tenants: [TenantSettings], opsKeys: [String]) -> Keys {
        Keys(
            api: tenants.flatMap { tenant in
                tenant.apiKeys.map { ($0, Caller(tenant: tenant.name, keyID: keyID($0))) }
            }, ops: opsKeys)
    }

    /// The first 12 bytes of the key's SHA-256, in hex: also the scope its Idempotency-Keys had before
    /// tenants.
    static func keyID(_ key: String) -> String {
        SHA256.hash(data: Data(key.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
    }

    var count: Int { keys.withLock { $0.api.count } }

    /// Whether `/ops` takes only the ops keys (`--ops-key`, `"opsKeys"`), not `default`'s API keys.
    var hasOpsKeys: Bool { keys.withLock { !$0.ops.isEmpty } }

    /// The caller whose key `token` is; every key is compared, in constant time, so neither how much of
    /// a key matched nor which key it was shows in the time taken.
    func caller(_ token: String) -> Caller? {
        let api = keys.withLock { $0.api }
        var match: Caller?
        for entry in api where Secrets.constantTimeEquals(token, entry.key) { match = entry.caller }
        return match
    }

    /// Whether `password` opens `/ops`: an ops key; without any, one of `default`'s API keys. Every key is
    /// compared, as in `caller`.
    func opensOps(_ password: String) -> Bool {
        let (api, ops) = keys.withLock { ($0.api, $0.ops) }
        guard ops.isEmpty else {
            var match = false
            for key in ops where Secrets.constantTimeEquals(password, key) { match = true }
            return match
        }
        var match = false
        for entry in api where Secrets.constantTimeEquals(password, entry.key) {
            match = entry.caller.tenant == Tenant.defaultName
        }
        return match
    }
}
