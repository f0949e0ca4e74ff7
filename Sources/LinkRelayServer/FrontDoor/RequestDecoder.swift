import NIOCore
import NIOHTTP1

/// NIO's HTTP/1 request decoder, and a waiting head that pins only its own bytes. When a read ends in
/// the middle of a head, NIO's decoder keeps the unfinished line in the read's buffer, and
/// `ByteToMessageHandler` keeps that whole buffer (grown as later reads are added to it) until the line
/// ends. Here what is kept moves to a buffer of its own size: only a read that leaves bytes behind pays
/// for the copy, and a whole request leaves none.
struct RequestDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    let decoder: HTTPRequestDecoder

    init(limits: NIOHTTPDecoderLimitConfiguration) {
        // `forwardBytes`: after a WebSocket handshake, what the client sent behind it reaches the frame
        // decoder (`WebSocketChannelHandler.upgrade` removes this one last).
        decoder = HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits)
    }

    mutating func decoderAdded(context: ChannelHandlerContext) {
        decoder.decoderAdded(context: context)
    }

    mutating func decoderRemoved(context: ChannelHandlerContext) {
        decoder.decoderRemoved(context: context)
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let state = try decoder.decode(context: context, buffer: &buffer)
        // The decoder's positions count from the first readable byte, which the copy keeps first.
        if buffer.readableBytes > 0, buffer.capacity > 2 * buffer.readableBytes {
            var kept = context.channel.allocator.buffer(capacity: buffer.readableBytes)
            kept.writeImmutableBuffer(buffer)
            buffer = kept
        }
        return state
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws
        -> DecodingState
    {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
