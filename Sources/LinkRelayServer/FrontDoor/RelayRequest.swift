import Foundation
import NIOCore
import NIOHTTP1

/// One request as the front door read it, whole: NIO's HTTP/1 head, the peer, the body, what its route
/// captured from the path, and what its route's guard established (`Route.admit`).
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
    /// The path's `{name}` segments, by name (`parameters["id"]`).
    var parameters = RouteParameters()
    /// Who is asking, as the route's guard established it; `.none` on a route open to anyone.
    var credential = Credential.none

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

    /// A request as a test writes it; a body is declared by its `Content-Length` unless the headers frame it.
    init(_ method: HTTPMethod, _ target: String, headers: HTTPHeaders = [:], body: String? = nil) {
        var headers = headers
        if let body, !body.isEmpty, !headers.contains(name: "Content-Length"),
            !headers.contains(name: "Transfer-Encoding")
        {
            headers.add(name: "Content-Length", value: String(body.utf8.count))
        }
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
    /// says `close`, HTTP/1.0 only when it says `keep-alive`), and may have it: NIO's decoder reads
    /// nothing after a request that asks for an upgrade, so an answer that is not the upgrade ends it.
    var keepAlive: Bool { head.isKeepAlive && !asksForUpgrade }

    /// The request asks to switch protocols (`Upgrade`, a WebSocket's opening).
    var asksForUpgrade: Bool { headers.contains(name: "Upgrade") }

    /// Whether a browser posted this form from a page that is not the relay's (`publicOrigin`). Browsers
    /// send `Origin` on a POST. The relay's pages have `Referrer-Policy: no-referrer`, under which a browser
    /// writes even a same-origin form's `Origin` as `null` (Fetch, "serializing a request origin"): `null`
    /// with `Sec-Fetch-Site: same-origin`, which no page can set, is the relay's own page; `null` from
    /// anywhere else (a sandboxed frame on another site says `cross-site`) is foreign.
    func isPostedFromAnotherOrigin(than publicOrigin: String) -> Bool {
        guard let origin = headers.first(name: "Origin"), origin != publicOrigin else { return false }
        return !(origin == "null" && headers.first(name: "Sec-Fetch-Site") == "same-origin")
    }

    /// The path segment the route's pattern names `{name}`. A route's pattern names what its handler
    /// reads, so a name it lacks is a table's mistake, answered as an unknown resource.
    func parameter(_ name: String) throws(Problem) -> String {
        guard let value = parameters[name] else { throw Problem.notFound() }
        return String(value)
    }

    /// The API key's caller the route's guard established. A route that reads it without the guard
    /// (a table's mistake) answers 401, as a request without a key would.
    func caller() throws(Problem) -> APIKeys.Caller {
        guard case .apiKey(let caller) = credential else { throw Problem.unauthorized() }
        return caller
    }

    /// The token after `Bearer ` in the Authorization header.
    var bearerToken: String? {
        guard let value = headers.first(name: "Authorization"), value.utf8.count > 7,
            value.prefix(7).lowercased() == "bearer "
        else { return nil }
        return String(value.dropFirst(7))
    }
}

/// What a route's guard established about who is asking (`Route.Guard`).
enum Credential: Sendable, Equatable {
    /// No guard ran: the route is open to anyone.
    case none
    /// A configured API key (the API's Bearer token).
    case apiKey(APIKeys.Caller)
    /// A channel token as presented (`?token=`, else the Bearer token), from an origin some tenant allows.
    /// `ChannelGate` (a channel) or the finish hook compares it with the session's once the session is
    /// read; one that does not match is answered as an unknown session.
    case channelToken(String)
    /// The ops page's Basic password: an ops key, or without any a `default` API key.
    case `operator`
}

/// The `{name}` segments of a request's path, by name: the names are the route pattern's (shared, not
/// copied per request), the values slices of the request's path.
struct RouteParameters: Sendable {
    private let names: [String]
    private let values: [Substring]

    init(names: [String] = [], values: [Substring] = []) {
        self.names = names
        self.values = values
    }

    subscript(name: String) -> Substring? {
        guard let index = names.firstIndex(of: name), index < values.count else { return nil }
        return values[index]
    }
}
