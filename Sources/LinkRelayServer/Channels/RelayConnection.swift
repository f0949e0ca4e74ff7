import Crypto
import Foundation
import Hummingbird
import HummingbirdCore
import LinkRelayCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOWebSocket

/// What the connections' own handlers need, one object shared by all of them: each handler keeps a
/// reference, not a copy (a copy of these fields in two handlers was 0.24 KiB per waiting channel).
final class ChannelServices: Sendable {
    let gate: ChannelGate
    let hub: ChannelHub
    let store: any SessionStore
    let clock: any RelayClock
    let metrics: RelayMetrics
    let limits: RequestLimits
    /// Landings, which `LandingHandler` answers on the event loop too.
    let landing: LandingController
    let landings: RepeatLandings
    let strictTransportSecurity: Bool
    /// SSE keep-alive comments are written at least this often.
    let keepAliveInterval: TimeInterval = 15
    /// A WebSocket is pinged this often; one that has not answered the last ping by the next is closed.
    let pingInterval: TimeInterval = 20

    init(
        gate: ChannelGate, hub: ChannelHub, store: any SessionStore, clock: any RelayClock, metrics: RelayMetrics,
        limits: RequestLimits, landing: LandingController, landings: RepeatLandings, strictTransportSecurity: Bool
    ) {
        self.gate = gate
        self.hub = hub
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.limits = limits
        self.landing = landing
        self.landings = landings
        self.strictTransportSecurity = strictTransportSecurity
    }

    /// When a new channel's first keep-alive or ping is due: at a random point in the second half of
    /// `interval`. Desktops that connected together (thousands in a few seconds, under load or after a
    /// restart) would otherwise be kept alive together, every `interval`, in a few large waves that
    /// hold up the events behind them; spread, each heartbeat tick takes its share.
    static func firstWake(after interval: TimeInterval, from now: Date) -> Date {
        now.addingTimeInterval(interval * Double.random(in: 0.5...1))
    }
}

/// The relay's HTTP/1 connections.
///
/// Waiting desktops are most of the relay's connections, and each may wait minutes, so their channels
/// (`GET /v1/sessions/{id}/events|poll|ws`) are served right on the event loop: a waiting channel
/// costs its socket, a few handlers and a callback in the `ChannelHub`, not a task. Every other
/// request goes to Hummingbird's router, which a connection is handed to on its first such request.
struct RelayChildChannel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }

    /// The `Server` header of every answer.
    static let serverName = "LinkRelay"

    let http1: HTTP1Channel
    let services: ChannelServices
    var idleTimeout: TimeAmount = .seconds(75)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            // No upgraders: the relay answers WebSocket upgrades itself, on any request of a connection.
            // An upgrade configuration only makes NIO's decoder keep what follows an upgrade request.
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: true, withServerUpgrade: ([], { _ in }), withErrorHandling: true,
                withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: .init())
            try channel.pipeline.syncOperations.addHandlers([
                IdleStateHandler(readTimeout: idleTimeout),
                LandingHandler(services: services),
                HTTP1ToHTTPServerCodec(secure: false),
                RelayConnectionHandler(services: services, http1: http1, logger: logger),
            ])
            return Value(channel: channel)
        }
    }

    /// Nothing to wait for: the connection's handler serves it, and starts Hummingbird when needed.
    func handle(value: Value, logger: Logger) async {}
}

