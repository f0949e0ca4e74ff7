import LinkRelayCore

/// The configured API keys, and the one lookup of a presented key: the Bearer token of the API and
/// the finish hook, and the password of the ops page.
struct APIKeys: Sendable {
    let keys: [String]

    /// The index of the configured key `token` is; every key is compared, in constant time, so neither
    /// how much of a key matched nor which key it was shows in the time taken.
    func index(of token: String) -> Int? {
        var match: Int?
        for (index, key) in keys.enumerated() where Secrets.constantTimeEquals(token, key) { match = index }
        return match
    }
}
