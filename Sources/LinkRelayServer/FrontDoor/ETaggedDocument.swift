import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// A document that is fixed for the life of the process (the API description, the browser client), served with a strong
/// `ETag`: a client that names it in `If-None-Match` gets a 304 without the body.
struct ETaggedDocument: Sendable {
    let body: ByteBuffer
    let contentType: String
    /// The first 16 bytes of the body's SHA-256 in hex, quoted: the same on every instance serving the
    /// same bytes, so a balancer switching instances costs no download.
    let etag: String

    init(_ bytes: [UInt8], contentType: String) {
        body = ByteBuffer(bytes: bytes)
        self.contentType = contentType
        etag = "\"" + SHA256.hash(data: bytes).prefix(16).map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// 304 when `If-None-Match` names this document (or is `*`), else 200 with the body. `no-cache`: a
    /// cache keeps the document but asks again each time, so a new release's document is seen at once.
    func answer(to request: RelayRequest) -> Answer {
        var headers: HTTPHeaders = ["ETag": etag, "Cache-Control": "no-cache"]
        if Self.matches(request.headers[canonicalForm: "If-None-Match"], etag: etag) {
            return Answer(status: .notModified, headers: headers)
        }
        headers.add(name: "Content-Type", value: contentType)
        return Answer(status: .ok, headers: headers, body: body)
    }

    /// Whether one of `candidates` (If-None-Match's list) names `etag`. The comparison is weak, as
    /// RFC 9110 §13.1.2 asks for If-None-Match: `W/"x"` names `"x"`.
    static func matches(_ candidates: [Substring], etag: String) -> Bool {
        candidates.contains { candidate in
            let candidate = candidate.trimmingCharacters(in: .whitespaces)
            return candidate == "*" || candidate.trimmingPrefix("W/") == etag
        }
    }
}
