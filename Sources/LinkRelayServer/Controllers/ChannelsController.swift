import Foundation
import Hummingbird
import HummingbirdWebSocket
import LinkRelayCore

/// Desktop channels: WebSocket, Server-Sent Events and long-poll. Each replays the events after its
/// cursor, then streams live ones, and ends after a terminal event.
struct ChannelsController {
    let service: SessionService
    let hub: ChannelHub
    let allowedOrigins: Set<String>
    let limits: RequestLimits
    /// SSE keep-alive comments are written at least this often.
    var keepAliveInterval: TimeInterval = 15

    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 55
    /// The largest WebSocket frame, and message, a desktop may send (the relay expects none).
    static let maximumMessageSize = 4096

    func addRoutes(to router: Router<RelayContext>, webSocketRouter: Router<RelayContext>) {
        router.get("v1/sessions/:id/events", use: serverSentEvents)
        router.get("v1/sessions/:id/poll", use: longPoll)
        router.get("v1/sessions/:id/ws", use: webSocketWithoutUpgrade)
        for path in ["v1/sessions/:id/events", "v1/sessions/:id/poll"] {
            router.on(RouterPath(stringLiteral: path), method: .options, use: preflight)
        }
        webSocketRouter.ws("v1/sessions/:id/ws") { request, context in
            let session = try await authorize(request, context)
            // Hummingbird answers every refused upgrade with 400, whatever the reason.
            guard limits.channelFits(sessionID: session.id, request, context) else { return .dontUpgrade }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            let id = try context.requestContext.parameters.require("id")
            guard let slot = limits.openChannel(sessionID: id, context.request, context.requestContext) else {
                // Another channel took the last place since the check before the upgrade.
                try await outbound.close(.policyViolation, reason: "Too many channels")
                return
            }
            defer { slot.release() }
            try await streamWebSocket(inbound: inbound, outbound: outbound, context: context)
        }
    }

    // MARK: - checks

    /// Origin (403), session (404) and channel token (401), as API.md orders them for browsers.
    private func authorize(_ request: Request, _ context: RelayContext) async throws -> Session {
        if let origin = request.headers[.origin], !allowedOrigins.contains(origin) {
            context.logger.notice("Channel refused: origin not allowed")
            throw Problem(status: .forbidden, title: "Forbidden", detail: "This origin may not open channels.")
        }
        let id = try context.parameters.require("id")
        guard let session = try await service.store.session(id: id) else {
            throw Problem.notFound("No session with this id.")
        }
        let token = request.uri.queryParameters.get("token") ?? request.bearerToken
        guard let token, Secrets.constantTimeEquals(token, session.channelToken) else {
            throw Problem(
                status: .unauthorized, title: "Unauthorized", detail: "A valid channel token is required.",
                headers: [.wwwAuthenticate: "Bearer"])
        }
        return session
    }

    /// The cursor: `?after=N`, or SSE's `Last-Event-ID`, else 0.
    private func cursor(_ request: Request) throws -> Int {
        let raw = request.uri.queryParameters.get("after") ?? request.headers[.init("Last-Event-ID")!]
        guard let raw else { return 0 }
        guard let value = Int(raw), value >= 0 else {
            throw Problem.badRequest("after must be a whole number of at least 0.")
        }
        return value
    }

    private func corsHeaders(_ request: Request) -> HTTPFields {
        var headers: HTTPFields = [.vary: "Origin"]
        if let origin = request.headers[.origin], allowedOrigins.contains(origin) {
            headers[.accessControlAllowOrigin] = origin
        }
        return headers
    }

    @Sendable func preflight(_ request: Request, context: RelayContext) async throws -> Response {
        guard let origin = request.headers[.origin], allowedOrigins.contains(origin) else {
            throw Problem(status: .forbidden, title: "Forbidden", detail: "This origin may not open channels.")
        }
        var headers = corsHeaders(request)
        headers[.accessControlAllowMethods] = "GET, OPTIONS"
        headers[.accessControlAllowHeaders] = "Authorization, Last-Event-ID"
        headers[.accessControlMaxAge] = "600"
        return Response(status: .noContent, headers: headers)
    }

