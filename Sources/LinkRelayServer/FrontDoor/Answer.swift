import Foundation
import LinkRelaySupport
import NIOCore
import NIOHTTP1

/// A whole answer: status, headers and body. `ResponseWriter` adds the headers every answer carries.
struct Answer: Sendable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: ByteBuffer
    /// The connection closes without this answer being written: what the sandbox's `drop` fault asks for.
    var dropsConnection = false

    init(status: HTTPResponseStatus, headers: HTTPHeaders = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// JSON as the API writes it: dates in ISO 8601 with milliseconds, keys sorted, never cached.
    static func json(_ value: some Encodable, status: HTTPResponseStatus = .ok, headers: HTTPHeaders = [:]) -> Answer {
        var headers = headers
        headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return Answer(status: status, headers: headers, body: ByteBuffer(bytes: RelayJSON.encode(value)))
    }

    static func text(_ text: String, status: HTTPResponseStatus = .ok) -> Answer {
        Answer(
            status: status,
            headers: ["Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"],
            body: ByteBuffer(string: text))
    }

    /// An asset of the pages (`text/css`, `text/javascript`), cached for five minutes.
    static func asset(_ text: String, contentType: String) -> Answer {
        Answer(
            status: .ok, headers: ["Content-Type": contentType, "Cache-Control": "max-age=300"],
            body: ByteBuffer(string: text))
    }

    /// The answer over a limit: a bare 429, no detail and no precise Retry-After (security-anchors R1.9).
    static let tooManyRequests = Answer(status: .tooManyRequests, headers: ["Cache-Control": "no-store"])

    static let droppedConnection: Answer = {
        var answer = Answer(status: .badGateway)
        answer.dropsConnection = true
        return answer
    }()
}
