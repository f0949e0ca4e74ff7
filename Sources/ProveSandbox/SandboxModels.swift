import Foundation

/// An Instant Link "SMS" the sandbox sent (to its outbox instead of a phone).
public struct SandboxOutboxMessage: Codable, Sendable, Equatable {
    public var phoneNumber: String
    public var text: String
    public var link: String
    public var sentAt: Date

    public init(phoneNumber: String, text: String, link: String, sentAt: Date) {
        self.phoneNumber = phoneNumber
        self.text = text
        self.link = link
        self.sentAt = sentAt
    }
}

/// `GET /sandbox/outbox` response body.
public struct SandboxOutbox: Codable, Sendable, Equatable {
    public var messages: [SandboxOutboxMessage]

    public init(messages: [SandboxOutboxMessage]) {
        self.messages = messages
    }
}
