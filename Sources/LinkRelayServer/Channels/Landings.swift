import Foundation
import HTTPTypes
import LinkRelayCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// A page as NIO's HTTP/1 encoder takes it: the head with every header but `Date`, and the body.
struct HTTP1Page: Sendable {
    let head: HTTPResponseHead
    let body: ByteBuffer

    /// Adds what every answer carries: the security headers, `Content-Length` and `Server`.
    init(_ page: Page, strictTransportSecurity: Bool) {
        var headers = page.headers
        SecurityHeadersMiddleware.add(to: &headers, strictTransportSecurity: strictTransportSecurity)
        headers[.contentLength] = String(page.body.readableBytes)
        headers[.server] = RelayChildChannel.serverName
        self.head = HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: page.status.code), headers: HTTPHeaders(headers))
        self.body = page.body
    }

    /// The head as it goes out.
    func dated() -> HTTPResponseHead {
        var head = head
        head.headers.add(name: "Date", value: HTTPDate.now())
        return head
    }
}

/// The phone's browser reloading its landing after the session ended: answered from memory, without
/// the store or a task (see `LandingHandler`).
///
/// Only what `LandingController` has already answered once as a final page is kept: an ended
/// session never changes, so an entry cannot go stale. Every other landing (the first, one of a
/// session still going, any refusal) goes to `LandingController`, which applies the same limits.
final class RepeatLandings: Sendable {
    private struct Entry {
        let authIds: Set<String>
        let rejected: Bool
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        /// Link keys in the order they were first kept.
        var order = CircularBuffer<String>()
    }

    let final: HTTP1Page
    let rejected: HTTP1Page
    let busy: HTTP1Page
    private let capacity: Int
    private let table = Locked(Table())

    /// The final page, its variant for a session the phone turned down, and the busy page, rendered once.
    init(final: Page, rejected: Page, busy: Page, strictTransportSecurity: Bool, capacity: Int = 20_000) {
        self.final = HTTP1Page(final, strictTransportSecurity: strictTransportSecurity)
        self.rejected = HTTP1Page(rejected, strictTransportSecurity: strictTransportSecurity)
        self.busy = HTTP1Page(busy, strictTransportSecurity: strictTransportSecurity)
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

    /// The answer to `GET /l/{key}?{query}` when it is a repeat landing of an ended session, else nil.
    func answer(key: String, query: String) -> HTTP1Page? {
        guard key.utf8.count == SessionService.linkKeyLength,
            case .success(let parameters) = LandingParameters.parse(query: query),
            let entry = table.withLock({ $0.entries[key] }), entry.authIds.contains(parameters.authId)
        else { return nil }
        return entry.rejected ? rejected : final
    }

    /// The link key and the query of a landing target (`/l/{key}?{query}`).
    static func split(_ target: String) -> (key: String, query: String)? {
        let bytes = target.utf8
        guard bytes.starts(with: "/l/".utf8) else { return nil }
        let start = bytes.index(bytes.startIndex, offsetBy: 3)
        let mark = bytes[start...].firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        let query = mark == bytes.endIndex ? "" : String(target[bytes.index(after: mark)...])
        return (String(target[start..<mark]), query)
    }
}

/// Answers the phone's landings (`GET` and `HEAD /l/{key}?…`) before a request is turned into HTTP
/// types, on the connection's event loop: a repeat landing of an ended session from memory
/// (`RepeatLandings`), any other through `LandingController` in a task on this loop. A landing is the
/// request a phone may repeat most and the tap every waiting desktop waits for, and Hummingbird's way
/// (its codec, router and async writer) cost a fifth of a tap's CPU (Benchmarks/HISTORY.md, round 23).
/// It sits before `HTTP1ToHTTPServerCodec` and passes every other request on untouched.
final class LandingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Landing {
        case known(HTTP1Page)
        case visit(key: String, query: String, request: HTTPRequestHead)
    }

    private let services: ChannelServices
    /// A landing until its request's end arrives. While there is none, the request is someone else's
    /// and its parts go on.
    private var pending: Landing?
    /// A landing is being answered; the connection stays open for its answer.
    private var answering = false
    private var keepAlive = true

    init(services: ChannelServices) {
        self.services = services
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard head.method == .GET || head.method == .HEAD, let (key, query) = RepeatLandings.split(head.uri)
            else { return context.fireChannelRead(data) }
            keepAlive = head.isKeepAlive
            if head.method == .GET, let known = services.landings.answer(key: key, query: query) {
                pending = .known(allowed(key, head, context) ? known : services.landings.busy)
            } else {
                pending = .visit(key: key, query: query, request: head)
            }
        case .body:
            if pending == nil { context.fireChannelRead(data) }
        case .end:
            guard let landing = pending else { return context.fireChannelRead(data) }
            pending = nil
            switch landing {
            case .known(let page): respond(page, body: true, context)
            case .visit(let key, let query, let request): visit(key, query, request, context)
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // While a landing is answered, nothing is closed under it: an idle timeout waits for the next,
        // and a client that closed its side gets its answer before the connection ends.
        if answering {
            if event is IdleStateHandler.IdleStateEvent { return }
            if case ChannelEvent.inputClosed = event {
                keepAlive = false
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The same limits as every landing (see `LandingController`); counted when allowed.
    private func allowed(_ key: String, _ head: HTTPRequestHead, _ context: ChannelHandlerContext) -> Bool {
        let limits = services.limits
        let allowed = limits.allowLanding(linkKey: key) { limits.client(peer: context.channel.remoteAddress, head) }
        if allowed { services.metrics.landingRepeated() }
        return allowed
    }

    /// Asks `LandingController` in a task that runs on this loop, and answers when it has.
    private func visit(_ key: String, _ query: String, _ request: HTTPRequestHead, _ context: ChannelHandlerContext) {
        answering = true
        let (controller, limits, peer) = (services.landing, services.limits, context.channel.remoteAddress)
        let strictTransportSecurity = services.strictTransportSecurity
        let eventLoop = context.eventLoop
        let this = NIOLoopBound((self, context), eventLoop: eventLoop)
        let head = request.method == .HEAD
        Task(executorPreference: EventLoopTaskExecutor.current) {
            let page = await controller.visit(key: key, query: query, head: head) { limits.client(peer: peer, request) }
            let answer = HTTP1Page(page, strictTransportSecurity: strictTransportSecurity)
            let respond: @Sendable () -> Void = {
                let (handler, context) = this.value
                handler.respond(answer, body: !head, context)
            }
            // The task runs on the loop it prefers; should it not, its answer is queued there.
            if eventLoop.inEventLoop { respond() } else { eventLoop.execute(respond) }
        }
    }

    private func respond(_ page: HTTP1Page, body: Bool, _ context: ChannelHandlerContext) {
        answering = false
        context.write(wrapOutboundOut(.head(page.dated())), promise: nil)
        if body { context.write(wrapOutboundOut(.body(.byteBuffer(page.body))), promise: nil) }
        let ended = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            ended.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

extension RequestLimits {
    /// The client of a request read by NIO's HTTP/1 decoder (see `client(peer:forwardedFor:)`).
    func client(peer: SocketAddress?, _ head: HTTPRequestHead) -> IPAddress? {
        client(peer: peer, forwardedFor: head.headers["X-Forwarded-For"])
    }
}
