import Logging
import NIOCore
import NIOHTTP1

/// One HTTP/1 connection's requests, one at a time (NIO's pipelining handler holds the next until an
/// answer ends): each passes the route table (`Routes`), its handler answers, and the answer goes out
/// through `ResponseWriter`; errors become answers in `ErrorMapping`. A desktop channel's request makes
/// the connection the channel's: an `HTTPChannel` holds the answer open, or a WebSocket takes over.
///
/// Everything runs on the connection's event loop; a handler that must wait (for the store, for Prove)
/// answers from a task that runs on that loop too.
final class FrontDoor: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// What every connection's front door shares, one object for all.
    final class Services: Sendable {
        let routes: Routes
        let errors: ErrorMapping
        let channels: ChannelsController
        let channelServices: ChannelServices
        let securityEvents: SecurityEvents
        /// A connection between requests is closed after this long without a byte from its client.
        let idleTimeout: TimeAmount
        /// A request's head must have come this long after its first byte (a new connection's, after it
        /// opened): nginx's `client_header_timeout`.
        let headerTimeout: TimeAmount
        /// A request's body may pause this long between two reads: nginx's `client_body_timeout`.
        let bodyTimeout: TimeAmount

        init(
            routes: Routes, errors: ErrorMapping, channels: ChannelsController, channelServices: ChannelServices,
            securityEvents: SecurityEvents, idleTimeout: TimeAmount = .seconds(75),
            headerTimeout: TimeAmount = .seconds(10),
            bodyTimeout: TimeAmount = .seconds(10)
        ) {
            self.routes = routes
            self.errors = errors
            self.channels = channels
            self.channelServices = channelServices
            self.securityEvents = securityEvents
            self.idleTimeout = idleTimeout
            self.headerTimeout = headerTimeout
            self.bodyTimeout = bodyTimeout
        }

        var writer: ResponseWriter { channelServices.writer }
    }

    /// A request whose head has come and whose body is arriving (a class, so that `State` stays small
    /// for the waiting channels that are most of the connections).
    private final class Incoming {
        var request: RelayRequest
        let route: Route?
        /// The answer decided from the head alone, for a request without a body (the guard's refusal):
        /// written at the request's end, so that the connection may take the next one.
        let decided: Answer?
        /// The body bytes that have come.
        private(set) var received = 0
        /// The head's size as the decoder got it (`HeadFilter` drops lines), without extra whitespace:
        /// worked out only for a body that takes more than one read, to tell its framing from its bytes.
        lazy var headBytes: Int = {
            let head = request.head
            return head.headers.reduce(head.method.rawValue.utf8.count + head.uri.utf8.count + 14) {
                $0 + $1.name.utf8.count + $1.value.utf8.count + 4
            }
        }()
        /// The bytes decoded for this request that are neither its head nor its body: a chunked body's
        /// chunk sizes, extensions, line ends and trailers.
        func framing(_ decodedBytes: Int) -> Int { decodedBytes - headBytes - received }

        init(_ request: RelayRequest, _ route: Route?, decided: Answer? = nil) {
            self.request = request
            self.route = route
            self.decided = decided
        }

        /// Keeps the body; false once it is past the route's maximum (nothing more is kept).
        func append(_ bytes: inout ByteBuffer) -> Bool {
            received += bytes.readableBytes
            // Taken out while it grows, so that the write does not copy it.
            guard received <= route?.maximumBody ?? 0, var body = request.body.take() else { return false }
            body.writeBuffer(&bytes)
            request.body = body
            return true
        }
    }

    private enum State {
        /// Between requests.
        case idle
        /// A request's head has come; its body is arriving.
        case receiving(Incoming)
        /// The answer is being worked out (by a task, or by the channel gate). `keepAlive`: the connection
        /// takes another request after it. `task`: cancelled when the client leaves, where the route asks.
        case answering(keepAlive: Bool, task: Task<Void, Never>?)
        /// A long-poll or SSE channel holds the answer open.
        case channel(HTTPChannel)
        /// An answer went out before the request was read whole (a refusal from its head, a body over
        /// its limit): the relay writes no more, and reads and drops what the client still sends until
        /// it closes, for at most `lingerTimeout` after `since` and `lingerBytes`, as nginx's lingering
        /// close does. Closing on bytes not yet read would reset the connection, and a reset can reach
        /// the client before it has read the answer.
        case discarding(since: NIODeadline)
        /// The connection has closed: what is still on its way is dropped.
        case closed
    }

    private let services: Services
    private let reads: ReadClock
    private var state = State.idle
    /// Since when the connection has been between requests.
    private var idleSince = NIODeadline.uptimeNanoseconds(0)
    /// A request has been answered on this connection.
    private var served = false
    /// The route table's pattern of the request being answered, or `unmatched`: its answer's `route` label.
    private var route = ResponseWriter.unmatched
    /// The one timer of the connection (`checkTimeouts`) and when it fires; nil while a channel or an
    /// answer has the connection.
    private var timer: (task: Scheduled<Void>, deadline: NIODeadline)?

    init(services: Services, reads: ReadClock) {
        self.services = services
        self.reads = reads
    }

    /// What NIO's decoder keeps of a head, within `ReadClock.maximumHead` on the wire: at most that in
    /// all, and at most 100 header lines. `HeadFilter` keeps it to less where it can follow the framing;
    /// these bound the heads it passes whole (after a chunked body on the same connection).
    static let headLimits: NIOHTTPDecoderLimitConfiguration = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = ReadClock.maximumHead
        limits.maxHeaderListSize = ReadClock.maximumHead
        limits.maxHeaderFieldCount = 100
        return limits
    }()

    /// The most bytes of a chunked body's framing (chunk sizes, extensions, line ends, trailers): far
    /// more than a sender of a few chunks needs, and a cap on chunk extensions and on bodies sent in
    /// 1-byte chunks (about 800 of them).
    static let maximumFraming = 4 * 1024
    /// After an early answer (`discarding`): the most bytes read and dropped, and for how long.
    static let lingerBytes = 64 * 1024
    static let lingerTimeout = TimeAmount.seconds(2)

    /// NIO's HTTP/1 handlers, a read clock and a front door on a new connection.
    static func configure(_ channel: any Channel, services: Services) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture { try addHandlers(channel, services: services) }
    }

    /// `configure`'s work, on the channel's event loop.
    static func addHandlers(_ channel: any Channel, services: Services) throws {
        let reads = ReadClock()
        try channel.pipeline.syncOperations.addHandler(reads)
        // NIO's HTTP/1 server handlers as `configureHTTPServerPipeline` adds them, with the relay's
        // decoder: the response encoder, the decoder, the pipelining handler, and an upgrade handler
        // without upgraders (the relay answers WebSocket handshakes itself, on any request of a
        // connection). No protocol-error handler: the front door answers what NIO cannot parse.
        let encoder = HTTPResponseEncoder(configuration: .init())
        let (decoder, pipelining) = requestHandlers()
        let upgrades = HTTPServerUpgradeHandler(
            upgraders: [], httpEncoder: encoder, extraHTTPHandlers: [decoder, pipelining]
        ) { _ in }
        try channel.pipeline.syncOperations.addHandlers([encoder, decoder, pipelining, upgrades])
        try channel.pipeline.syncOperations.addHandler(FrontDoor(services: services, reads: reads))
    }

    /// The handlers that read requests: `ChannelHold` takes them out while a channel holds the connection,
    /// and puts new ones back.
    static func requestHandlers() -> (ByteToMessageHandler<RequestDecoder>, HTTPServerPipelineHandler) {
        (ByteToMessageHandler(RequestDecoder(limits: headLimits)), HTTPServerPipelineHandler())
    }

    /// Takes the handlers that read requests out of `pipeline`, and NIO's upgrade handler if it is still
    /// there (it takes itself out after a connection's first request). The decoder goes last, so that
    /// bytes it has not decoded yet reach the handler after it.
    static func removeRequestHandlers(_ pipeline: ChannelPipeline.SynchronousOperations) throws {
        pipeline.removeHandler(try pipeline.handler(type: HTTPServerPipelineHandler.self), promise: nil)
        if let upgrades = try? pipeline.handler(type: HTTPServerUpgradeHandler.self) {
            pipeline.removeHandler(upgrades, promise: nil)
        }
        pipeline.removeHandler(try pipeline.handler(type: ByteToMessageHandler<RequestDecoder>.self), promise: nil)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // A new connection sends its first request's head within the header timeout.
        idleSince = context.eventLoop.now
        schedule(by: idleSince + services.headerTimeout, context)
    }

    // MARK: - timeouts

    /// The connection's deadline in its current state: between requests, the idle timeout (the header
    /// timeout before its first request, or once a head has begun to arrive); while a body arrives, the
    /// body timeout after the last read; after an early answer, the linger. None while an answer or a
    /// channel has the connection. The event says whether passing it is a client's fault worth counting.
    private func deadline() -> (NIODeadline, SecurityEvents.Event?)? {
        switch state {
        case .idle:
            if let started = reads.requestStarted { return (started + services.headerTimeout, .headerTimeout) }
            return (idleSince + (served ? services.idleTimeout : services.headerTimeout), nil)
        case .receiving: return (reads.lastRead + services.bodyTimeout, .bodyTimeout)
        case .discarding(let since): return (since + Self.lingerTimeout, nil)
        case .answering, .channel, .closed: return nil
        }
    }

    /// Makes sure the timer fires by `deadline`. The timer is moved only to fire sooner: when it fires,
    /// `checkTimeouts` sets it again for what is then due, so a request that completes in one read costs
    /// no timer work.
    private func schedule(by deadline: NIODeadline, _ context: ChannelHandlerContext) {
        if let timer {
            guard deadline < timer.deadline else { return }
            timer.task.cancel()
        }
        let this = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: deadline) { this.value.0.checkTimeouts(this.value.1) }
        timer = (task, deadline)
    }

    private func checkTimeouts(_ context: ChannelHandlerContext) {
        timer = nil
        guard let (due, event) = deadline() else { return }
        guard due <= context.eventLoop.now else { return schedule(by: due, context) }
        if let event { services.securityEvents.record(event) }
        close(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        switch state {
        case .receiving(let incoming) where incoming.framing(reads.decodedBytes) > Self.maximumFraming:
            // Chunk sizes and extensions past any body's need: the body is not read further.
            answerEarly(
                Problem.badRequest("The body's chunked framing is larger than the relay reads."),
                incoming.route?.audience ?? .api, context)
        case .discarding where reads.requestBytes > Self.lingerBytes:
            return close(context)
        case .idle, .receiving, .discarding, .answering, .channel, .closed:
            break
        }
        // A head or a body that did not come whole in this read: its timeout runs.
        if let (due, event) = deadline(), event != nil { schedule(by: due, context) }
        context.fireChannelReadComplete()
    }

    // MARK: - reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // A request sent behind a channel's, as the channel's hold takes the decoding out (`ChannelHold`).
            if case .channel = state { return close(context) }
            guard case .idle = state else { return }
            reads.headReceived()
            route = ResponseWriter.unmatched
            if let refusal = Self.refusal(of: head) { return answerEarly(refusal, .api, context) }
            var request = RelayRequest(head: head, peer: context.channel.remoteAddress)
            let match = services.routes.match(head.method, request.path)
            if let matched = match?.route { route = matched.pattern.description }
            request.parameters = match?.parameters ?? RouteParameters()
            received(request, match?.route, context)
        case .body(var bytes):
            guard case .receiving(let incoming) = state else { return }
            guard incoming.append(&bytes) else {
                // A chunked body past its route's maximum: cut there (one with a length never gets here).
                return answerEarly(
                    Self.tooLarge(incoming.route), incoming.route?.audience ?? .api,
                    head: incoming.request.method == .HEAD, context)
            }
        case .end:
            guard case .receiving(let incoming) = state else { return }
            reads.requestEnded()
            if let decided = incoming.decided {
                return respond(decided, head: incoming.request.method == .HEAD, incoming.request.keepAlive, context)
            }
            dispatch(incoming.request, incoming.route, context)
        }
    }

    /// A request's head has come and its route is known: what can be decided before any of its body is
    /// read is decided here. The route's guard (`Route.admit`) goes first; then a body the route does not
    /// take, or a declared length past its maximum, is refused (413); then an `Expect: 100-continue` is
    /// answered with 100, and the body is read.
    private func received(_ request: RelayRequest, _ route: Route?, _ context: ChannelHandlerContext) {
        var request = request
        let body = Self.body(of: request.head)
        let head = request.method == .HEAD
        guard let route else {
            let unmatched = services.routes.unmatched(request, errors: services.errors)
            guard body == .none else { return answerEarly(unmatched, head: head, context) }
            state = .receiving(Incoming(request, nil, decided: unmatched))
            return
        }
        if let refused = route.admit(&request) {
            guard body == .none else { return answerEarly(refused, head: head, context) }
            state = .receiving(Incoming(request, route, decided: refused))
            return
        }
        switch body {
        case .none: break
        case .length(let length) where length > route.maximumBody:
            return answerEarly(Self.tooLarge(route), route.audience, head: head, context)
        case .chunked where route.maximumBody == 0:
            return answerEarly(Self.tooLarge(route), route.audience, head: head, context)
        case .length, .chunked:
            switch Self.expectation(of: request.head) {
            case .none: break
            case .continue: writeContinue(context)
            case .unknown:
                return answerEarly(
                    Problem(.expectationFailed, "The relay meets no expectation but 100-continue."), route.audience,
                    head: head, context
                )
            }
        }
        state = .receiving(Incoming(request, route))
    }

    /// How a request's body is framed, as NIO's decoder has read its head (which refuses a
    /// `Transfer-Encoding` whose last coding is not chunked, and a length beside one).
    enum Body: Equatable {
        case none
        case length(Int)
        case chunked
    }

    static func body(of head: HTTPRequestHead) -> Body {
        if head.headers.contains(name: "Transfer-Encoding") { return .chunked }
        guard let value = head.headers.first(name: "Content-Length") else { return .none }
        // The decoder has checked that it is a number; one too large for an Int is past every limit.
        let length = Int(value.trimmingCharacters(in: .whitespaces)) ?? .max
        return length == 0 ? .none : .length(length)
    }

    enum Expectation {
        case none
        case `continue`
        case unknown
    }

    /// RFC 9110 §10.1.1: `100-continue` is the only expectation; an HTTP/1.0 request's is ignored.
    static func expectation(of head: HTTPRequestHead) -> Expectation {
        let values = head.headers[canonicalForm: "Expect"]
        guard !values.isEmpty, head.version != .http1_0 else { return .none }
        return values.allSatisfy { $0.lowercased() == "100-continue" } ? .continue : .unknown
    }

    static func tooLarge(_ route: Route?) -> Problem {
        Problem(.payloadTooLarge, "This request takes at most \(route?.maximumBody ?? 0) bytes of body.")
    }

    /// A request no route may see (RFC 9112): an HTTP/1.1 one without exactly one `Host` (§3.2), a
    /// `CONNECT` (the relay is no proxy, and an answer to it has no framing a client can rely on), an
    /// HTTP/1.0 one with `Transfer-Encoding`, whose framing §6.1 says to treat as faulty, and a transfer
    /// coding the relay does not decode (any but chunked: 501, §6.1).
    static func refusal(of head: HTTPRequestHead) -> Problem? {
        if head.method == .CONNECT {
            return Problem(.methodNotAllowed, "The relay is not a proxy.", headers: ["Allow": "GET, HEAD, POST"])
        }
        if head.version == .http1_1, head.headers[canonicalForm: "Host"].count != 1 {
            return Problem.badRequest("An HTTP/1.1 request carries exactly one Host header.")
        }
        let codings = head.headers[canonicalForm: "Transfer-Encoding"]
        if !codings.isEmpty {
            if head.version == .http1_0 {
                return Problem.badRequest("An HTTP/1.0 request has no Transfer-Encoding.")
            }
            if codings.contains(where: { $0.lowercased() != "chunked" }) {
                return Problem(.notImplemented, "The relay decodes no transfer coding but chunked.")
            }
        }
        return nil
    }

    /// The interim answer to `Expect: 100-continue`: the client may send its body.
    private func writeContinue(_ context: ChannelHandlerContext) {
        let head = HTTPResponseHead(version: .http1_1, status: .continue)
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
    }

    private func answerEarly(
        _ problem: Problem, _ audience: Route.Audience, head: Bool = false, _ context: ChannelHandlerContext
    ) {
        answerEarly(services.errors.answer(for: problem, audience: audience), head: head, context)
    }

    /// Answers before the request has been read whole, then writes no more and lingers (`discarding`):
    /// what follows on the connection cannot be trusted to be a request, or is a body not read.
    /// A HEAD (`head`) gets the head a GET would, without the body.
    private func answerEarly(_ answer: Answer, head isHead: Bool = false, _ context: ChannelHandlerContext) {
        ended()
        let now = context.eventLoop.now
        state = .discarding(since: now)
        schedule(by: now + Self.lingerTimeout, context)
        let writer = services.writer
        let head = writer.head(
            answer.status, answer.headers, contentLength: answer.body.readableBytes, closing: true, route: route)
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        if !isHead, answer.body.readableBytes > 0 {
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(answer.body))), promise: nil)
        }
        let channel = context.channel
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { _ in
            channel.close(mode: .output, promise: nil)
        }
    }

    /// NIO's decoder could not read a request (a bad chunk size, a malformed head), or the head went past
    /// its limits (431): one answer, then the connection closes. Whatever was under way for it is
    /// dropped. Any other error (a reset, a write that failed) leaves no one to answer, and NIO takes no
    /// answer outside a request: only a close.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch state {
        case .idle where error is HTTPParserError, .receiving where error is HTTPParserError:
            if case .idle = state { route = ResponseWriter.unmatched }
            let status: HTTPResponseStatus =
                error as? HTTPParserError == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
            answerEarly(Answer(status: status), context)
        case .discarding:
            // What the decoder makes of the bytes dropped after an early answer does not matter.
            break
        case .idle, .receiving, .answering, .channel, .closed:
            close(context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            // The client closed its side: an answer being worked out still goes out, then the connection
            // closes; anything else has no one to answer. A route cancelled with its client (the
            // sandbox's hang) takes this for leaving.
            if case .answering(_, let task) = state {
                task?.cancel()
                state = .answering(keepAlive: false, task: task)
            } else {
                close(context)
            }
            return
        }
        // The pipelining handler, which closes a connection once its answer is out, is away while a channel
        // holds the connection (`ChannelHold`).
        if event is ChannelShouldQuiesceEvent, case .channel(let channel) = state { channel.closeAfterAnswer() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ended()
    }

    /// The connection is gone (or has become a WebSocket): an open channel ends, a task that asked to
    /// be cancelled with its client is.
    private func ended() {
        timer?.task.cancel()
        timer = nil
        switch state {
        case .channel(let channel): channel.close()
        case .answering(_, let task): task?.cancel()
        case .idle, .receiving, .discarding, .closed: break
        }
        state = .closed
    }

    private func close(_ context: ChannelHandlerContext) {
        ended()
        context.close(promise: nil)
    }

    // MARK: - answering

    private func dispatch(_ request: RelayRequest, _ route: Route?, _ context: ChannelHandlerContext) {
        let keepAlive = request.keepAlive
        let head = request.method == .HEAD
        guard let route else {
            return respond(services.routes.unmatched(request, errors: services.errors), head: head, keepAlive, context)
        }
        switch route.reply(to: request, errors: services.errors) {
        case .now(let answer):
            respond(answer, head: head, keepAlive, context)
        case .later(let work):
            let (errors, eventLoop) = (services.errors, context.eventLoop)
            let this = NIOLoopBound((self, context), eventLoop: eventLoop)
            let task = Task(executorPreference: EventLoopTaskExecutor.current) {
                let answer = await route.answer(work, errors: errors)
                let answered: @Sendable () -> Void = { this.value.0.answered(answer, head: head, this.value.1) }
                // The task runs on the loop it prefers; should it not, its answer is queued there.
                if eventLoop.inEventLoop { answered() } else { eventLoop.execute(answered) }
            }
            // The task's first step is queued on this loop, so it answers after this read returns.
            state = .answering(keepAlive: keepAlive, task: route.cancelledWhenClientLeaves ? task : nil)
        case .channel(let channel):
            state = .answering(keepAlive: keepAlive, task: nil)
            let eventLoop = context.eventLoop
            let this = NIOLoopBound((self, context), eventLoop: eventLoop)
            services.channels.admit(channel) { opening in
                // Even when the gate answers at once, the channel opens from the loop's queue, after this
                // read returns.
                eventLoop.execute { this.value.0.open(opening, this.value.1) }
            }
        }
    }

    /// The answer of a handler's task.
    private func answered(_ answer: Answer, head: Bool, _ context: ChannelHandlerContext) {
        guard case .answering(let keepAlive, _) = state else { return }
        respond(answer, head: head, keepAlive, context)
    }

    private func respond(_ answer: Answer, head: Bool, _ keepAlive: Bool, _ context: ChannelHandlerContext) {
        if answer.dropsConnection { return close(context) }
        let route = self.route
        guard keepAlive else {
            // Nothing more is read: the connection closes once the answer is out.
            ended()
            return services.writer.write(answer, head: head, keepAlive: false, route: route, to: context)
        }
        // Idle first: ending the answer may hand this handler the next request at once.
        becomeIdle(context)
        services.writer.write(answer, head: head, keepAlive: keepAlive, route: route, to: context)
    }

    private func becomeIdle(_ context: ChannelHandlerContext) {
        state = .idle
        served = true
        idleSince = context.eventLoop.now
        schedule(by: idleSince + services.idleTimeout, context)
    }

    // MARK: - channels

    private func open(_ opening: ChannelsController.Opening, _ context: ChannelHandlerContext) {
        guard case .answering(let keepAlive, _) = state, context.channel.isActive else {
            if case .stream(_, _, let slot) = opening { slot.release() }
            if case .webSocket(_, _, let slot) = opening { slot.release() }
            return
        }
        switch opening {
        case .refused(let error):
            respond(services.errors.answer(for: error, audience: .api), head: false, keepAlive, context)
        case .answered(let answer):
            respond(answer, head: false, keepAlive, context)
        case .webSocket(let key, let admission, let slot):
            WebSocketChannelHandler.upgrade(
                key: key, admission, slot, services: services.channelServices, route: route, context: context)
        case .stream(let transport, let admission, let slot):
            state = .channel(
                HTTPChannel(
                    transport, admission, slot, keepAlive: keepAlive, services: services.channelServices,
                    route: route, context: context
                ) { [weak self] step in self?.channelStep(step, context) })
            ChannelHold.begin(context)
        }
    }

    private func channelStep(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) {
        guard case .channel(let channel) = state, channel.handle(step, context) else { return }
        channel.close()
        becomeIdle(context)
        services.writer.end(keepAlive: channel.keepAlive, context)
        if channel.keepAlive { ChannelHold.end(context) }
    }
}
