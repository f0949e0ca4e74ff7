import Foundation
import HTTPTypes
import LinkRelayCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The phone's browser reloading its landing after the session ended: answered from memory, on the
/// event loop, without the store, a task or Hummingbird (see `RepeatLandingHandler`).
///
/// Only what `LandingController` has already answered once as a final page is kept: an ended
/// session never changes, so an entry cannot go stale. Every other landing (the first, one of a
/// session still going, any refusal) goes to `LandingController`, which applies the same limits.
final class RepeatLandings: Sendable {
    /// The final page, its variant for a session the phone turned down, and the busy page, rendered once.
    struct Pages: Sendable {
        let final: ByteBuffer
        let rejected: ByteBuffer
        let busy: ByteBuffer
        let headers: HTTPFields
    }

    /// A whole answer but its `Date`, built once.
    struct Answer: Sendable {
        let head: HTTPResponseHead
        let body: ByteBuffer

        init(_ status: HTTPResponseStatus, _ headers: HTTPFields, _ body: ByteBuffer) {
            var headers = headers
            headers[.contentLength] = String(body.readableBytes)
            headers[.server] = RelayChildChannel.serverName
            self.head = HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(headers))
            self.body = body
        }

        /// The head as it goes out.
        func dated() -> HTTPResponseHead {
            var head = head
            head.headers.add(name: "Date", value: HTTPDate.now())
            return head
        }
    }

    private struct Entry {
        let authIds: Set<String>
        let rejected: Bool
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        /// Link keys in the order they were first kept.
        var order = CircularBuffer<String>()
    }

    let final: Answer
    let rejected: Answer
    let busy: Answer
    private let capacity: Int
    private let table = Locked(Table())

    /// `pages.headers` are the pages' own; the security headers every answer carries are added here.
    init(pages: Pages, strictTransportSecurity: Bool, capacity: Int = 20_000) {
        var headers = pages.headers
        SecurityHeadersMiddleware.add(to: &headers, strictTransportSecurity: strictTransportSecurity)
        final = Answer(.ok, headers, pages.final)
        rejected = Answer(.ok, headers, pages.rejected)
        busy = Answer(.tooManyRequests, headers, pages.busy)
        self.capacity = capacity
    }

    /// Keeps an ended session's final page for its repeat landings. The oldest entry goes first.
    func remember(_ session: Session) {
        guard session.state.isTerminal, session.state != .expired else { return }
        let entry = Entry(authIds: Set(session.seenAuthIds), rejected: session.state == .cancelled)
        table.withLock { table in
            if table.entries.updateValue(entry, forKey: session.linkKey) != nil { return }
            table.order.append(session.linkKey)
            if table.order.count > capacity { table.entries[table.order.removeFirst()] = nil }
        }
    }

    /// The answer to `GET /l/{key}?…` and its link key when it is a repeat landing of an ended
    /// session, else nil.
    func answer(target: String) -> (answer: Answer, linkKey: String)? {
        guard let (key, query) = Self.split(target), key.utf8.count == SessionService.linkKeyLength,
            case .success(let parameters) = LandingParameters.parse(query: query),
            let entry = table.withLock({ $0.entries[key] }), entry.authIds.contains(parameters.authId)
        else { return nil }
        return (entry.rejected ? rejected : final, key)
    }

    /// The link key and the query of a landing target.
    static func split(_ target: String) -> (key: String, query: String)? {
        let bytes = target.utf8
        guard bytes.starts(with: "/l/".utf8) else { return nil }
        let start = bytes.index(bytes.startIndex, offsetBy: 3)
        let mark = bytes[start...].firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        let query = mark == bytes.endIndex ? "" : String(target[bytes.index(after: mark)...])
        return (String(target[start..<mark]), query)
    }
}

/// Answers repeat landings (`RepeatLandings`) before a request is turned into HTTP types: the relay's
/// cheapest answer, for the request a phone's browser may repeat most. It sits before
/// `HTTP1ToHTTPServerCodec` and passes every other request on untouched.
final class RepeatLandingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let services: ChannelServices
    /// A repeat landing's answer and whether the connection stays open, until the request's end
    /// arrives. While there is none, the request is someone else's and its parts go on.
    private var pending: (answer: RepeatLandings.Answer, keepAlive: Bool)?

    init(services: ChannelServices) {
        self.services = services
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if head.method == .GET, let (answer, key) = services.landings.answer(target: head.uri) {
                pending = (allowed(key, head, context) ? answer : services.landings.busy, head.isKeepAlive)
            } else {
                context.fireChannelRead(data)
            }
        case .body:
            if pending == nil { context.fireChannelRead(data) }
        case .end:
            guard let (answer, keepAlive) = pending else { return context.fireChannelRead(data) }
            pending = nil
            respond(answer, keepAlive: keepAlive, context)
        }
    }

    /// The same limits as every landing (see `LandingController`); counted when allowed.
    private func allowed(_ key: String, _ head: HTTPRequestHead, _ context: ChannelHandlerContext) -> Bool {
        let limits = services.limits
        let allowed = limits.allowLanding(linkKey: key) {
            limits.client(peer: context.channel.remoteAddress, forwardedFor: head.headers["X-Forwarded-For"])
        }
        if allowed { services.metrics.landingRepeated() }
        return allowed
    }

    private func respond(_ answer: RepeatLandings.Answer, keepAlive: Bool, _ context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(answer.dated())), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
        let ended = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            ended.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
