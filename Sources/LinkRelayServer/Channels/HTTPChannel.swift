import Foundation
import LinkRelayCore
import NIOCore
import NIOHTTP1

/// A long-poll or an SSE stream: a channel answered over plain HTTP, on its connection's `FrontDoor`,
/// from its admission to its answer's end.
///
/// The front door hands it each step of the session's feed (`handle`); it writes the answer's parts, and
/// says when the answer is complete, for the front door to end it and take the connection back.
final class HTTPChannel {
    let transport: ChannelTransport
    private let admission: ChannelAdmission
    private let services: ChannelServices
    /// The route table's pattern of the channel's request: its answer's `route` label.
    private let route: String
    private var slot: ChannelSlot?
    private var feed: ChannelFeed?
    /// Whether the connection may carry another request after this answer.
    private(set) var keepAlive: Bool

    /// Opens the channel: writes an event stream's head, and subscribes to the session's feed, whose
    /// steps `onStep` gets on the connection's event loop.
    init(
        _ transport: ChannelTransport, _ admission: ChannelAdmission, _ slot: ChannelSlot, keepAlive: Bool,
        services: ChannelServices, route: String, context: ChannelHandlerContext,
        onStep: @escaping (ChannelFeed.Step) -> Void
    ) {
        self.transport = transport
        self.admission = admission
        self.services = services
        self.route = route
        self.slot = slot
        self.keepAlive = keepAlive
        services.metrics.channelOpened(transport)
        let now = services.clock.now()
        let wakeAt: Date?
        if transport == .sse {
            startEventStream(context)
            wakeAt = ChannelServices.firstWake(after: services.keepAliveInterval, from: now)
        } else {
            wakeAt = admission.pollTimeout > 0 ? now.addingTimeInterval(TimeInterval(admission.pollTimeout)) : nil
        }
        feed = ChannelFeed(
            store: services.store, hub: services.hub, eventLoop: context.eventLoop, sessionID: admission.sessionID,
            cursor: admission.cursor, wakeAt: wakeAt, onStep: onStep)
    }

    /// Writes what `step` asks for; true when the answer is complete (the front door then closes the
    /// channel and ends the answer).
    func handle(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) -> Bool {
        transport == .sse ? eventStreamStep(step, context) : pollStep(step, context)
    }

    /// The connection closes once the answer is out (the relay is shutting down).
    func closeAfterAnswer() {
        keepAlive = false
    }

    /// Unsubscribes and gives back the channel's place; safe to call more than once.
    func close() {
        guard let slot else { return }
        self.slot = nil
        feed?.end()
        feed = nil
        slot.release()
        services.metrics.channelClosed(transport)
    }

    // MARK: long-poll

    private func pollStep(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) -> Bool {
        // Done once a terminal event is delivered, or when the cursor is already past the last one.
        let finished = admission.hasEverything
        var events: [SessionEvent] = []
        switch step {
        case .replayed(let replayed):
            guard !replayed.isEmpty || admission.pollTimeout == 0 || finished else { return false }
            events = replayed
        case .events(let new):
            events = new
        case .tick, .failed:
            break
        case .shutdown:
            // The client is to reconnect, to this instance once it is back or to another.
            keepAlive = false
        }
        let done = events.contains(where: \.isTerminal) || (events.isEmpty && finished)
        var headers = admission.headers
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Cache-Control", value: "no-store")
        let body = SessionEvent.pollAnswerJSON(events, after: events.last?.seq ?? admission.cursor, done: done)
        let head = services.writer.head(.ok, headers, contentLength: body.count, route: route)
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        return true
    }

    // MARK: Server-Sent Events

    private func startEventStream(_ context: ChannelHandlerContext) {
        var headers = admission.headers
        headers.add(name: "Content-Type", value: "text/event-stream")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Accel-Buffering", value: "no")
        // A stream ends when its session ends or the relay shuts down; a new one takes a new connection.
        headers.add(name: "Connection", value: "close")
        keepAlive = false
        let head = services.writer.head(.ok, headers, contentLength: nil, route: route)
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        context.writeAndFlush(
            NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: "retry: 2000\n\n")))), promise: nil)
    }

    private func eventStreamStep(_ step: ChannelFeed.Step, _ context: ChannelHandlerContext) -> Bool {
        switch step {
        case .replayed(let events), .events(let events):
            guard !events.isEmpty else { return false }
            var text = context.channel.allocator.buffer(capacity: 256)
            for event in events {
                text.writeString("id: \(event.seq)\nevent: \(event.kind.type)\ndata: ")
                text.writeBytes(event.wireJSON)
                text.writeString("\n\n")
            }
            // The last event and the stream's end leave in one write.
            let terminal = events.contains(where: \.isTerminal)
            write(text, flush: !terminal, context)
            return terminal
        case .tick(let now):
            // As for a WebSocket's ping: the next wake first.
            feed?.wake(at: now.addingTimeInterval(services.keepAliveInterval))
            write(ByteBuffer(string: ": keep-alive\n\n"), flush: true, context)
            return false
        case .shutdown:
            // The browser reconnects with Last-Event-ID after this many milliseconds, spread so that a
            // restart is not met by every client at once.
            write(ByteBuffer(string: "retry: \(Int.random(in: 1000...5000))\n\n"), flush: false, context)
            return true
        case .failed:
            return true
        }
    }

    private func write(_ text: ByteBuffer, flush: Bool, _ context: ChannelHandlerContext) {
        let part = NIOAny(HTTPServerResponsePart.body(.byteBuffer(text)))
        if flush { context.writeAndFlush(part, promise: nil) } else { context.write(part, promise: nil) }
    }
}