    // MARK: - WebSocket

    @Sendable func webSocketWithoutUpgrade(_ request: Request, context: RelayContext) async throws -> Response {
        _ = try await authorize(request, context)
        throw Problem(
            status: .upgradeRequired, title: "Upgrade Required", detail: "Open this URL as a WebSocket.",
            headers: [.upgrade: "websocket"])
    }

    private func streamWebSocket(
        inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
        context: WebSocketRouterContext<RelayContext>
    ) async throws {
        let id = try context.requestContext.parameters.require("id")
        var feed = EventFeed(
            store: service.store, listener: hub.listen(sessionID: id, wakeAt: nil), cursor: try cursor(context.request))
        service.metrics.channelOpened(.websocket)
        defer {
            feed.listener.finish()
            service.metrics.channelClosed(.websocket)
        }
        let listener = feed.listener
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Reading inbound answers pings, notices the client closing and holds the client to the caps:
            // a frame or message over `maximumMessageSize` closes with 1009, an unmasked frame with 1002,
            // a text message that is not UTF-8 with 1007 (the error thrown here carries the code).
            group.addTask {
                defer { listener.finish() }
                for try await _ in inbound.messages(maxSize: Self.maximumMessageSize) {}
            }
            var events = try await feed.replay()
            var closedByRelay = true
            streaming: while true {
                for event in events {
                    try await outbound.write(.text(String(decoding: RelayJSON.data(event), as: UTF8.self)))
                }
                if events.contains(where: \.isTerminal) {
                    try await outbound.close(.normalClosure, reason: nil)
                    break
                }
                switch await feed.next() {
                case .events(let next):
                    events = next
                case .tick:
                    events = []
                case .shutdown:
                    // 1012 Service Restart: the client reconnects with `?after=` (API.md).
                    try await outbound.close(.unknown(1012), reason: "Service Restart")
                    break streaming
                case .ended:
                    closedByRelay = false
                    break streaming
                }
            }
            if closedByRelay {
                group.cancelAll()
                try? await group.waitForAll()
            } else {
                try await group.waitForAll()
            }
        }
    }

    // MARK: - Server-Sent Events

    @Sendable func serverSentEvents(_ request: Request, context: RelayContext) async throws -> Response {
        let session = try await authorize(request, context)
        let after = try cursor(request)
        guard let slot = limits.openChannel(sessionID: session.id, request, context) else {
            return RequestLimits.tooManyRequests()
        }
        var headers = corsHeaders(request)
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        headers[.init("X-Accel-Buffering")!] = "no"
        // Watching for the client going away consumes the connection: it cannot carry another request.
        headers[.connection] = "close"
        let hub = self.hub
        let service = self.service
        let keepAlive = keepAliveInterval
        return Response(
            status: .ok, headers: headers,
            body: .init { writer in
                let listener = hub.listen(
                    sessionID: session.id, wakeAt: service.clock.now().addingTimeInterval(keepAlive))
                var feed = EventFeed(store: service.store, listener: listener, cursor: after)
                service.metrics.channelOpened(.sse)
                defer {
                    listener.finish()
                    slot.release()
                    service.metrics.channelClosed(.sse)
                }
                try await request.body.consumeWithInboundCloseHandler { _ in
                    try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
                    var events = try await feed.replay()
                    while true {
                        if !events.isEmpty {
                            var text = ""
                            for event in events {
                                let json = String(decoding: RelayJSON.data(event), as: UTF8.self)
                                text += "id: \(event.seq)\nevent: \(event.kind.type)\ndata: \(json)\n\n"
                            }
                            try await writer.write(ByteBuffer(string: text))
                            if events.contains(where: \.isTerminal) { return }
                        }
                        switch await feed.next() {
                        case .events(let next):
                            events = next
                        case .tick(let now):
                            try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                            listener.wake(at: now.addingTimeInterval(keepAlive))
                            events = []
                        case .shutdown:
                            // The browser reconnects with Last-Event-ID after this many milliseconds,
                            // spread so that a restart is not met by every client at once.
                            try await writer.write(ByteBuffer(string: "retry: \(Int.random(in: 1000...5000))\n\n"))
                            return
                        case .ended:
                            return
                        }
                    }
                } onInboundClosed: {
                    listener.finish()
                }
                try await writer.finish(nil)
            })
    }

    // MARK: - long-poll

    private struct PollAnswer: Encodable {
        var events: [SessionEvent]
        var after: Int
        var done: Bool
    }

    @Sendable func longPoll(_ request: Request, context: RelayContext) async throws -> Response {
        let session = try await authorize(request, context)
        let after = try cursor(request)
        var timeout = Self.defaultPollTimeout
        if let raw = request.uri.queryParameters.get("timeout") {
            guard let value = Int(raw), (0...Self.maximumPollTimeout).contains(value) else {
                throw Problem.badRequest("timeout must be whole seconds from 0 to \(Self.maximumPollTimeout).")
            }
            timeout = value
        }
        guard let slot = limits.openChannel(sessionID: session.id, request, context) else {
            return RequestLimits.tooManyRequests()
        }
        defer { slot.release() }
        let listener = hub.listen(
            sessionID: session.id, wakeAt: service.clock.now().addingTimeInterval(TimeInterval(timeout)))
        var feed = EventFeed(store: service.store, listener: listener, cursor: after)
        service.metrics.channelOpened(.longpoll)
        defer {
            listener.finish()
            service.metrics.channelClosed(.longpoll)
        }
        var events = try await feed.replay()
        let finished = session.state.isTerminal && after >= session.lastSeq
        var headers = corsHeaders(request)
        if events.isEmpty, timeout > 0, !finished {
            // Watching for the client going away consumes the connection: tell the client not to reuse it.
            headers[.connection] = "close"
            let step = try await request.body.consumeWithInboundCloseHandler { _ in
                await feed.next()
            } onInboundClosed: {
                listener.finish()
            }
            if case .events(let next) = step { events = next }
        }
        // Done once a terminal event is delivered, or when the cursor is already past the last one.
        let done = events.contains(where: \.isTerminal) || (events.isEmpty && finished)
        return try RelayJSON.response(
            PollAnswer(events: events, after: events.last?.seq ?? after, done: done), headers: headers)
    }
}

