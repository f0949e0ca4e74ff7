import LinkRelayCore

/// The configured API keys with their tenants, and the one lookup of a presented key: the Bearer token
/// of the API and the finish hook, and the password of the ops page.
struct APIKeys: Sendable {
    /// Who presented a key: its tenant, and the key's place among all keys (rate limits count per key).
    struct Caller: Sendable, Equatable {
        var tenant: String
        var keyIndex: Int
    }

    private let keys: [(key: String, tenant: String)]

    init(tenants: [TenantSettings]) {
        keys = tenants.flatMap { tenant in tenant.apiKeys.map { ($0, tenant.name) } }
    }

    var count: Int { keys.count }

    /// The caller whose key `token` is; every key is compared, in constant time, so neither how much of
    /// a key matched nor which key it was shows in the time taken.
    func caller(_ token: String) -> Caller? {
        var match: Caller?
        for (index, entry) in keys.enumerated() where Secrets.constantTimeEquals(token, entry.key) {
            match = Caller(tenant: entry.tenant, keyIndex: index)
        }
        return match
    }
}
