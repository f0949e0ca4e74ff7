import Foundation

/// Prove's unify-status fields, kept as returned, for the integrator's backend.
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
    public var success: String
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
        outcome: Outcome, success: String, phoneNumber: String? = nil, proveId: String? = nil,
        deviceId: String? = nil, clientHumanId: String? = nil, clientRequestId: String? = nil,
        evaluation: [String: Evaluation]? = nil, reason: String? = nil
    ) {
        self.outcome = outcome
        self.success = success
        self.phoneNumber = phoneNumber
        self.proveId = proveId
        self.deviceId = deviceId
        self.clientHumanId = clientHumanId
        self.clientRequestId = clientRequestId
        self.evaluation = evaluation
        self.reason = reason
    }
}
