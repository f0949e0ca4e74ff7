import LinkRelaySupport
import NIOCore

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
