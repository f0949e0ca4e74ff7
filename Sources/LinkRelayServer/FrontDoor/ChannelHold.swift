import NIOCore

/// While a long-poll or an event stream holds its connection, the connection reads no HTTP: NIO's decoder
/// and its pipelining and upgrade handlers give way to this handler, about 1.9 KiB less for each channel
/// held (docs/memory.md), and a long-poll's answer puts them back (`end`) for the connection's next request.
///
/// The client of either sends nothing while it waits (a `fetch`, an `EventSource`), so a byte from it
/// closes the connection. So does a request it sent right behind the channel's (HTTP pipelining), which
/// reaches the front door as the decoding gives way: a client asks again on a new connection for a
/// pipelined request that a closed connection did not answer (RFC 9112 §9.3.2).
final class ChannelHold: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// Takes the HTTP decoding out of the pipeline of `context`, the front door's; closes the connection
    /// if it cannot.
    static func begin(_ context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        do {
            let decoder = try pipeline.handler(type: ByteToMessageHandler<RequestDecoder>.self)
            try pipeline.addHandler(ChannelHold(), position: .after(decoder))
            try FrontDoor.removeRequestHandlers(pipeline)
        } catch {
            context.close(promise: nil)
        }
    }

    /// Puts the HTTP decoding back, once the answer's end is written: the pipelining handler must not see
    /// the end of an answer whose request it did not see.
    static func end(_ context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        do {
            let hold = try pipeline.handler(type: ChannelHold.self)
            let (decoder, pipelining) = FrontDoor.requestHandlers()
            try pipeline.addHandlers([decoder, pipelining], position: .after(hold))
            pipeline.removeHandler(hold, promise: nil)
        } catch {
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.close(promise: nil)
    }
}
