import Foundation
import LinkRelayCore
import NIOCore
import Synchronization

/// `/healthz`, `/readyz` and `/metrics` for operators (and their HEADs, for health checks that send
/// HEAD: the front door leaves the body out).
final class OpsController: Sendable {
    let store: any StoreHealth
    let draining: Draining
    /// With PostgreSQL: the bus from other instances, without which a tap there would not wake a channel here.
    let listener: PostgresListener?
    /// Counted by the store before each scrape (`linkrelay_sessions_in_progress`).
    let liveSessions: LiveSessions

    init(store: any StoreHealth, draining: Draining, listener: PostgresListener?, liveSessions: LiveSessions) {
        self.store = store
        self.draining = draining
        self.listener = listener
        self.liveSessions = liveSessions
    }

    func health(_ request: RelayRequest) -> Reply { .now(.text("ok\n")) }

    func readiness(_ request: RelayRequest) -> Reply {
        if draining.isDraining { return .now(.text("draining\n", status: .serviceUnavailable)) }
        if let listener, !listener.isListening {
            return .now(.text("not listening to other instances\n", status: .serviceUnavailable))
        }
        return .later { [store] in
            do {
                try await store.ping()
                return .text("ready\n")
            } catch StoreError.corrupt {
                return .text("store corrupt\n", status: .serviceUnavailable)
            } catch StoreError.unavailable {
                return .text("store cannot take writes\n", status: .serviceUnavailable)
            } catch {
                return .text("store unreachable\n", status: .serviceUnavailable)
            }
        }
    }

    /// The sessions in progress are counted first (at most every few seconds, bounded in time); a store
    /// that does not answer leaves them as last counted, and the rest is served all the same.
    func metrics(_ request: RelayRequest) -> Reply {
        .later { [liveSessions] in
            _ = try? await liveSessions.counts()
            return Answer(
                status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                body: ByteBuffer(bytes: liveSessions.metrics.registry.emitToBuffer()))
        }
    }
}
