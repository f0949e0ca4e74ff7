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
        /// A connection between requests is closed after this long without a byte from its client.
        let idleTimeout: TimeAmount

        init(
            routes: Routes, errors: ErrorMapping, channels: ChannelsController, channelServices: ChannelServices,
            idleTimeout: TimeAmount = .seconds(75)
        ) {
            self.routes = routes
            self.errors = errors
            self.channels = channels
            self.channelServices = channelServices
            self.idleTimeout = idleTimeout
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
    private var state = State.idle

    init(services: Services) {
        self.services = services
    }

    /// NIO's HTTP/1 handlers, an idle timer and a front door on a new connection.
    static func configure(_ channel: any Channel, services: Services) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            // An upgrade configuration without upgraders: the relay answers WebSocket handshakes itself
            // (on any request of a connection); it only makes NIO's decoder keep what follows one.
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: true, withServerUpgrade: ([], { _ in }), withErrorHandling: true,
                withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: .init())
            try channel.pipeline.syncOperations.addHandlers([
                IdleStateHandler(readTimeout: services.idleTimeout), FrontDoor(services: services),
            ])
        }
    }

    // MARK: - reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard case .idle = state else { return }
            var request = RelayRequest(head: head, peer: context.channel.remoteAddress)
            let match = services.routes.match(head.method, request.path)
            request.parameters = match?.parameters ?? []
            state = .receiving(Incoming(request, match?.route))
        case .body(var bytes):
            guard case .receiving(let incoming) = state else { return }
            incoming.append(&bytes)
        case .end:
            guard case .receiving(let incoming) = state else { return }
            dispatch(incoming.request, incoming.route, context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            // The client closed its side: an answer being worked out still goes out, then the connection
            // closes; anything else has no one to answer.
            if case .answering(_, let task) = state {
                state = .answering(keepAlive: false, task: task)
            } else {
                close(context)
            }
            return
        }
        // Nothing read for the idle timeout: a connection between requests is closed. (Only reads are
        // watched: watching writes costs a promise and a callback for every write.)
        if event is IdleStateHandler.IdleStateEvent {
            if case .idle = state { context.close(promise: nil) }
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
        // Idle first: ending the answer may hand this handler the next request at once.
        state = .idle
        services.writer.write(answer, head: head, keepAlive: keepAlive, to: context)
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
        state = .idle
        services.writer.end(keepAlive: channel.keepAlive, context)
    }
}
