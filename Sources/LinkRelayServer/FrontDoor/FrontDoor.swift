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

        init(_ request: RelayRequest, _ route: Route?) {
            self.request = request
            self.route = route
        }

        /// Keeps the body up to the route's maximum; past it, the handler gets nil.
        func append(_ bytes: inout ByteBuffer) {
            // Taken out while it grows, so that the write does not copy it.
            guard var body = request.body.take(),
                body.readableBytes + bytes.readableBytes <= route?.maximumBody ?? 0
            else { return }
            body.writeBuffer(&bytes)
            request.body = body
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
        /// The connection has closed: what is still on its way is dropped.
        case closed
    }

    private let services: Services
    private let reads: ReadClock
    private var state = State.idle
    /// Since when the connection has been between requests.
    private var idleSince = NIODeadline.now()
    /// A request has been answered on this connection.
    private var served = false
    /// The one timer of the connection (`checkTimeouts`) and when it fires; nil while a channel or an
    /// answer has the connection.
    private var timer: (task: Scheduled<Void>, deadline: NIODeadline)?

    init(services: Services, reads: ReadClock) {
        self.services = services
        self.reads = reads
    }

    /// NIO's HTTP/1 handlers, a read clock and a front door on a new connection.
    static func configure(_ channel: any Channel, services: Services) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            let reads = ReadClock()
            try channel.pipeline.syncOperations.addHandler(reads)
            // An upgrade configuration without upgraders: the relay answers WebSocket handshakes itself
            // (on any request of a connection); it only makes NIO's decoder keep what follows one.
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: true, withServerUpgrade: ([], { _ in }), withErrorHandling: false,
                withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: .init())
            try channel.pipeline.syncOperations.addHandler(FrontDoor(services: services, reads: reads))
        }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // A new connection sends its first request's head within the header timeout.
        schedule(by: idleSince + services.headerTimeout, context)
    }

    // MARK: - timeouts

    /// The connection's deadline in its current state: between requests, the idle timeout (the header
    /// timeout before its first request, or once a head has begun to arrive); while a body arrives, the
    /// body timeout after the last read. None while an answer or a channel has the connection. The
    /// event says whether passing it is a client's fault worth counting.
    private func deadline() -> (NIODeadline, SecurityEvents.Event?)? {
        switch state {
        case .idle:
            if let started = reads.requestStarted { return (started + services.headerTimeout, .headerTimeout) }
            return (idleSince + (served ? services.idleTimeout : services.headerTimeout), nil)
        case .receiving: return (reads.lastRead + services.bodyTimeout, .bodyTimeout)
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
        guard due <= .now() else { return schedule(by: due, context) }
        if let event { services.securityEvents.record(event) }
        close(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // A head or a body that did not come whole in this read: its timeout runs.
        if let (due, event) = deadline(), event != nil { schedule(by: due, context) }
        context.fireChannelReadComplete()
    }

    // MARK: - reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard case .idle = state else { return }
            if let refusal = Self.refusal(of: head) { return refuse(refusal, context) }
            var request = RelayRequest(head: head, peer: context.channel.remoteAddress)
            let match = services.routes.match(head.method, request.path)
            request.parameters = match?.parameters ?? RouteParameters()
            state = .receiving(Incoming(request, match?.route))
        case .body(var bytes):
            guard case .receiving(let incoming) = state else { return }
            incoming.append(&bytes)
        case .end:
            guard case .receiving(let incoming) = state else { return }
            reads.requestEnded()
            dispatch(incoming.request, incoming.route, context)
        }
    }

    /// A request no route may see (RFC 9112): an HTTP/1.1 one without exactly one `Host` (§3.2), a
    /// `CONNECT` (the relay is no proxy, and an answer to it has no framing a client can rely on).
    static func refusal(of head: HTTPRequestHead) -> Problem? {
        if head.method == .CONNECT {
            return Problem(
                status: .methodNotAllowed, title: "Method Not Allowed", detail: "The relay is not a proxy.",
                headers: ["Allow": "GET, HEAD, POST"])
        }
        if head.version == .http1_1, head.headers[canonicalForm: "Host"].count != 1 {
            return Problem.badRequest("An HTTP/1.1 request carries exactly one Host header.")
        }
        return nil
    }

    /// Answers a request that cannot be served, then closes: what follows it on the connection cannot
    /// be trusted to be a request.
    private func refuse(_ problem: Problem, _ context: ChannelHandlerContext) {
        state = .answering(keepAlive: false, task: nil)
        respond(services.errors.answer(for: problem, audience: .api), head: false, false, context)
    }

    /// NIO's decoder could not read a request (a bad chunk size, a malformed head): one 400, then the
    /// connection closes. Whatever was under way for it is dropped. Any other error (a reset, a write
    /// that failed) leaves no one to answer, and NIO takes no answer outside a request: only a close.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch state {
        case .idle where error is HTTPParserError, .receiving where error is HTTPParserError:
            ended()
            services.writer.write(Answer(status: .badRequest), keepAlive: false, to: context)
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
        case .idle, .receiving, .closed: break
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
        var request = request
        if let refusal = route.admit(&request) { return respond(refusal, head: head, keepAlive, context) }
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
        guard keepAlive else {
            // Nothing more is read: the connection closes once the answer is out.
            ended()
            return services.writer.write(answer, head: head, keepAlive: false, to: context)
        }
        // Idle first: ending the answer may hand this handler the next request at once.
        becomeIdle(context)
        services.writer.write(answer, head: head, keepAlive: keepAlive, to: context)
    }

    private func becomeIdle(_ context: ChannelHandlerContext) {
        state = .idle
        served = true
        idleSince = .now()
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
        case .refused(let error, let closes):
            respond(services.errors.answer(for: error, audience: .api), head: false, keepAlive && !closes, context)
        case .answered(let answer):
            respond(answer, head: false, keepAlive, context)
        case .webSocket(let key, let admission, let slot):
            WebSocketChannelHandler.upgrade(
                key: key, admission, slot, services: services.channelServices, context: context)
        case .stream(let transport, let admission, let slot):
            state = .channel(
                HTTPChannel(
                    transport, admission, slot, keepAlive: keepAlive, services: services.channelServices,
                    context: context
                ) { [weak self] step in self?.channelStep(step, context) })
        }
    }

    private func channelStep(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) {
        guard case .channel(let channel) = state, channel.handle(step, context) else { return }
        channel.close()
        becomeIdle(context)
        services.writer.end(keepAlive: channel.keepAlive, context)
    }
}
