import Foundation
import LinkRelayCore

/// Makes the webhook messages that report a session's change, for `SessionService` to write with it.
struct WebhookReporter: Sendable {
    /// Called once the messages are committed: the sender looks for them at once.
    let committed: @Sendable () -> Void

    /// The messages for `events` (and for a bind, which has no event), each carrying the session as
    /// `GET /v1/sessions/{id}` shows it now, without its events.
    func messages(for session: Session, events: [SessionEvent], bound: Bool, at now: Date) -> [WebhookMessage] {
        var types = events.compactMap { WebhookMessage.type(reporting: $0.kind) }
        if bound { types.append(WebhookMessage.bound) }
        return types.map { type in
            let body = Body(type: type, timestamp: now, data: SessionView(session, events: nil))
            return WebhookMessage(
                type: type, sessionId: session.id, createdAt: now, payload: Array(RelayJSON.encode(body)))
        }
    }

    private struct Body: Encodable {
        var type: String
        var timestamp: Date
        var data: SessionView
    }
}
