import Crypto
import Foundation

/// Where webhooks go and the key they are signed with (`--webhook-url`, `--webhook-secret`).
public struct WebhookSettings: Sendable {
    public let url: URL
    /// The secret's decoded bytes: the HMAC key.
    let key: SymmetricKey

    /// Checks both settings; a problem is one line naming the flag.
    public init(url text: String, secret: String) throws(ConfigurationError) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty
        else { throw ConfigurationError("--webhook-url: \"\(text)\" is not an http(s) URL") }
        // Standard Webhooks: `whsec_` and the key in base64, 24 to 64 bytes. The secret is never echoed.
        guard secret.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(secret.dropFirst(6))),
            (24...64).contains(bytes.count)
        else {
            throw ConfigurationError(
                "--webhook-secret: expected whsec_ followed by 24 to 64 bytes in base64 (e.g. whsec_$(openssl rand -base64 32))"
            )
        }
        self.url = url
        self.key = SymmetricKey(data: bytes)
    }

    /// Where messages go, as start-up logs it: scheme and host, and a port other than the scheme's. A
    /// receiver's path or query may carry a secret of its own, and logs carry no webhook URL.
    public var origin: String {
        let scheme = url.scheme?.lowercased() ?? "https"
        let host = url.host ?? ""
        let port = url.port.flatMap { $0 == (scheme == "https" ? 443 : 80) ? nil : ":\($0)" } ?? ""
        return "\(scheme)://\(host.contains(":") ? "[\(host)]" : host)\(port)"
    }

    /// The same URL and secret: a reload that leaves them keeps the tenant's lane.
    func isSame(as other: WebhookSettings) -> Bool { url == other.url && key == other.key }

    /// `webhook-signature` for a message: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`.
    func signature(id: String, timestamp: Int, body: [UInt8]) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return "v1," + Data(hmac.finalize()).base64EncodedString()
    }
}
