import Logging
import PostgresNIO
import ServiceLifecycle

/// The bus between instances: on a connection of its own (never one of the pool's), `LISTEN`s to the
/// wake-ups that the PostgreSQL store sends with each write, and wakes this instance's channels of
/// that session. The store stays the truth: a wake-up only makes a channel read it.
///
/// After every connect, every channel reads its session again, since wake-ups sent while the
/// connection was down are lost. It reconnects with backoff, from 100 ms doubling to 5 s.
struct PostgresListener: Service {
    let url: PostgresURL
    let hub: ChannelHub
    let logger: Logger
    /// Called with true once listening, false when the connection is lost.
    var onListening: @Sendable (Bool) -> Void = { _ in }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var backoff = Duration.milliseconds(100)
            var connectionID = 0
            while !Task.isCancelled {
                connectionID += 1
                do {
                    let connection = try await PostgresConnection.connect(
                        configuration: try url.connectionConfiguration(), id: connectionID, logger: logger)
                    defer { Task { try? await connection.close() } }
                    try await connection.listen(on: PostgresSessionStore.channel) { notifications in
                        onListening(true)
                        backoff = .milliseconds(100)
                        hub.changedAll()
                        for try await notification in notifications {
                            let parts = notification.payload.split(separator: " ")
                            guard parts.count == 2, let seq = Int(parts[1]) else { continue }
                            hub.changed(sessionID: String(parts[0]), upTo: seq)
                        }
                    }
                } catch {
                    guard !Task.isCancelled else { return }
                    logger.warning(
                        "PostgreSQL listen connection lost; reconnecting",
                        metadata: ["error": "\(String(reflecting: error))", "retry_in": "\(backoff)"])
                }
                onListening(false)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}
