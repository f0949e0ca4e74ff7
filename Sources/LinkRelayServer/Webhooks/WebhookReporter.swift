import Foundation
import LinkRelayCore
import LinkRelaySupport

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
            WebhookMessage(
                type: type, sessionId: session.id, createdAt: now, payload: Self.body(type: type, session, at: now))
        }
    }

    /// `{"data","timestamp","type"}` as `RelayJSON` writes it, `data` being `SessionView` without events
    /// (keys sorted, as there): written by hand, since it is made on the tap's event loop, where
    /// `JSONEncoder` cost more than the rest of the message. Only Pre-Fill's progress goes through it.
    static func body(type: String, _ session: Session, at now: Date) -> [UInt8] {
        var data = JSONObjectWriter(capacity: 512)
        data.add("createdAt", iso8601: session.createdAt)
        data.add("expiresAt", iso8601: session.expiresAt)
        data.add("flow", session.flow.rawValue)
        data.add("possessionType", session.possession.rawValue)
        data.add("prefill", object: session.prefill.map { Array(RelayJSON.encode($0)) })
        data.add("result", object: session.result?.apiJSON)
        data.add("sessionId", session.id)
        data.add("state", session.state.rawValue)
        if let tappedAt = session.tappedAt { data.add("tappedAt", iso8601: tappedAt) }
        var body = JSONObjectWriter(capacity: 640)
        body.add("data", object: data.finish())
        body.add("timestamp", iso8601: now)
        body.add("type", type)
        return body.finish()
    }
}
