import Foundation
import LinkRelaySupport
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The relay's listening socket. Each connection is set up on its event loop (`FrontDoor.configure`)
/// and needs nothing more: no task, no stream.
///
/// No task per connection, and no table that keeps the room of its peak: one handler on the listening
/// socket (`OpenConnections`) holds `maxConnections`, and keeps the open connections for the graceful
/// shutdown in a table that shrinks as they go (docs/front-door.md).
struct RelayServer: Service, CustomStringConvertible {
    let host: String
    let port: Int
    let maxConnections: Int
    let perAddress: OpenConnections.PerAddress?
    let frontDoor: FrontDoor.Services
    let logger: Logger
    /// Told the number of open connections whenever it changes (the main listener's metric).
    var counted: (@Sendable (Int) -> Void)? = nil
    let onRunning: @Sendable (any Channel) async -> Void

    /// The listen backlog: the kernel's own cap (`net.core.somaxconn`), so that a burst of connects
    /// waits in the kernel rather than being refused; 4096 (Linux's default since 5.4) where unknown.
    static let backlog: Int32 =
        (try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8))
        .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 4096

    /// A connection's socket reads: at most 4 KiB each (NIO's default grows to 64 KiB). No request the
    /// relay takes needs larger, and 1,800 unfinished 32 KiB heads held 120 MiB with 4 KiB reads against
    /// 149 MiB with NIO's default (`Benchmarks/heads.py`, docs/front-door.md, Bounded before read).
    ///
    /// The first read is 512 bytes: NIO keeps each connection's read buffer for its next read, for as long
    /// as the connection is open, so a waiting channel holds it for the whole hold. A backend's request fits
    /// in 512; a browser's head, larger, is read on at once into the same buffer grown to its size.
    static let reads = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 4096)

    /// How ServiceLifecycle logs it: the address, not everything the connections are served with (its
    /// pages, whose demo text holds a sandbox phone number, among them).
    var description: String { "RelayServer(host: \(host), port: \(port), maxConnections: \(maxConnections))" }

    /// Until a graceful shutdown: then it stops accepting, lets each connection finish the request it is
    /// answering (NIO's pipelining handler closes it after), and returns once all are closed. Cancelled,
    /// it closes them at once.
    func run() async throws {
        let (frontDoor, maxConnections, perAddress, counted) = (frontDoor, maxConnections, perAddress, counted)
        let listener = try await ServerBootstrap(group: NIOSingletons.posixEventLoopGroup)
            .serverChannelOption(ChannelOptions.backlog, value: Self.backlog)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        OpenConnections(maximum: maxConnections, perAddress: perAddress, counted: counted))
                }
            }
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelOption(ChannelOptions.recvAllocator, value: Self.reads)
            .childChannelInitializer { FrontDoor.configure($0, services: frontDoor) }
            .bind(host: host, port: port).get()
        let connections = try await listener.eventLoop.submit {
            NIOLoopBound(
                try listener.pipeline.syncOperations.handler(type: OpenConnections.self), eventLoop: listener.eventLoop)
        }.get()
        await onRunning(listener)

        try? await gracefulShutdown()
        let closed = listener.eventLoop.makePromise(of: Void.self)
        listener.eventLoop.execute { connections.value.end(listener, closed) }
        await withTaskCancellationHandler {
            try? await closed.futureResult.get()
        } onCancel: {
            listener.eventLoop.execute { connections.value.closeAll() }
        }
    }
}