/// One connection's requests, one at a time (NIO's pipelining handler holds the next until an answer
/// ends): channel requests are answered here, the others are passed on to Hummingbird.
final class RelayConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// A long-poll or SSE channel, from its admission to its answer's end.
    private struct OpenChannel {
        let transport: ChannelTransport
        let admission: ChannelAdmission
        let slot: ChannelSlot
        var feed: ChannelFeed?
    }

    private let services: ChannelServices
    private let http1: HTTP1Channel
    private let logger: Logger
    private var handedToHummingbird = false
    /// Where the current request's body and end go.
    private var forwarding = false
    /// A channel request, until the request's end arrives.
    private var pending: (route: ChannelRoute, request: HTTPRequest)?
    private var open: OpenChannel?
    private var keepConnection = true
    /// Hummingbird is answering a request of this connection.
    private var hummingbirdAnswering = false

    init(services: ChannelServices, http1: HTTP1Channel, logger: Logger) {
        self.services = services
        self.http1 = http1
        self.logger = logger
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeOpenChannel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeOpenChannel()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client closed its side: a waiting channel has no one to answer any more.
        if case ChannelEvent.inputClosed = event, open != nil || !handedToHummingbird {
            closeOpenChannel()
            context.close(promise: nil)
            return
        }
        // Nothing read for the idle timeout: a connection between requests is closed. (Only reads are
        // watched: watching writes costs a promise and a callback for every write.)
        if event is IdleStateHandler.IdleStateEvent {
            if open == nil, pending == nil, !hummingbirdAnswering { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            keepConnection = request.headerFields[.connection]?.lowercased() != "close"
            if let route = ChannelRoute(method: request.method, target: request.path ?? "") {
                forwarding = false
                pending = (route, request)
                return
            }
            forwarding = true
            hummingbirdAnswering = true
            if !handedToHummingbird {
                do {
                    try handToHummingbird(context)
                } catch {
                    context.close(promise: nil)
                    return
                }
            }
            context.fireChannelRead(data)
        case .body:
            if forwarding { context.fireChannelRead(data) }
        case .end:
            if forwarding {
                context.fireChannelRead(data)
            } else if let (route, request) = pending {
                pending = nil
                admit(route, request, context)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
    }

    /// Hummingbird's answers pass through here on their way out.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { hummingbirdAnswering = false }
        context.write(data, promise: promise)
    }

    // MARK: - Hummingbird

    /// From now on the connection's other requests are read by Hummingbird's HTTP/1 handler, in a task
    /// of its own on the connection's event loop; channel requests are still answered here, between its
    /// requests.
    private func handToHummingbird(_ context: ChannelHandlerContext) throws {
        handedToHummingbird = true
        let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
            wrappingChannelSynchronously: context.channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        let (http1, logger) = (http1, logger)
        // This runs on the connection's loop, so the current executor is that loop's.
        Task(executorPreference: EventLoopTaskExecutor.current) {
            await http1.handle(value: asyncChannel, logger: logger)
        }
    }

    // MARK: - channels

    private func admit(_ route: ChannelRoute, _ request: HTTPRequest, _ context: ChannelHandlerContext) {
        let this = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let (gate, eventLoop, peer) = (services.gate, context.eventLoop, context.channel.remoteAddress)
        // Even when the gate answers at once, the answer comes from the event loop's queue, after this
        // read returns.
        gate.admit(route, headers: request.headerFields) { result in
            eventLoop.execute {
                let (handler, context) = this.value
                handler.admitted(result, route, request, peer: peer, context)
            }
        }
    }

    private func admitted(
        _ result: Result<ChannelAdmission, Problem>, _ route: ChannelRoute, _ request: HTTPRequest,
        peer: SocketAddress?, _ context: ChannelHandlerContext
    ) {
        guard context.channel.isActive else { return }
        let webSocketKey = route.transport == .websocket ? Self.webSocketKey(request) : nil
        if request.headerFields[.upgrade] != nil {
            // NIO's decoder reads nothing after an upgrade request, so a refused one ends the connection.
            keepConnection = false
        }
        let admission: ChannelAdmission
        switch result {
        case .failure(let problem): return answer(problem, context)
        case .success(let admitted): admission = admitted
        }
        if route.transport == .websocket, webSocketKey == nil {
            return answer(
                Problem(
                    status: .upgradeRequired, title: "Upgrade Required", detail: "Open this URL as a WebSocket.",
                    headers: [.upgrade: "websocket"]), context)
        }
        let client = services.limits.client(peer: peer, headers: request.headerFields)
        guard let slot = services.limits.openChannel(sessionID: admission.session.id, client: client) else {
            return answerTooMany(context)
        }
        if let webSocketKey {
            return upgrade(webSocketKey, admission, slot, context)
        }
        open = OpenChannel(transport: route.transport, admission: admission, slot: slot)
        services.metrics.channelOpened(route.transport)
        let now = services.clock.now()
        let wakeAt: Date?
        if route.transport == .sse {
            startEventStream(admission, context)
            wakeAt = ChannelServices.firstWake(after: services.keepAliveInterval, from: now)
        } else {
            wakeAt = admission.pollTimeout > 0 ? now.addingTimeInterval(TimeInterval(admission.pollTimeout)) : nil
        }
        open?.feed = ChannelFeed(
            store: services.store, hub: services.hub, eventLoop: context.eventLoop, sessionID: admission.session.id,
            cursor: admission.cursor, wakeAt: wakeAt
        ) { [weak self] step in
            if route.transport == .sse {
                self?.eventStreamStep(step, context)
            } else {
                self?.pollStep(step, admission, context)
            }
        }
    }

    /// Unsubscribes the open channel and gives back its place; safe to call more than once.
    private func closeOpenChannel() {
        guard let open else { return }
        self.open = nil
        open.feed?.end()
        open.slot.release()
        services.metrics.channelClosed(open.transport)
    }

    // MARK: WebSocket

    /// The client's key, when the request is a WebSocket handshake this relay speaks (RFC 6455 §4.2.1).
    private static func webSocketKey(_ request: HTTPRequest) -> String? {
        let fields = request.headerFields
        guard fields[.upgrade]?.lowercased() == "websocket",
            fields[values: .connection].contains(where: { $0.lowercased().contains("upgrade") }),
            fields[.secWebSocketVersion] == "13", let key = fields[.secWebSocketKey],
            Data(base64Encoded: key)?.count == 16
        else { return nil }
        return key
    }

    /// Answers 101 and turns the connection into a WebSocket: NIO's frame codec and a
    /// `WebSocketChannelHandler` take the HTTP handlers' place.
    private func upgrade(
        _ key: String, _ admission: ChannelAdmission, _ slot: ChannelSlot, _ context: ChannelHandlerContext
    ) {
        let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
        let headers: HTTPFields = [
            .upgrade: "websocket", .connection: "Upgrade", .secWebSocketAccept: accept.base64EncodedString(),
        ]
        let head = HTTPResponse(status: .switchingProtocols, headerFields: services.secured(headers))
        context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
        do {
            let pipeline = context.pipeline.syncOperations
            try pipeline.addHandlers(
                [
                    WebSocketFrameEncoder(),
                    ByteToMessageHandler(
                        WebSocketFrameDecoder(maxFrameSize: WebSocketChannelHandler.maximumMessageSize)),
                    WebSocketProtocolErrorHandler(),
                    WebSocketChannelHandler(services: services, admission: admission, slot: slot),
                ], position: .after(self))
            pipeline.removeHandler(context: context, promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: HTTP1ToHTTPServerCodec.self), promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: LandingHandler.self), promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: IdleStateHandler.self), promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: HTTPServerProtocolErrorHandler.self), promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: HTTPServerPipelineHandler.self), promise: nil)
            if let upgrades = try? pipeline.handler(type: HTTPServerUpgradeHandler.self) {
                pipeline.removeHandler(upgrades, promise: nil)
            }
            pipeline.removeHandler(try pipeline.handler(type: HTTPResponseEncoder.self), promise: nil)
            // Last, so that what the client sent after its request reaches the frame decoder.
            pipeline.removeHandler(
                try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self), promise: nil)
        } catch {
            slot.release()
            context.close(promise: nil)
        }
    }

    // MARK: long-poll

    private func pollStep(_ step: ChannelFeed.Step, _ admission: ChannelAdmission, _ context: ChannelHandlerContext) {
        // Done once a terminal event is delivered, or when the cursor is already past the last one.
        let finished = admission.session.state.isTerminal && admission.cursor >= admission.session.lastSeq
        var events: [SessionEvent] = []
        switch step {
        case .replayed(let replayed):
            guard !replayed.isEmpty || admission.pollTimeout == 0 || finished else { return }
            events = replayed
        case .events(let new):
            events = new
        case .tick, .failed:
            break
        case .shutdown:
            // The client is to reconnect, to this instance once it is back or to another.
            keepConnection = false
        }
        closeOpenChannel()
        let done = events.contains(where: \.isTerminal) || (events.isEmpty && finished)
        var headers = admission.headers
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        let body = SessionEvent.pollAnswerJSON(events, after: events.last?.seq ?? admission.cursor, done: done)
        answer(.ok, headers, ByteBuffer(bytes: body), context)
    }

    // MARK: Server-Sent Events

    private func startEventStream(_ admission: ChannelAdmission, _ context: ChannelHandlerContext) {
        var headers = services.secured(admission.headers)
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        headers[.init("X-Accel-Buffering")!] = "no"
        // A stream ends when its session ends or the relay shuts down; a new one takes a new connection.
        headers[.connection] = "close"
        keepConnection = false
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .ok, headerFields: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.body(ByteBuffer(string: "retry: 2000\n\n"))), promise: nil)
    }

    private func eventStreamStep(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) {
        switch step {
        case .replayed(let events), .events(let events):
            guard !events.isEmpty else { return }
            var text = context.channel.allocator.buffer(capacity: 256)
            for event in events {
                text.writeString("id: \(event.seq)\nevent: \(event.kind.type)\ndata: ")
                text.writeBytes(event.wireJSON)
                text.writeString("\n\n")
            }
            // The last event and the stream's end leave in one write.
            let body = wrapOutboundOut(.body(text))
            if events.contains(where: \.isTerminal) {
                context.write(body, promise: nil)
                endEventStream(context)
            } else {
                context.writeAndFlush(body, promise: nil)
            }
        case .tick(let now):
            // As for a WebSocket's ping: the next wake first.
            open?.feed?.wake(at: now.addingTimeInterval(services.keepAliveInterval))
            context.writeAndFlush(wrapOutboundOut(.body(ByteBuffer(string: ": keep-alive\n\n"))), promise: nil)
        case .shutdown:
            // The browser reconnects with Last-Event-ID after this many milliseconds, spread so that a
            // restart is not met by every client at once.
            let retry = "retry: \(Int.random(in: 1000...5000))\n\n"
            context.write(wrapOutboundOut(.body(ByteBuffer(string: retry))), promise: nil)
            endEventStream(context)
        case .failed:
            endEventStream(context)
        }
    }

    private func endEventStream(_ context: ChannelHandlerContext) {
        closeOpenChannel()
        finishAnswer(context)
    }

    // MARK: answers

    private func answer(_ problem: Problem, _ context: ChannelHandlerContext) {
        var headers = problem.headers
        headers[.contentType] = "application/problem+json"
        headers[.cacheControl] = "no-store"
        answer(problem.status, headers, ByteBuffer(bytes: problem.document), context)
    }

    /// The bare 429 of a limit (see `RequestLimits.tooManyRequests`).
    private func answerTooMany(_ context: ChannelHandlerContext) {
        answer(.tooManyRequests, [.cacheControl: "no-store"], ByteBuffer(), context)
    }

    private func answer(
        _ status: HTTPResponse.Status, _ headers: HTTPFields, _ body: ByteBuffer, _ context: ChannelHandlerContext
    ) {
        var headers = services.secured(headers)
        headers[.contentLength] = String(body.readableBytes)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: status, headerFields: headers))), promise: nil)
        if body.readableBytes > 0 { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        finishAnswer(context)
    }

    private func finishAnswer(_ context: ChannelHandlerContext) {
        let ended = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepConnection {
            let channel = context.channel
            ended.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

extension ChannelServices {
    /// The headers every answer carries: those `SecurityHeadersMiddleware` adds to Hummingbird's
    /// answers, and the `Date` and `Server` Hummingbird adds.
    func secured(_ headers: HTTPFields) -> HTTPFields {
        var headers = headers
        SecurityHeadersMiddleware.add(to: &headers, strictTransportSecurity: strictTransportSecurity)
        headers[.date] = HTTPDate.now()
        headers[.server] = RelayChildChannel.serverName
        return headers
    }
}

/// An event loop as a task's executor. A connection's Hummingbird task runs on the loop that reads and
/// writes the connection: each step between two awaits (a request read, the store's answer, the
/// response written) is queued on that loop instead of on Swift's global pool, which saves two thread
/// switches per request.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let (job, executor) = (UnownedJob(job), asUnownedTaskExecutor())
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}

extension EventLoopTaskExecutor {
    /// One executor per loop of NIO's shared group, made once: a task's executor preference does not
    /// keep its executor alive, and these live as long as the process.
    private static let shared = MultiThreadedEventLoopGroup.singleton.makeIterator().map(EventLoopTaskExecutor.init)

    /// The executor of the shared group's loop this thread runs, else of one of its loops.
    ///
    /// A task that prefers it runs its steps on that loop as the task's own executor. Without a
    /// preference the steps would run on the loop too (NIO is Swift's global executor here), but as
    /// the loop's serial executor, which every call into a `nonisolated` async function must leave and
    /// come back to: a job queued on the loop each time, eight per verification.
    static var current: EventLoopTaskExecutor {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        return shared.first { $0.eventLoop === loop } ?? shared[0]
    }
}
