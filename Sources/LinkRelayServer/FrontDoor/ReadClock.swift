import NIOCore
import NIOHTTP1

/// First on a connection's pipeline, before HTTP is decoded: when bytes arrive and how many, for the
/// front door's timeouts and bounds, and what of them reaches the decoder (`HeadFilter`). One clock read
/// per socket read, from the connection's event loop (`EventLoop.now`), so that a test on an
/// `EmbeddedEventLoop` moves it with `advanceTime(by:)`.
final class ReadClock: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The most bytes a request's head may take on the wire, its line ends included: nginx's
    /// `large_client_header_buffers 4 8k`.
    static let maximumHead = 32 * 1024

    /// When the last read came (or the connection opened).
    private(set) var lastRead = NIODeadline.uptimeNanoseconds(0)
    /// The first read since the front door last took a whole request (`requestEnded()`): a head is
    /// arriving since then. Nil while nothing has come.
    private(set) var requestStarted: NIODeadline?
    /// The bytes read since then: the request's head, and once it has come, its body with the body's
    /// framing (chunk sizes, extensions, trailers).
    private(set) var requestBytes = 0
    /// Of those, the bytes the decoder got: the head without the lines `HeadFilter` dropped.
    private(set) var decodedBytes = 0
    private var filter = HeadFilter()
    /// The front door has not yet had the request's head.
    private var awaitingHead = true
    /// The head went past `maximumHead`, or `HeadFilter` refused it: what follows is dropped, the front
    /// door answers (431 or 400) and closes.
    private var refused = false

    func handlerAdded(context: ChannelHandlerContext) {
        lastRead = context.eventLoop.now
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = context.eventLoop.now
        if requestStarted == nil { requestStarted = lastRead }
        let read = unwrapInboundIn(data)
        requestBytes += read.readableBytes
        // Counted still, for the front door's bound on what it drops after its answer.
        guard !refused else { return }
        do {
            let decoded = try filter.filter(read)
            decodedBytes += decoded.readableBytes
            if decoded.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(decoded)) }
        } catch {
            refused = true
            let refusal = error as? HeadFilter.Failure == .tooLarge
            context.fireErrorCaught(refusal ? HTTPParserError.headerOverflow : HTTPParserError.invalidHeaderToken)
            return
        }
        // Counted after the decoder has seen the read: a read may carry a whole head and a body after
        // it. While no head has come of it, every byte since the request began is the head's.
        if awaitingHead, requestBytes > Self.maximumHead {
            refused = true
            context.fireErrorCaught(HTTPParserError.headerOverflow)
        }
    }

    /// The front door has the request's head.
    func headReceived() {
        awaitingHead = false
    }

    func requestEnded() {
        requestStarted = nil
        requestBytes = 0
        decodedBytes = 0
        awaitingHead = true
    }
}
