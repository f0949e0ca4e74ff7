import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging

/// What a hostile or broken client did that the relay turned away: a limit, a timeout, a refused
/// origin, a WebSocket protocol error. Each is counted; each kind is logged at most once per
/// `logInterval`, with how many more came meanwhile, so that a flood cannot flood the log. No client
/// address is logged (it is personal data; the counts are what an operator acts on).
final class SecurityEvents: Sendable {
    enum Event: Sendable, Equatable {
        case limit(LimitKind)
        case headerTimeout
        case bodyTimeout
        case confirmOrigin
        case demoOrigin
        case channelOrigin
        case webSocketProtocol(code: Int)
        case opsUnauthorized

        /// The metric label, and the log line's `event`.
        var name: String {
            switch self {
            case .limit(let kind): "limit_" + kind.rawValue
            case .headerTimeout: "header_timeout"
            case .bodyTimeout: "body_timeout"
            case .confirmOrigin: "confirm_origin_refused"
            case .demoOrigin: "demo_origin_refused"
            case .channelOrigin: "channel_origin_refused"
            case .webSocketProtocol: "websocket_protocol_error"
            case .opsUnauthorized: "ops_unauthorized"
            }
        }

        var message: Logger.Message {
            switch self {
            case .limit: "Limit tripped"
            case .headerTimeout: "Connection closed: request head not received in time"
            case .bodyTimeout: "Connection closed: request body stalled"
            case .confirmOrigin: "Confirm form refused: foreign origin"
            case .demoOrigin: "Demo form refused: foreign origin"
            case .channelOrigin: "Channel refused: origin not allowed"
            case .webSocketProtocol: "WebSocket closed for a protocol error"
            case .opsUnauthorized: "Ops page refused: no valid API key"
            }
        }
    }

    static let logInterval: TimeInterval = 10

    private struct Window {
        var loggedAt: Date
        var since = 0
    }

    private let metrics: RelayMetrics
    private let logger: Logger
    private let clock: any RelayClock
    private let windows = Locked<[String: Window]>([:])

    init(metrics: RelayMetrics, logger: Logger, clock: any RelayClock) {
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
    }

    func record(_ event: Event) {
        metrics.securityEvent(event)
        let now = clock.now()
        let name = event.name
        let suppressed = windows.withLock { windows -> Int? in
            if var window = windows[name], now.timeIntervalSince(window.loggedAt) < Self.logInterval {
                window.since += 1
                windows[name] = window
                return nil
            }
            let since = windows[name]?.since ?? 0
            windows[name] = Window(loggedAt: now)
            return since
        }
        guard let suppressed else { return }
        var metadata: Logger.Metadata = ["event": .string(name)]
        if case .limit(let kind) = event { metadata["limit"] = .string(kind.rawValue) }
        if case .webSocketProtocol(let code) = event { metadata["code"] = "\(code)" }
        if suppressed > 0 { metadata["more_since_last_line"] = "\(suppressed)" }
        logger.notice(event.message, metadata: metadata)
    }
}
