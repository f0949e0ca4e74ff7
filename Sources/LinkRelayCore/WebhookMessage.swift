import Foundation

/// One event reported to the integrator's webhook URL (API.md v1.1 "Webhooks"): written to the outbox in
/// the transaction that records the event, then sent until a receiver takes it or 24 hours pass.
public struct WebhookMessage: Sendable, Equatable {
    public enum State: String, Sendable, Codable, CaseIterable {
        case pending, delivered, failed
    }

    /// One try at sending the message.
    public struct Attempt: Sendable, Equatable, Codable {
        public var at: Date
        /// The receiver's HTTP status; nil when no answer came.
        public var status: Int?
        /// Why the attempt did not count as delivered; nil when it did.
        public var error: String?
        public var durationMs: Int

        public init(at: Date, status: Int?, error: String?, durationMs: Int) {
            self.at = at
            self.status = status
            self.error = error
            self.durationMs = durationMs
        }
    }

    /// The `webhook-id`, the same on every attempt: see `newID(at:)`.
    public var id: String
    /// `session.tapped`, `session.verified`, …
    public var type: String
    public var sessionId: String
    /// The session's tenant: its webhook URL and secret send the message, and only its keys list it.
    public var tenant: String
    public var createdAt: Date
    /// The exact body that is signed and sent, written once when the event happens.
    public var payload: [UInt8]
    public var state: State
    /// While pending: when the next attempt is due (or, while one runs, when its lease ends).
    public var nextAttemptAt: Date
    public var attempts: [Attempt]

    public init(
        id: String? = nil, type: String, sessionId: String, tenant: String = Tenant.defaultName, createdAt: Date,
        payload: [UInt8], state: State = .pending, nextAttemptAt: Date? = nil, attempts: [Attempt] = []
    ) {
        self.id = id ?? Self.newID(at: createdAt)
        self.type = type
        self.sessionId = sessionId
        self.tenant = tenant
        self.createdAt = createdAt
        self.payload = payload
        self.state = state
        self.nextAttemptAt = nextAttemptAt ?? createdAt
        self.attempts = attempts
    }

    /// `msg_`, the creation time's milliseconds in 8 characters that sort as they come, then 14 random
    /// characters (83 bits): ids of successive messages sort after each other, as KSUIDs do, so an outbox
    /// index by id grows at one end instead of touching a page at random for each message.
    public static func newID(at createdAt: Date) -> String {
        var millis = UInt64(max(0, createdAt.timeIntervalSince1970 * 1000))
        var time = [UInt8](repeating: 0, count: 8)
        for index in time.indices.reversed() {
            time[index] = sortedDigits[Int(millis % 62)]
            millis /= 62
        }
        return "msg_" + String(decoding: time, as: UTF8.self) + Secrets.token(length: 14)
    }

    /// Base 62 in ASCII order.
    private static let sortedDigits = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)

    /// The message type that reports `kind`; nil for `waiting`, which the integrator's own create call saw.
    public static func type(reporting kind: SessionEvent.Kind) -> String? {
        switch kind {
        case .waiting: nil
        case .tapped: "session.tapped"
        case .result(let outcome): "session." + outcome.rawValue
        case .expired: "session.expired"
        case .cancelled: "session.cancelled"
        }
    }

    /// Reported when a bind's answer is kept on the session (no channel event goes with it).
    public static let bound = "session.bound"
}
