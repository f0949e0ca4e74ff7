import Crypto
import Foundation
import LinkRelayCore
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// A desktop's WebSocket channel, on the event loop. It sends each event as a text message and closes
/// with 1000 after a terminal one, or 1012 when the relay shuts down.
///
/// The desktop is expected to send nothing; what it sends is held to RFC 6455 and the caps: a frame or
/// message over `maximumMessageSize` closes with 1009 (NIO's decoder does this for frames), an
/// unmasked frame or one with a reserved bit set (no extension is ever negotiated) with 1002, a text
/// message that is not UTF-8 with 1007. Control frames over 125 bytes or fragmented close with 1002
/// (NIO's decoder). A close frame is answered with its own code when that code may be sent (RFC 6455
/// §7.4), with 1002 when it may not or when the payload is one byte, and with 1007 when its reason is
/// not UTF-8. `permessage-deflate` is never negotiated.
final class WebSocketChannelHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// The largest WebSocket frame, and message, a desktop may send (the relay expects none).
    static let maximumMessageSize = 4096
    /// How long the relay waits for the desktop's answer to its close frame.
    static let closeTimeout: TimeAmount = .seconds(5)

    private let services: ChannelServices
    private let admission: ChannelAdmission
    private var slot: ChannelSlot?
    private var feed: ChannelFeed?
    private var awaitingPong = false
    private var closing = false
    /// Closes the connection if the desktop does not answer the close frame; cancelled once it is
    /// closed, so the event loop does not keep every closed channel for `closeTimeout`.
    private var closeDeadline: Scheduled<Void>?
    /// The message being received: its size, and its bytes when it is text (to check UTF-8).
    private var message: (size: Int, text: ByteBuffer?)?

    init(services: ChannelServices, admission: ChannelAdmission, slot: ChannelSlot) {
        self.services = services
        self.admission = admission
        self.slot = slot
    }

    /// Answers the handshake with 101 and turns the connection into a WebSocket: NIO's frame codec and a
    /// `WebSocketChannelHandler` take the place of the HTTP handlers and of `frontDoor`, the handler of
    /// `context`.
    static func upgrade(
        key: String, _ admission: ChannelAdmission, _ slot: ChannelSlot, services: ChannelServices, route: String,
        context: ChannelHandlerContext
    ) {
        let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
        let headers: HTTPHeaders = [
            "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Accept": accept.base64EncodedString(),
        ]
        let head = services.writer.head(.switchingProtocols, headers, contentLength: nil, route: route)
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        do {
            let pipeline = context.pipeline.syncOperations
            try pipeline.addHandlers(
                [
                    WebSocketFrameEncoder(),
                    ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maximumMessageSize)),
                    WebSocketProtocolErrorHandler(),
                    WebSocketChannelHandler(services: services, admission: admission, slot: slot),
                ], position: .after(context.handler))
            pipeline.removeHandler(context: context, promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: ReadClock.self), promise: nil)
            pipeline.removeHandler(try pipeline.handler(type: HTTPResponseEncoder.self), promise: nil)
            // What the client sent after its request reaches the frame decoder.
            try FrontDoor.removeRequestHandlers(pipeline)
        } catch {
            slot.release()
            context.close(promise: nil)
        }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        services.metrics.channelOpened(.websocket)
        feed = ChannelFeed(
            store: services.store, hub: services.hub, eventLoop: context.eventLoop, sessionID: admission.sessionID,
            cursor: admission.cursor,
            wakeAt: ChannelServices.firstWake(after: services.pingInterval, from: services.clock.now())
        ) { [weak self] step in self?.step(step, context) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        closeDeadline?.cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
        closeDeadline?.cancel()
    }

    /// NIO's frame decoder refused a frame (too large, a control frame fragmented or too long): its
    /// protocol-error handler has sent the close; here it is counted.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOWebSocketError {
            services.securityEvents.record(.webSocketProtocol(code: error == .invalidFrameLength ? 1009 : 1002))
        }
        context.fireErrorCaught(error)
    }

    /// The desktop closed its side without a close frame: it is gone.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            end()
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func end() {
        guard let slot else { return }
        self.slot = nil
        feed?.end()
        feed = nil
        slot.release()
        services.metrics.channelClosed(.websocket)
    }

    private func step(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) {
        switch step {
        case .replayed(let events), .events(let events):
            for event in events {
                var text = context.channel.allocator.buffer(capacity: 256)
                text.writeBytes(event.wireJSON)
                context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: text)), promise: nil)
            }
            // The last event and the close frame leave in one write. A client that reconnected after the
            // terminal event gets the close at once, as it would have after that event.
            if events.contains(where: \.isTerminal) || (events.isEmpty && admission.hasEverything) {
                close(.normalClosure, context)
            } else {
                context.flush()
            }
        case .tick(let now):
            // The last ping went unanswered: the desktop is gone without saying so.
            if awaitingPong { return close(.goingAway, context) }
            awaitingPong = true
            // The next wake is set before the ping goes out: a desktop that sees the ping may already
            // be in the next interval.
            feed?.wake(at: now.addingTimeInterval(services.pingInterval))
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())), promise: nil)
        case .shutdown:
            // 1012 Service Restart: the client reconnects with `?after=` (API.md).
            close(.unknown(1012), context, reason: "Service Restart")
        case .failed:
            close(.unexpectedServerError, context)
        }
    }

    /// Sends a close frame and ends the channel; the connection closes when the desktop answers, or
    /// after `closeTimeout`.
    private func close(_ code: WebSocketErrorCode, _ context: ChannelHandlerContext, reason: String = "") {
        end()
        guard !closing else { return }
        switch code {
        case .protocolError: services.securityEvents.record(.webSocketProtocol(code: 1002))
        case .dataInconsistentWithMessage: services.securityEvents.record(.webSocketProtocol(code: 1007))
        case .messageTooLarge: services.securityEvents.record(.webSocketProtocol(code: 1009))
        default: break
        }
        closing = true
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        context.writeAndFlush(
            wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)), promise: nil)
        let channel = context.channel
        closeDeadline = context.eventLoop.scheduleTask(in: Self.closeTimeout) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if closing, frame.opcode != .connectionClose { return }
        guard frame.maskKey != nil, !frame.rsv1, !frame.rsv2, !frame.rsv3 else {
            return close(.protocolError, context)
        }
        switch frame.opcode {
        case .connectionClose:
            if closing {
                context.close(promise: nil)
            } else {
                // Answer with the desktop's own code when it is one a peer may send, then close.
                let (code, broken) = Self.answer(toClose: frame.unmaskedData)
                if broken { services.securityEvents.record(.webSocketProtocol(code: Int(code))) }
                end()
                closing = true
                var data = context.channel.allocator.buffer(capacity: 2)
                data.writeInteger(code)
                let channel = context.channel
                context.writeAndFlush(
                    wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))
                ).whenComplete { _ in channel.close(promise: nil) }
            }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            awaitingPong = false
        case .text, .binary, .continuation:
            receive(frame, context)
        default:
            close(.protocolError, context)
        }
    }

    /// The code that answers a close frame's payload (RFC 6455 §5.5.1, §7.4): none given, 1000; one
    /// byte, 1002; a reason that is not UTF-8, 1007; a code no endpoint may send (below 1000, 1004–1006,
    /// 1015, the unassigned 1016–2999, or 5000 and up), 1002; else the desktop's own code. `broken`:
    /// the desktop broke the protocol.
    static func answer(toClose payload: ByteBuffer) -> (code: UInt16, broken: Bool) {
        var payload = payload
        guard payload.readableBytes > 0 else { return (1000, false) }
        guard let code = payload.readInteger(as: UInt16.self) else { return (1002, true) }
        guard String(validating: payload.readableBytesView, as: UTF8.self) != nil else { return (1007, true) }
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return (code, false)
        default: return (1002, true)
        }
    }

    /// Holds a data frame to the message caps; the message itself is dropped.
    private func receive(_ frame: WebSocketFrame, _ context: ChannelHandlerContext) {
        var message = self.message ?? (0, frame.opcode == .text ? ByteBuffer() : nil)
        if (frame.opcode == .continuation) != (self.message != nil) { return close(.protocolError, context) }
        message.size += frame.length
        guard message.size <= Self.maximumMessageSize else { return close(.messageTooLarge, context) }
        if message.text != nil {
            var data = frame.unmaskedData
            message.text?.writeBuffer(&data)
        }
        guard frame.fin else {
            self.message = message
            return
        }
        self.message = nil
        if let text = message.text, String(validating: text.readableBytesView, as: UTF8.self) == nil {
            close(.dataInconsistentWithMessage, context)
        }
    }
}
