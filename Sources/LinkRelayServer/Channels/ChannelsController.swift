import Foundation
import LinkRelayCore
import NIOHTTP1

/// The desktop channels' routes: `GET /v1/sessions/{id}/events|poll|ws` and the CORS preflight.
///
/// A channel's request passes the gate (`ChannelGate`) and the connection limits, then the connection
/// becomes the channel's: `FrontDoor` answers on its event loop, through `HTTPChannel` (SSE, long-poll)
/// or a `WebSocketChannelHandler`. A waiting channel so costs its socket and a few handlers, not a task.
final class ChannelsController: Sendable {
    let gate: ChannelGate
    let limits: RequestLimits

    init(gate: ChannelGate, limits: RequestLimits) {
        self.gate = gate
        self.limits = limits
    }

    /// What a channel's request turns into, once checked.
    enum Opening: Sendable {
        /// Refused (or a plain GET on `/ws`), for this reason. A refused upgrade closes its connection
        /// (`RelayRequest.keepAlive`).
        case refused(any Error)
        /// Nothing to open: this answer says so.
        case answered(Answer)
        case webSocket(key: String, ChannelAdmission, ChannelSlot)
        case stream(ChannelTransport, ChannelAdmission, ChannelSlot)
    }

    /// The handler of a channel route of `transport`.
    func open(_ transport: ChannelTransport) -> @Sendable (RelayRequest) throws -> Reply {
        { request in
            .channel(ChannelRequest(sessionID: try request.parameter("id"), transport: transport, request: request))
        }
    }

    /// Checks `channel` and hands `opened` what it becomes (from any thread).
    func admit(_ channel: ChannelRequest, opened: @escaping @Sendable (Opening) -> Void) {
        gate.admit(channel) { [self] verdict in opened(opening(channel, verdict)) }
    }

    private func opening(_ channel: ChannelRequest, _ verdict: ChannelGate.Verdict) -> Opening {
        let request = channel.request
        let origin = request.headers.first(name: "Origin")
        let admission: ChannelAdmission
        switch verdict {
        case .failure(let error): return .refused(gate.readable(error, origin: origin))
        case .success(let admitted): admission = admitted
        }
        let webSocketKey = channel.transport == .websocket ? Self.webSocketKey(request.headers) : nil
        if channel.transport == .websocket, webSocketKey == nil {
            let problem = Problem(.upgradeRequired, "Open this URL as a WebSocket.", headers: ["Upgrade": "websocket"])
            return .refused(gate.readable(problem, origin: origin))
        }
        // An EventSource reconnects by itself after the stream ended, with the terminal event's id: 204
        // is what stops it (HTML, "Server-sent events"), where an empty stream would bring it back.
        if channel.transport == .sse, admission.hasEverything {
            var headers = admission.headers
            headers.add(name: "Cache-Control", value: "no-store")
            return .answered(Answer(status: .noContent, headers: headers))
        }
        // A HEAD (the GET's, from the route table) opens nothing: the head the channel would start with.
        if request.method == .HEAD {
            var headers = admission.headers
            headers.add(
                name: "Content-Type", value: channel.transport == .sse ? "text/event-stream" : "application/json")
            headers.add(name: "Cache-Control", value: "no-store")
            return .answered(Answer(status: .ok, headers: headers))
        }
        guard let slot = limits.openChannel(sessionID: admission.sessionID, client: limits.client(request)) else {
            return .refused(LimitExceeded())
        }
        if let webSocketKey { return .webSocket(key: webSocketKey, admission, slot) }
        return .stream(channel.transport, admission, slot)
    }

    /// The client's key, when the request is a WebSocket handshake this relay speaks (RFC 6455 §4.2.1).
    private static func webSocketKey(_ headers: HTTPHeaders) -> String? {
        guard headers.first(name: "Upgrade")?.lowercased() == "websocket",
            headers[canonicalForm: "Connection"].contains(where: { $0.lowercased() == "upgrade" }),
            headers.first(name: "Sec-WebSocket-Version") == "13", let key = headers.first(name: "Sec-WebSocket-Key"),
            Data(base64Encoded: key)?.count == 16
        else { return nil }
        return key
    }

    /// `OPTIONS …/events|poll`: CORS for origins some tenant allows (the request itself is checked against its session's).
    func preflight(_ request: RelayRequest) throws -> Reply {
        let origin = request.headers.first(name: "Origin")
        guard let origin, gate.origins.allowsAny(origin) else {
            throw Problem.forbidden("This origin may not open channels.")
        }
        var headers = gate.corsHeaders(origin)
        headers.add(name: "Access-Control-Allow-Methods", value: "GET, POST, OPTIONS")
        headers.add(name: "Access-Control-Allow-Headers", value: "Authorization, Content-Type, Last-Event-ID")
        headers.add(name: "Access-Control-Max-Age", value: "600")
        return .now(Answer(status: .noContent, headers: headers))
    }
}
