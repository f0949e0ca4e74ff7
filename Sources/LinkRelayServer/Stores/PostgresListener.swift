import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The bus between instances: on a connection of its own (never one of the pool's), `LISTEN`s to the
/// wake-ups that the PostgreSQL store sends with each write, and wakes this instance's channels of
/// that session. The store stays the truth: a wake-up only makes a channel read it.
///
/// After every connect, every channel reads its session again, since wake-ups sent while the
/// connection was down are lost. It reconnects with backoff, from 100 ms doubling to 5 s; meanwhile
/// `/readyz` answers 503.
final class PostgresListener: Service {
    let url: PostgresURL
    let hub: ChannelHub
    let logger: Logger
    private let listening = Atomic<Bool>(false)

    init(url: PostgresURL, hub: ChannelHub, logger: Logger) {
        self.url = url
        self.hub = hub
        self.logger = logger
    }

    /// Whether wake-ups from other instances reach this one now.
    var isListening: Bool { listening.load(ordering: .relaxed) }

    func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            var backoff = Duration.milliseconds(100)
            var connectionID = 0
            while !Task.isCancelled {
                connectionID += 1
                let ended = await Result {
                    let connection = try await PostgresConnection.connect(
                        configuration: try url.connectionConfiguration(), id: connectionID, logger: logger)
                    let listened = await Result {
                        try await connection.listen(on: PostgresSessionStore.channel) { notifications in
                            listening.store(true, ordering: .relaxed)
                            logger.notice("Listening to other instances' events")
                            backoff = .milliseconds(100)
                            hub.changedAll()
                            for try await notification in notifications {
                                let parts = notification.payload.split(separator: " ")
                                guard parts.count == 2, let seq = Int(parts[1]) else { continue }
                                hub.changed(sessionID: String(parts[0]), upTo: seq)
                            }
                        }
                    }
                    try? await connection.close()
                    try listened.get()
                }
                guard !Task.isCancelled else { return }
                var reason = "the server ended it"
                if case .failure(let error) = ended { reason = String(reflecting: error) }
                logger.warning(
                    "PostgreSQL listen connection lost; reconnecting",
                    metadata: ["error": .string(reason), "retry_in": "\(backoff)"])
                listening.store(false, ordering: .relaxed)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}
