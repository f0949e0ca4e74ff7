import Foundation

/// Prove's unify-status fields, kept as returned, for the integrator's backend.
///
/// `success` says what the result means, as a boolean (`outcome` is `verified`); Prove's own `success`,
/// a string (`"true"`, `"false"`, `"possession_required"`), is `proveSuccess`. Sessions stored before
/// kept Prove's string as `success`: it decodes as `proveSuccess`.
public struct SessionResult: Codable, Sendable, Equatable {
    public struct Evaluation: Codable, Sendable, Equatable {
        public var result: String
        public var failureReasons: [String: String]?

        public init(result: String, failureReasons: [String: String]? = nil) {
            self.result = result
            self.failureReasons = failureReasons
        }
    }

    public var outcome: Outcome
    /// Prove's `success` as it answered; nil when the relay ended the session without Prove's answer.
    public var proveSuccess: String?
    /// True exactly when the customer is verified.
    public var success: Bool { outcome == .verified }
    public var phoneNumber: String?
    public var proveId: String?
    public var deviceId: String?
    public var clientHumanId: String?
    public var clientRequestId: String?
    public var evaluation: [String: Evaluation]?
    /// Why the relay ended the session this way, when Prove itself did not say (for example an upstream error).
    public var reason: String?
    /// Prove's answer to `POST /v1/sessions/{id}/bind`, on a `possession_required` session.
    public var binding: Binding?
    /// Nevis's answer, for a Nevis session.
    public var nevis: NevisResult?

    /// `/v3/unify-bind`'s answer, when the relay asked it.
    public struct Binding: Codable, Sendable, Equatable {
        public var success: Bool
        public var phoneNumber: String
        public var deviceId: String?
        public var evaluation: [String: Evaluation]?
        public var at: Date

        public init(
            success: Bool, phoneNumber: String, deviceId: String? = nil, evaluation: [String: Evaluation]? = nil,
            at: Date
        ) {
            self.success = success
            self.phoneNumber = phoneNumber
            self.deviceId = deviceId
            self.evaluation = evaluation
            self.at = at
        }
    }

    public init(
        outcome: Outcome, proveSuccess: String?, phoneNumber: String? = nil, proveId: String? = nil,
        deviceId: String? = nil, clientHumanId: String? = nil, clientRequestId: String? = nil,
        evaluation: [String: Evaluation]? = nil, reason: String? = nil
    ) {
        self.outcome = outcome
        self.proveSuccess = proveSuccess
        self.phoneNumber = phoneNumber
        self.proveId = proveId
        self.deviceId = deviceId
        self.clientHumanId = clientHumanId
        self.clientRequestId = clientRequestId
        self.evaluation = evaluation
        self.reason = reason
    }
}

extension SessionResult {
    private enum CodingKeys: String, CodingKey {
        case outcome, success, proveSuccess, phoneNumber, proveId, deviceId, clientHumanId, clientRequestId
        case evaluation, reason, binding, nevis
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try container.decode(Outcome.self, forKey: .outcome)
        proveSuccess =
            try container.decodeIfPresent(String.self, forKey: .proveSuccess)
            ?? (try? container.decodeIfPresent(String.self, forKey: .success))
        phoneNumber = try container.decodeIfPresent(String.self, forKey: .phoneNumber)
        proveId = try container.decodeIfPresent(String.self, forKey: .proveId)
        deviceId = try container.decodeIfPresent(String.self, forKey: .deviceId)
        clientHumanId = try container.decodeIfPresent(String.self, forKey: .clientHumanId)
        clientRequestId = try container.decodeIfPresent(String.self, forKey: .clientRequestId)
        evaluation = try container.decodeIfPresent([String: Evaluation].self, forKey: .evaluation)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        binding = try container.decodeIfPresent(Binding.self, forKey: .binding)
        nevis = try container.decodeIfPresent(NevisResult.self, forKey: .nevis)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(success, forKey: .success)
        try container.encodeIfPresent(proveSuccess, forKey: .proveSuccess)
        try container.encodeIfPresent(phoneNumber, forKey: .phoneNumber)
        try container.encodeIfPresent(proveId, forKey: .proveId)
        try container.encodeIfPresent(deviceId, forKey: .deviceId)
        try container.encodeIfPresent(clientHumanId, forKey: .clientHumanId)
        try container.encodeIfPresent(clientRequestId, forKey: .clientRequestId)
        try container.encodeIfPresent(evaluation, forKey: .evaluation)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(binding, forKey: .binding)
        try container.encodeIfPresent(nevis, forKey: .nevis)
    }
}
