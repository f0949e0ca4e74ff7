import Hummingbird
import HummingbirdCore
import LinkRelayCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The relay's listening socket. Each connection is set up on its event loop (`RelayChildChannel`)
/// and needs nothing more: no task, no stream.
///
/// Hummingbird's `Server` also gave each connection a task that did nothing, and kept every open
/// connection in NIOExtras' quiescing helper, a dictionary that keeps room for its peak: after 15,000
/// WebSockets had come and gone, 0.6–0.8 MiB more stayed resident (Benchmarks/HISTORY.md). Here one
/// handler on the listening socket (`OpenConnections`) holds `maxConnections`, and keeps the open
/// connections for the graceful shutdown in a table that shrinks as they go.
struct RelayServer: Service, CustomStringConvertible {
    let host: String
    let port: Int
    let maxConnections: Int
    let child: RelayChildChannel
    let logger: Logger
    let onRunning: @Sendable (any Channel) async -> Void

    /// How ServiceLifecycle logs it: the address, not everything the connections are served with (its
    /// pages, whose demo text holds a sandbox phone number, among them).
    var description: String { "RelayServer(host: \(host), port: \(port), maxConnections: \(maxConnections))" }

    /// Until a graceful shutdown: then it stops accepting, lets each connection finish the request it is
    /// answering (NIO's pipelining handler closes it after), and returns once all are closed. Cancelled,
    /// it closes them at once.
    func run() async throws {
        let (child, logger, maxConnections) = (child, logger, maxConnections)
        let listener = try await ServerBootstrap(group: NIOSingletons.posixEventLoopGroup)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(OpenConnections(maximum: maxConnections))
                }
            }
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { child.setup(channel: $0, logger: logger).map { _ in } }
            .bind(host: host, port: port).get()
        let connections = try await listener.eventLoop.submit {
            NIOLoopBound(
                try listener.pipeline.syncOperations.handler(type: OpenConnections.self), eventLoop: listener.eventLoop)
        }.get()
        await onRunning(listener)

        try? await gracefulShutdown()
        let closed = listener.eventLoop.makePromise(of: Void.self)
        listener.eventLoop.execute { connections.value.end(listener, closed) }
        await withTaskCancellationHandler {
            try? await closed.futureResult.get()
        } onCancel: {
            listener.eventLoop.execute { connections.value.closeAll() }
        }
    }
}

/// On the listening socket, on its event loop: the open connections. At `maximum`, it stops accepting
/// until one closes (the kernel's backlog holds the next ones meanwhile).
final class OpenConnections: ChannelDuplexHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never

    private let maximum: Int
    private var open: [ObjectIdentifier: any Channel] = [:]
    /// A read was held back for want of room.
    private var waitingForRoom = false
    /// The graceful shutdown's promise, completed once the last connection has closed.
    private var ending: EventLoopPromise<Void>?

    init(maximum: Int) {
        self.maximum = maximum
    }

    var count: Int { open.count }
    /// How many the table has room for: after a peak it shrinks back (`closed`).
    var capacity: Int { open.capacity }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let connection = unwrapInboundIn(data)
        let id = ObjectIdentifier(connection)
        open[id] = connection
        let this = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        connection.closeFuture.hop(to: context.eventLoop).whenComplete { _ in
            this.value.0.closed(id, context: this.value.1)
        }
        if ending != nil { Self.quiesce(connection) }
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        guard open.count < maximum else {
            waitingForRoom = true
            return
        }
        context.read()
    }

    private func closed(_ id: ObjectIdentifier, context: ChannelHandlerContext) {
        open[id] = nil
        open.releaseUnusedCapacity()
        if waitingForRoom, open.count < maximum, ending == nil {
            waitingForRoom = false
            context.read()
        }
        if open.isEmpty, let ending {
            self.ending = nil
            ending.succeed()
        }
    }

    /// Closes the listening socket and asks every connection to end after its current answer.
    func end(_ listener: any Channel, _ promise: EventLoopPromise<Void>) {
        listener.close(promise: nil)
        guard !open.isEmpty else { return promise.succeed() }
        ending = promise
        for connection in open.values { Self.quiesce(connection) }
    }

    func closeAll() {
        for connection in open.values { connection.close(promise: nil) }
    }

    private static func quiesce(_ connection: any Channel) {
        connection.eventLoop.execute { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
    }
}

/// Answers one request that Hummingbird reads (any but a channel's) through the router, as Hummingbird's
/// `Application` would: an error the router let through is a 500, every answer gets `Date` and
/// `Server`. A request that cannot be parsed is Hummingbird's to answer (400, connection closed).
func answer(
    _ request: Request, _ writer: consuming ResponseWriter, on channel: any Channel,
    with responder: RouterResponder<RelayContext>, logger: Logger
) async throws {
    var response: Response
    do {
        response = try await responder.respond(
            to: request, context: RelayContext(source: .init(channel: channel, logger: logger)))
    } catch let error as HTTPParserError {
        throw error
    } catch {
        logger.debug("Unhandled error", metadata: ["error.type": "\(type(of: error))"])
        response = Response(status: .internalServerError)
    }
    response.headers[.date] = HTTPDate.now()
    response.headers[.server] = RelayChildChannel.serverName
    do {
        try await writer.write(response: response.head, body: response.body)
    } catch is HTTPParserError {
        // The answer has begun: Hummingbird must not write a 400 after it, so not its parse error.
        throw ParseErrorWhileAnswering()
    }
}

private struct ParseErrorWhileAnswering: Error {}
