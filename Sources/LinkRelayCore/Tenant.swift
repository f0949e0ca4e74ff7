/// A tenant: one integrator's share of the relay. Its API keys, sessions, Idempotency-Keys and webhook
/// messages are its own; another tenant's ids answer as unknown ones.
public enum Tenant {
    /// The tenant of a bare `--api-key`, of `--webhook-url`, and of sessions stored before tenants.
    public static let defaultName = "default"

    /// `[a-z0-9-]{1,32}`: safe in a metric label, a log line and an Idempotency-Key's scope.
    public static func isValidName(_ name: String) -> Bool {
        (1...32).contains(name.utf8.count)
            && name.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }
}
