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
        return .later { [self] in
            guard let problem = await storeProblem() else { return .text("ready\n") }
            return .text(problem + "\n", status: .serviceUnavailable)
        }
    }

    /// Why the store cannot serve this instance now, in `/readyz`'s words; nil when it can. The ops page's
    /// status strip says the same.
    func storeProblem() async -> String? {
        if let listener, !listener.isListening { return "not listening to other instances" }
        do {
            try await store.ping()
            return nil
        } catch StoreError.corrupt {
            return "store corrupt"
        } catch StoreError.unavailable {
            return "store cannot take writes"
        } catch {
            return "store unreachable"
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
