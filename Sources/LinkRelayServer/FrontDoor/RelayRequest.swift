import Foundation
import NIOCore
import NIOHTTP1

/// One request as the front door read it, whole: NIO's HTTP/1 head, the peer, the body, and what its
/// route captured from the path.
struct RelayRequest: Sendable {
    let head: HTTPRequestHead
    let peer: SocketAddress?
    /// The target before `?`: of an absolute-form target (`http://relay.example/l/…`, which a server must
    /// accept, RFC 9112 §3.2.2), the part after the scheme and authority.
    let path: Substring
    /// The target after `?`, as sent (still percent-encoded); nil without a `?`.
    let query: Substring?
    /// The body, or nil when it was larger than its route reads (`Route.maximumBody`).
    var body: ByteBuffer? = ByteBuffer()
    /// The path's `{name}` segments, in the order the route's pattern names them.
    var parameters: [Substring] = []

    init(head: HTTPRequestHead, peer: SocketAddress?) {
        self.head = head
        self.peer = peer
        var target = head.uri[...]
        let utf8 = target.utf8
        if utf8.first != UInt8(ascii: "/"), let scheme = target.range(of: "://") {
            let rest = target[scheme.upperBound...].utf8
            target =
                target[(rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex)...]
        }
        let mark = target.utf8.firstIndex(of: UInt8(ascii: "?"))
        path = target[..<(mark ?? target.endIndex)]
        query = mark.map { target[target.utf8.index(after: $0)...] }
    }

    /// A request as a test writes it.
    init(_ method: HTTPMethod, _ target: String, headers: HTTPHeaders = [:], body: String? = nil) {
        self.init(
            head: HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers),
            peer: try? SocketAddress(ipAddress: "127.0.0.1", port: 40000))
        self.body = ByteBuffer(string: body ?? "")
    }

    var method: HTTPMethod { head.method }
    /// The request target as sent (`/l/abc?asc=true&authId=…`).
    var target: String { head.uri }
    var headers: HTTPHeaders { head.headers }

    /// The value of a query parameter, percent-decoded (`+` as a space, as forms write it); a parameter
    /// given twice is a 400 naming it (`FormFields.value`), for every route that reads one.
    func queryItem(_ name: String) throws(Problem) -> String? {
        guard let query else { return nil }
        return try FormFields.value(name, in: query, what: "query parameter")
    }

    /// A request whose client wants the connection kept open after the answer (HTTP/1.1 unless it
    /// says `close`, HTTP/1.0 only when it says `keep-alive`).
    var keepAlive: Bool { head.isKeepAlive }

    /// Whether a browser posted this form from a page that is not the relay's (`publicOrigin`). Browsers
    /// send `Origin` on a POST. The relay's pages have `Referrer-Policy: no-referrer`, under which a browser
    /// writes even a same-origin form's `Origin` as `null` (Fetch, "serializing a request origin"): `null`
    /// with `Sec-Fetch-Site: same-origin`, which no page can set, is the relay's own page; `null` from
    /// anywhere else (a sandboxed frame on another site says `cross-site`) is foreign.
    func isPostedFromAnotherOrigin(than publicOrigin: String) -> Bool {
        guard let origin = headers.first(name: "Origin"), origin != publicOrigin else { return false }
        return !(origin == "null" && headers.first(name: "Sec-Fetch-Site") == "same-origin")
    }

    /// The token after `Bearer ` in the Authorization header.
    var bearerToken: String? {
        guard let value = headers.first(name: "Authorization"), value.utf8.count > 7,
            value.prefix(7).lowercased() == "bearer "
        else { return nil }
        return String(value.dropFirst(7))
    }
}
