import LinkRelaySupport
import NIOCore

/// On the listening socket, on its event loop: the open connections. At `maximum`, it stops accepting
/// until one closes (the kernel's backlog holds the next ones meanwhile). A client address (IPv6: a
/// /64) with `perAddress` open already has the next one closed at once, so one address cannot take the
/// relay; trusted proxies, which carry many clients, are not held to it.
final class OpenConnections: ChannelDuplexHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never

    /// What the per-address cap needs; nil when there is none (`--limits off`).
    struct PerAddress {
        let maximum: Int
        let trustedProxies: [IPNetwork]
        let securityEvents: SecurityEvents
    }

    private let maximum: Int
    private let perAddress: PerAddress?
    /// Told the count after each open and close (`linkrelay_open_connections`).
    private let counted: (@Sendable (Int) -> Void)?
    private var open: [ObjectIdentifier: any Channel] = [:]
    /// Open connections by client address (`IPAddress.rateLimitKey`), when capped.
    private var byAddress: [String: Int] = [:]
    /// A read was held back for want of room.
    private var waitingForRoom = false
    /// The graceful shutdown's promise, completed once the last connection has closed.
    private var ending: EventLoopPromise<Void>?

    init(maximum: Int, perAddress: PerAddress? = nil, counted: (@Sendable (Int) -> Void)? = nil) {
        self.maximum = maximum
        self.perAddress = perAddress
        self.counted = counted
    }

    var count: Int { open.count }
    /// How many the table has room for: after a peak it shrinks back (`closed`).
    var capacity: Int { open.capacity }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let connection = unwrapInboundIn(data)
        let id = ObjectIdentifier(connection)
        open[id] = connection
        counted?(open.count)
        let address = addressKey(connection)
        var overCap = false
        if let address, let perAddress {
            byAddress[address, default: 0] += 1
            overCap = byAddress[address, default: 0] > perAddress.maximum
        }
        let this = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        connection.closeFuture.hop(to: context.eventLoop).whenComplete { _ in
            this.value.0.closed(id, address: address, context: this.value.1)
        }
        if ending != nil { Self.quiesce(connection) }
        context.fireChannelRead(data)
        if overCap {
            perAddress?.securityEvents.record(.limit(.connectionsPerAddress))
            // Closed once it is set up, so that the close runs on its own loop like any other.
            connection.eventLoop.execute { connection.close(promise: nil) }
        }
    }

    /// The key the per-address cap counts `connection` under; nil when it is not counted.
    private func addressKey(_ connection: any Channel) -> String? {
        guard let perAddress, let peer = connection.remoteAddress.flatMap(IPAddress.init) else { return nil }
        if perAddress.trustedProxies.contains(where: { $0.contains(peer) }) { return nil }
        return peer.rateLimitKey
    }

    func read(context: ChannelHandlerContext) {
        guard open.count < maximum else {
            waitingForRoom = true
            return
        }
        context.read()
    }

    private func closed(_ id: ObjectIdentifier, address: String?, context: ChannelHandlerContext) {
        open[id] = nil
        counted?(open.count)
        open.releaseUnusedCapacity()
        if let address {
            let left = byAddress[address, default: 1] - 1
            byAddress[address] = left > 0 ? left : nil
            byAddress.releaseUnusedCapacity()
        }
        if waitingForRoom, open.count < maximum, ending == nil {
            waitingForRoom = false
            context.read()
        }
        if open.isEmpty, let ending {
            self.ending = nil
            ending.succeed()
        }
    }

    /// Closes the listening socket and asks every connection to end after its current answer.
    func end(_ listener: any Channel, _ promise: EventLoopPromise<Void>) {
        listener.close(promise: nil)
        guard !open.isEmpty else { return promise.succeed() }
        ending = promise
        for connection in open.values { Self.quiesce(connection) }
    }

    func closeAll() {
        for connection in open.values { connection.close(promise: nil) }
    }

    private static func quiesce(_ connection: any Channel) {
        connection.eventLoop.execute { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
    }
}
