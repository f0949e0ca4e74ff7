import NIOCore

/// First on a connection's pipeline, before HTTP is decoded: when bytes arrive, for the front door's
/// timeouts. One clock read per socket read.
final class ReadClock: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// When the last read came (or the connection opened).
    private(set) var lastRead = NIODeadline.now()
    /// The first read since the front door last took a whole request (`requestEnded()`): a head is
    /// arriving since then. Nil while nothing has come.
    private(set) var requestStarted: NIODeadline?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = .now()
        if requestStarted == nil { requestStarted = lastRead }
        context.fireChannelRead(data)
    }

    func requestEnded() {
        requestStarted = nil
    }
}
