import Foundation
import LinkRelayCore
import Logging
import ServiceLifecycle

/// Ends sessions whose hold has passed with `expired`. One loop for all sessions, on its queue (which
/// the state machine fills as it creates sessions); at start it schedules every live session from the
/// store, so expiries due during a restart run at once. A session that never landed is asked about once
/// (`Verifier.expire`), never more.
struct ExpirySweeper: Service {
    let queue: ExpiryQueue
    let verifier: Verifier
    let store: any SessionStore
    let clock: any RelayClock
    let logger: Logger
    var interval: TimeInterval = 0.25

    func run() async throws {
        do {
            for session in try await store.activeSessions() {
                queue.schedule(sessionID: session.id, at: session.expiresAt)
            }
        } catch {
            logger.error("Expiry sweeper could not read live sessions", metadata: ["error": "\(error)"])
        }
        try? await cancelWhenGracefulShutdown {
            // Each expiry in a task of its own: one that asks Prove a last question (up to 5 s) holds up
            // no other.
            try await withThrowingDiscardingTaskGroup { expiries in
                while true {
                    let now = clock.now()
                    for id in queue.due(at: now) {
                        expiries.addTask { await expire(id, at: now) }
                    }
                    var wake = now.addingTimeInterval(interval)
                    if let next = queue.next, next < wake { wake = next }
                    try await clock.sleep(until: wake)
                }
            }
        }
    }

    private func expire(_ id: String, at now: Date) async {
        do {
            try await verifier.expire(sessionID: id)
        } catch {
            // A corrupt store has said so once, critically; a line per live session every second would bury it.
            if error as? StoreError != .corrupt {
                logger.error("Could not expire a session", metadata: ["session": .string(id), "error": "\(error)"])
            }
            queue.schedule(sessionID: id, at: now.addingTimeInterval(1))
        }
    }
}
