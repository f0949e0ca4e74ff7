import HummingbirdWebSocket
import NIOWebSocket

/// Closes a WebSocket with 1002 (protocol error) when the client sends an unmasked data frame, which
/// RFC 6455 §5.1 forbids. Neither SwiftNIO's frame decoder nor swift-websocket checks the mask, and
/// extensions are the one hook that sees a frame as it arrived.
///
/// It is installed without negotiation, so nothing is announced in `Sec-WebSocket-Extensions`.
/// swift-websocket answers an error thrown here with the close code SwiftNIO's error maps to; a
/// protocol-level NIOWebSocketError is the one that maps to 1002.
struct MaskedFramesOnly: WebSocketExtension {
    let name = "linkrelay-masked-frames-only"

    func processReceivedFrame(_ frame: WebSocketFrame, context: WebSocketExtensionContext) async throws
        -> WebSocketFrame
    {
        guard frame.maskKey != nil else {
            context.logger.debug("Closing a WebSocket that sent an unmasked frame")
            throw NIOWebSocketError.fragmentedControlFrame
        }
        return frame
    }

    func processFrameToSend(_ frame: WebSocketFrame, context: WebSocketExtensionContext) async throws
        -> WebSocketFrame
    {
        frame
    }

    func shutdown() async {}
}
