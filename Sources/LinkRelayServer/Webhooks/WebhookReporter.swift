import Foundation
import LinkRelayCore
import LinkRelaySupport

/// Makes the webhook messages that report a session's change, for `SessionService` to write with it.
struct WebhookReporter: Sendable {
    /// Whether a tenant has a webhook now: another tenant's sessions report nothing.
    let reports: @Sendable (String) -> Bool
    /// Called once the messages are committed: the sender looks for them at once.
    let committed: @Sendable () -> Void

    /// The messages for `events` (and for a bind, which has no event), each carrying the session as
    /// `GET /v1/sessions/{id}` shows it now, without its events or a Pre-Fill individual.
    func messages(for session: Session, events: [SessionEvent], bound: Bool, at now: Date) -> [WebhookMessage] {
        guard reports(session.owner) else { return [] }
        var types = events.compactMap { WebhookMessage.type(reporting: $0.kind) }
        if bound { types.append(WebhookMessage.bound) }
        return types.map { type in
            WebhookMessage(
                type: type, sessionId: session.id, tenant: session.owner, createdAt: now,
                payload: Self.body(type: type, session, at: now))
        }
    }

    /// `{"data","timestamp","type"}` as `RelayJSON` writes it, `data` being `SessionView` without events
    /// (keys sorted, as there), and with `prefill` as `prefillJSON` has it: written by hand, since it is
    /// made on the tap's event loop, where `JSONEncoder` cost more than the rest of the message.
    static func body(type: String, _ session: Session, at now: Date) -> [UInt8] {
        var data = JSONObjectWriter(capacity: 512)
        data.add("createdAt", iso8601: session.createdAt)
        data.add("expiresAt", iso8601: session.expiresAt)
        data.add("flow", session.flow.rawValue)
        data.add("possessionType", session.possession.rawValue)
        data.add("prefill", object: session.prefill.map(prefillJSON))
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

    /// Pre-Fill's progress for a receiver: never the individual (a receiver keeps what it is sent, and
    /// the outbox keeps it for the retention), only whether the backend can read it with GET now.
    static func prefillJSON(_ progress: PrefillProgress) -> [UInt8] {
        var json = JSONObjectWriter(capacity: 192)
        if let missing = progress.challengeMissing { json.add("challengeMissing", missing) }
        if let completed = progress.completed { json.add("completed", completed) }
        json.add("individualAvailable", progress.individual != nil)
        if let erased = progress.individualErasedAt { json.add("individualErasedAt", iso8601: erased) }
        json.add("next", progress.next)
        return json.finish()
    }
}
