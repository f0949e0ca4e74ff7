import Foundation
import LinkRelayCore

/// What every open channel needs, one object shared by all of them: each channel keeps a reference,
/// not a copy, so a waiting channel carries one pointer for all of them.
final class ChannelServices: Sendable {
    let hub: ChannelHub
    let store: any SessionStore & InMemoryReads
    let clock: any RelayClock
    let metrics: RelayMetrics
    let writer: ResponseWriter
    let securityEvents: SecurityEvents
    /// SSE keep-alive comments are written at least this often.
    let keepAliveInterval: TimeInterval = 15
    /// A WebSocket is pinged this often; one that has not answered the last ping by the next is closed.
    let pingInterval: TimeInterval = 20

    init(
        hub: ChannelHub, store: any SessionStore & InMemoryReads, clock: any RelayClock, metrics: RelayMetrics,
        writer: ResponseWriter,
        securityEvents: SecurityEvents
    ) {
        self.hub = hub
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.writer = writer
        self.securityEvents = securityEvents
    }

    /// When a new channel's first keep-alive or ping is due: at a random point in the second half of
    /// `interval`. Desktops that connected together (thousands in a few seconds, under load or after a
    /// restart) would otherwise be kept alive together, every `interval`, in a few large waves that
    /// hold up the events behind them; spread, each heartbeat tick takes its share.
    static func firstWake(after interval: TimeInterval, from now: Date) -> Date {
        now.addingTimeInterval(interval * Double.random(in: 0.5...1))
    }
}
