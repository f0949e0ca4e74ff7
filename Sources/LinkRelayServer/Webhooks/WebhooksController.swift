import Foundation
import LinkRelayCore

/// `GET /v1/webhooks/messages` and `POST /v1/webhooks/messages/{id}/retry` (API key, the routes' guard
/// establishes the caller): what the outbox holds of the caller's tenant, and one of its messages sent again now. 404 while the tenant has no
/// webhook; another tenant's message id is unknown (404).
final class WebhooksController: Sendable {
    let sender: WebhookSender?

    init(sender: WebhookSender?) {
        self.sender = sender
    }

    static let defaultLimit = 100
    static let maximumLimit = 1000

    /// `?state=pending|delivered|failed` (every state when absent), `?session=ses_…` (one session's),
    /// `?limit=` 1 to 1000, `?after=` the `next` of the page before; newest first. `next` is null on the
    /// last page: one message more than the limit is read to know.
    func list(_ request: RelayRequest) throws -> Reply {
        let (sender, tenant) = try configured(request)
        var listing = WebhookListing(limit: Self.defaultLimit)
        if let text = try request.queryItem("state") {
            guard let parsed = WebhookMessage.State(rawValue: text) else {
                throw Problem.badRequest("state is pending, delivered or failed.")
            }
            listing.state = parsed
        }
        if let text = try request.queryItem("session") {
            guard (1...100).contains(text.utf8.count), text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw Problem.badRequest("session is a session's id (ses_…).")
            }
            listing.sessionId = text
        }
        if let text = try request.queryItem("limit") {
            guard let number = Int(text), (1...Self.maximumLimit).contains(number) else {
                throw Problem.badRequest("limit is a number from 1 to \(Self.maximumLimit).")
            }
            listing.limit = number
        }
        if let text = try request.queryItem("after") {
            guard let cursor = WebhookCursor(text) else {
                throw Problem.badRequest("after is the next of a page of this list, as it was given.")
            }
            listing.after = cursor
        }
        return .later { [listing] in
            var more = listing
            more.limit += 1
            let messages = try await sender.outbox.webhookMessages(tenant: tenant, more)
            let page = messages.prefix(listing.limit)
            return .json(
                MessageList(
                    messages: page.map(MessageView.init),
                    next: messages.count > listing.limit ? page.last.map { WebhookCursor($0).text } : nil))
        }
    }

    /// Makes the message pending and due now, whatever its state, and wakes the sender: 202.
    func retry(_ request: RelayRequest) throws -> Reply {
        let (sender, tenant) = try configured(request)
        let id = try request.parameter("id")
        return .later {
            guard let message = try await sender.outbox.retryWebhook(id: id, tenant: tenant, now: sender.clock.now())
            else {
                throw Problem(.webhookMessageNotFound, "No webhook message has this id.")
            }
            sender.wake()
            return .json(MessageView(message), status: .accepted)
        }
    }

    private func configured(_ request: RelayRequest) throws -> (WebhookSender, tenant: String) {
        let tenant = try request.caller().tenant
        guard let sender, sender.lanes.contains(where: { $0.tenant == tenant }) else {
            throw Problem(
                .webhookMessageNotFound,
                "No webhook URL is configured for this tenant (--webhook-url, or its entry in --tenants).")
        }
        return (sender, tenant)
    }

    private struct MessageList: Encodable {
        var messages: [MessageView]
        /// The `after` of the next page; null on the last.
        var next: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(messages, forKey: .messages)
            try container.encode(next, forKey: .next)  // null, not absent: the end is said
        }

        private enum CodingKeys: String, CodingKey { case messages, next }
    }

    /// A message as the routes show it: not its body, which `GET /v1/sessions/{id}` has.
    struct MessageView: Encodable {
        var id: String
        var type: String
        var sessionId: String
        var state: WebhookMessage.State
        var createdAt: Date
        var nextAttemptAt: Date?
        var attempts: [WebhookMessage.Attempt]

        init(_ message: WebhookMessage) {
            id = message.id
            type = message.type
            sessionId = message.sessionId
            state = message.state
            createdAt = message.createdAt
            nextAttemptAt = message.state == .pending ? message.nextAttemptAt : nil
            attempts = message.attempts
        }
    }
}
