import NIOCore
import NIOEmbedded
import Testing

@testable import LinkRelayServer

/// The listening socket's handler: the connection cap, the graceful shutdown's wait, and the table of
/// open connections giving back its room after a peak.
@Suite("Open connections")
struct OpenConnectionsTests {
    /// Counts the reads that reach the socket (accepts, on a listening one).
    final class Reads: ChannelOutboundHandler {
        typealias OutboundIn = Never
        var count = 0

        func read(context: ChannelHandlerContext) {
            count += 1
            context.read()
        }
    }

    /// Records whether a connection was asked to end after its current answer.
    final class Quiesced: ChannelInboundHandler {
        typealias InboundIn = Never
        var asked = false

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is ChannelShouldQuiesceEvent { asked = true }
        }
    }

    struct Listener {
        let loop = EmbeddedEventLoop()
        let reads = Reads()
        let connections: OpenConnections
        let channel: EmbeddedChannel

        init(maximum: Int) throws {
            connections = OpenConnections(maximum: maximum)
            channel = EmbeddedChannel(loop: loop)
            try channel.pipeline.syncOperations.addHandlers([reads, connections])
        }

        /// A connection accepted, with a handler that sees the quiesce event.
        func accept() throws -> (EmbeddedChannel, Quiesced) {
            let quiesced = Quiesced()
            let connection = EmbeddedChannel(handler: quiesced, loop: loop)
            try channel.writeInbound(connection as any Channel)
            return (connection, quiesced)
        }
    }

    @Test("At the maximum no connection is accepted until one closes")
    func cap() throws {
        let listener = try Listener(maximum: 2)
        listener.channel.read()
        #expect(listener.reads.count == 1)
        let (first, _) = try listener.accept()
        _ = try listener.accept()
        listener.channel.read()
        #expect(listener.reads.count == 1, "two open: the next accept waits")
        _ = try first.finish()
        listener.loop.run()
        #expect(listener.reads.count == 2, "one closed: accepting again")
        #expect(listener.connections.count == 1)
    }

    @Test("A shutdown closes the listener, asks each connection to end, and completes when the last has closed")
    func shutdown() throws {
        let listener = try Listener(maximum: 10)
        let (first, firstQuiesced) = try listener.accept()
        let (second, secondQuiesced) = try listener.accept()
        let ended = listener.loop.makePromise(of: Void.self)
        let done = NIOLoopBoundBox(false, eventLoop: listener.loop)
        ended.futureResult.whenSuccess { done.value = true }
        listener.connections.end(listener.channel, ended)
        listener.loop.run()
        #expect(!listener.channel.isActive, "no more accepts")
        #expect(firstQuiesced.asked && secondQuiesced.asked)
        _ = try first.finish()
        listener.loop.run()
        #expect(!done.value, "one connection is still answering")
        _ = try second.finish()
        listener.loop.run()
        #expect(done.value)
    }

    @Test("A connection accepted during the shutdown is asked to end too")
    func lateConnection() throws {
        let listener = try Listener(maximum: 10)
        let (first, _) = try listener.accept()
        let ended = listener.loop.makePromise(of: Void.self)
        listener.connections.end(listener.channel, ended)
        let (late, lateQuiesced) = try listener.accept()
        listener.loop.run()
        #expect(lateQuiesced.asked)
        _ = try first.finish()
        _ = try late.finish()
        listener.loop.run()
        try ended.futureResult.wait()
    }

    @Test("After a peak of connections has gone, the table gives back its room")
    func shrinks() throws {
        let listener = try Listener(maximum: 100_000)
        var open: [EmbeddedChannel] = []
        for _ in 0..<5_000 { open.append(try listener.accept().0) }
        let peak = listener.connections.capacity
        #expect(peak >= 5_000)
        for connection in open.dropFirst(10) { _ = try connection.finish() }
        listener.loop.run()
        #expect(listener.connections.count == 10)
        #expect(
            listener.connections.capacity <= 64, "room for \(listener.connections.capacity) after a peak of \(peak)")
    }
}
