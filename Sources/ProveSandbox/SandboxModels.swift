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

// MARK: Pre-Fill (/v3/start flow) models, prove-api.md §4

struct StartRequest: Codable, Sendable {
    var flowType: String
    var finalTargetUrl: String?
    var phoneNumber: String?
    var ssn: String?
    var dob: String?
    var emailAddress: String?
    var ipAddress: String?
    var smsMessage: String?
    var allowOTPRetry: Bool?
}

struct StartResponse: Codable, Sendable, Equatable {
    var next: [String: String]
    var authToken: String
    var correlationId: String
}

struct CorrelationRequest: Codable, Sendable {
    var correlationId: String
}

struct ValidateResponse: Codable, Sendable, Equatable {
    var success: Bool
    var challengeMissing: Bool
    var next: [String: String]
    var phoneNumber: String?
}

struct ChallengeRequest: Codable, Sendable {
    var correlationId: String
    var dob: String?
    var ssn: String?
}

struct PrefillAddress: Codable, Sendable, Equatable {
    var address: String?
    var extendedAddress: String?
    var city: String?
    var region: String?
    var postalCode: String?
}

struct PrefillIndividual: Codable, Sendable, Equatable {
    var firstName: String?
    var lastName: String?
    var dob: String?
    var ssn: String?
    var emailAddresses: [String]?
    var addresses: [PrefillAddress]?
}

struct ChallengeResponse: Codable, Sendable, Equatable {
    var success: Bool
    var next: [String: String]
    var individual: PrefillIndividual?
}

struct CompleteRequest: Codable, Sendable {
    var correlationId: String
    var individual: PrefillIndividual
}

struct CompleteResponse: Codable, Sendable, Equatable {
    var success: Bool
    var next: [String: String]
}
