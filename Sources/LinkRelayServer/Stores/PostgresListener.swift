import LinkRelayCore
import LinkRelaySupport
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The bus between instances: on a connection of its own (never one of the pool's), `LISTEN`s to the
/// wake-ups that the PostgreSQL store sends with each write, and hands the events they announce to
/// this instance's channels. The store stays the truth: a wake-up only says which session to read.
///
/// A wake-up for a session with a channel here that lacks its events (not one for this instance's own
/// write, whose events were handed out at commit) puts it on a list, and one reader reads the events of
/// every session on the list in one query, then hands them to the hub. Wake-ups that come while a read
/// is under way share the next one, so the reads grow fewer exactly when the instance is busiest.
///
/// After every connect, every channel reads its session again, since wake-ups sent while the
/// connection was down are lost. It reconnects with backoff, from 100 ms doubling to 5 s; meanwhile
/// `/readyz` answers 503.
final class PostgresListener: Service {
    let url: PostgresURL
    let store: PostgresSessionStore
    let hub: ChannelHub
    let logger: Logger
    private let listening = Atomic<Bool>(false)
    /// Sessions with a channel here that have been written to since the reader last read them, each
    /// with the last seq announced.
    private let unread = Locked<[String: Int]>([:])
    /// Rung after each addition to `unread`. It holds one ring at most: a read takes all there is.
    private let (rings, ring) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))

    init(url: PostgresURL, store: PostgresSessionStore, hub: ChannelHub, logger: Logger) {
        self.url = url
        self.store = store
        self.hub = hub
        self.logger = logger
    }

    /// Whether wake-ups from other instances reach this one now.
    var isListening: Bool { listening.load(ordering: .relaxed) }

    func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            await withDiscardingTaskGroup { group in
                group.addTask { await self.readUnread() }
                await listen()
                group.cancelAll()
            }
        }
    }

    /// Listens until cancelled, reconnecting whenever the connection ends.
    private func listen() async {
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
                            let sessionID = String(parts[0])
                            guard hub.lacks(sessionID: sessionID, upTo: seq) else { continue }
                            unread.withLock { $0[sessionID] = max($0[sessionID] ?? 0, seq) }
                            ring.yield()
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

    /// Until cancelled: reads every unread session's events and hands them to its channels. When the
    /// read fails, each channel is told to read its session itself (and reports a failure its own way).
    private func readUnread() async {
        for await _ in rings {
            let sessions = unread.withLock { unread in
                defer { unread = [:] }
                return unread
            }
            guard !sessions.isEmpty else { continue }
            do {
                for (sessionID, events) in try await store.events(of: Array(sessions.keys)) {
                    hub.publish(sessionID: sessionID, events: events)
                }
            } catch {
                guard !Task.isCancelled else { return }
                logger.warning("Could not read other instances' events", metadata: ["error": "\(error)"])
                for (sessionID, seq) in sessions { hub.changed(sessionID: sessionID, upTo: seq) }
            }
        }
    }
}
