import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// `GET /v1/client.js`, the browser client (`templates/client.js`). Integrators' pages load it from the
/// relay, so a browser revalidates it on every load (`no-cache`) and gets a bodiless 304 while the
/// relay's copy is unchanged: its strong ETag is a hash of the bytes, computed once at start.
struct ClientScript: Sendable {
    let body: ByteBuffer
    let etag: String

    init(_ text: String) {
        body = ByteBuffer(string: text)
        let digest = SHA256.hash(data: Array(text.utf8))
        etag = "\"" + digest.prefix(16).map { String(format: "%02x", $0) }.joined() + "\""
    }

    func answer(_ request: RelayRequest) -> Answer {
        var headers: HTTPHeaders = ["ETag": etag, "Cache-Control": "no-cache"]
        if request.headers[canonicalForm: "If-None-Match"].contains(where: { Self.matches($0, etag) }) {
            return Answer(status: .notModified, headers: headers)
        }
        headers.add(name: "Content-Type", value: "text/javascript; charset=utf-8")
        return Answer(status: .ok, headers: headers, body: body)
    }

    /// Whether one entry of an If-None-Match list names `etag`, by the weak comparison RFC 9110 §13.1.2 asks of it
    /// (`W/"x"` matches `"x"`), or is `*`.
    static func matches(_ condition: Substring, _ etag: String) -> Bool {
        let tag = condition.trimmingCharacters(in: .whitespaces)
        if tag == "*" { return true }
        return (tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag) == etag
    }
}