/// A session's events after a cursor, in order and without duplicates: first what the store holds,
/// then what the hub wakes the channel with. The store stays the truth: when a wake-up skips a seq,
/// the gap is read from the store.
struct EventFeed {
    enum Step: Sendable {
        case events([SessionEvent])
        case tick(Date)
        case shutdown
        case ended
    }

    let store: any SessionStore
    let listener: ChannelListener
    private(set) var cursor: Int
    private var iterator: AsyncStream<ChannelSignal>.Iterator

    init(store: any SessionStore, listener: ChannelListener, cursor: Int) {
        self.store = store
        self.listener = listener
        self.cursor = cursor
        self.iterator = listener.signals.makeAsyncIterator()
    }

    /// Everything stored after the cursor. Call after listening, so nothing falls in between.
    mutating func replay() async throws -> [SessionEvent] {
        let events = try await store.events(sessionID: listener.sessionID, after: cursor)
        cursor = events.last?.seq ?? cursor
        return events
    }

    /// Waits for the next new events or tick; `.ended` when the listener finished.
    mutating func next() async -> Step {
        while let signal = await iterator.next() {
            switch signal {
            case .tick(let now):
                return .tick(now)
            case .shutdown:
                return .shutdown
            case .events(let events):
                var fresh = events.filter { $0.seq > cursor }
                guard let first = fresh.first else { continue }
                if first.seq != cursor + 1 || fresh.last!.seq - first.seq + 1 != fresh.count {
                    guard let stored = try? await store.events(sessionID: listener.sessionID, after: cursor) else {
                        return .ended
                    }
                    fresh = stored
                }
                cursor = fresh.last?.seq ?? cursor
                if !fresh.isEmpty { return .events(fresh) }
            }
        }
        return .ended
    }
}
