// Pre-Fill (`/v3/start` → `/v3/validate` → `/v3/challenge` → `/v3/complete`), prove-api.md §4.
//
// `success` is a boolean in these bodies (a string in Unify's). Each step is allowed only when the previous
// answer's `next` names it ("v3-validate", "v3-challenge", "v3-complete", "done").
//
// The types that hold identity data describe themselves redacted, so interpolating one into a log line shows
// no name, date of birth, SSN, address, email or phone number.

/// `POST /v3/start` request body, Prove's start model: no `clientRequestId` or `clientCustomerId` (the
/// relay keeps those on the session). Encoding omits `nil` fields.
public struct PrefillStartRequest: Codable, Sendable, Equatable {
    /// "desktop" (Instant Link) or "mobile".
    public var flowType: String
    /// Where the phone is redirected after the Instant Link; required for "desktop", at most 128 characters.
    public var finalTargetUrl: String?
    public var phoneNumber: String?
    /// `YYYY-MM-DD`, `YYYY-MM` or `MM-DD`.
    public var dob: String?
    /// The full SSN or its last 4 digits.
    public var ssn: String?
    public var emailAddress: String?
    public var ipAddress: String?
    /// At most 160 characters; `####` stands for the link.
    public var smsMessage: String?
    public var allowOTPRetry: Bool?

    public init(
        flowType: String,
        finalTargetUrl: String? = nil,
        phoneNumber: String? = nil,
        dob: String? = nil,
        ssn: String? = nil,
        emailAddress: String? = nil,
        ipAddress: String? = nil,
        smsMessage: String? = nil,
        allowOTPRetry: Bool? = nil
    ) {
        self.flowType = flowType
        self.finalTargetUrl = finalTargetUrl
        self.phoneNumber = phoneNumber
        self.dob = dob
        self.ssn = ssn
        self.emailAddress = emailAddress
        self.ipAddress = ipAddress
        self.smsMessage = smsMessage
        self.allowOTPRetry = allowOTPRetry
    }
}

/// `POST /v3/start` response body: all three fields are required.
public struct PrefillStartResponse: Codable, Sendable, Equatable {
    public var next: [String: String]
    /// The client SDK's JWT for this flow.
    public var authToken: String
    /// Names the flow in every later step; the flow expires 15 minutes after it is returned.
    public var correlationId: String

    public init(next: [String: String], authToken: String, correlationId: String) {
        self.next = next
        self.authToken = authToken
        self.correlationId = correlationId
    }
}

/// `POST /v3/validate` request body.
public struct PrefillValidateRequest: Codable, Sendable, Equatable {
    public var correlationId: String

    public init(correlationId: String) {
        self.correlationId = correlationId
    }
}

/// `POST /v3/validate` response body.
public struct PrefillValidateResponse: Codable, Sendable, Equatable {
    /// Whether the phone number was validated (possession passed).
    public var success: Bool
    /// Whether `/v3/challenge` needs a `dob` or `ssn`, none having been given at start. Prove leaves out empty
    /// values, so a missing field decodes as `false`.
    public var challengeMissing: Bool
    public var next: [String: String]
    public var phoneNumber: String?
    public var evaluation: [String: EvaluationCategory]?

    public init(
        success: Bool,
        challengeMissing: Bool,
        next: [String: String],
        phoneNumber: String? = nil,
        evaluation: [String: EvaluationCategory]? = nil
    ) {
        self.success = success
        self.challengeMissing = challengeMissing
        self.next = next
        self.phoneNumber = phoneNumber
        self.evaluation = evaluation
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        success = try container.decode(Bool.self, forKey: .success)
        challengeMissing = try container.decodeIfPresent(Bool.self, forKey: .challengeMissing) ?? false
        next = try container.decode([String: String].self, forKey: .next)
        phoneNumber = try container.decodeIfPresent(String.self, forKey: .phoneNumber)
        evaluation = container.decodeEvaluation(forKey: .evaluation)
    }
}

/// `POST /v3/challenge` request body: the challenge (`dob` or `ssn`) when none was given at start.
public struct PrefillChallengeRequest: Codable, Sendable, Equatable {
    public var correlationId: String
    public var dob: String?
    public var ssn: String?

    public init(correlationId: String, dob: String? = nil, ssn: String? = nil) {
        self.correlationId = correlationId
        self.dob = dob
        self.ssn = ssn
    }
}

/// `POST /v3/challenge` response body: the individual to pre-fill the form with.
public struct PrefillChallengeResponse: Codable, Sendable, Equatable {
    public var success: Bool
    public var next: [String: String]
    public var individual: ProveIndividual?
    public var evaluation: [String: EvaluationCategory]?

    public init(
        success: Bool,
        next: [String: String],
        individual: ProveIndividual? = nil,
        evaluation: [String: EvaluationCategory]? = nil
    ) {
        self.success = success
        self.next = next
        self.individual = individual
        self.evaluation = evaluation
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        success = try container.decode(Bool.self, forKey: .success)
        next = try container.decode([String: String].self, forKey: .next)
        individual = try container.decodeIfPresent(ProveIndividual.self, forKey: .individual)
        evaluation = container.decodeEvaluation(forKey: .evaluation)
    }
}

/// `POST /v3/complete` request body: the individual as the customer confirmed it. Prove processes only the
/// first address and the first email.
public struct PrefillCompleteRequest: Codable, Sendable, Equatable {
    public var correlationId: String
    public var individual: ProveIndividual

    public init(correlationId: String, individual: ProveIndividual) {
        self.correlationId = correlationId
        self.individual = individual
    }
}

/// `POST /v3/complete` response body. The KYC add-on's `idv` and `kyc` objects are not decoded.
public struct PrefillCompleteResponse: Codable, Sendable, Equatable {
    /// Whether the individual was verified.
    public var success: Bool
    public var next: [String: String]
    public var evaluation: [String: EvaluationCategory]?

    public init(success: Bool, next: [String: String], evaluation: [String: EvaluationCategory]? = nil) {
        self.success = success
        self.next = next
        self.evaluation = evaluation
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        success = try container.decode(Bool.self, forKey: .success)
        next = try container.decode([String: String].self, forKey: .next)
        evaluation = container.decodeEvaluation(forKey: .evaluation)
    }
}

/// A person as Prove returns it from `/v3/challenge` and takes it in `/v3/complete`; every field is optional.
public struct ProveIndividual: Codable, Sendable, Equatable {
    public var firstName: String?
    public var lastName: String?
    /// "1981-01-17" (Prove may also answer "1981-01-17T00:00:00Z").
    public var dob: String?
    public var ssn: String?
    public var emailAddresses: [String]?
    /// Up to 3 from Prove.
    public var addresses: [ProveAddress]?

    public init(
        firstName: String? = nil,
        lastName: String? = nil,
        dob: String? = nil,
        ssn: String? = nil,
        emailAddresses: [String]? = nil,
        addresses: [ProveAddress]? = nil
    ) {
        self.firstName = firstName
        self.lastName = lastName
        self.dob = dob
        self.ssn = ssn
        self.emailAddresses = emailAddresses
        self.addresses = addresses
    }
}

/// One address of a ``ProveIndividual``.
public struct ProveAddress: Codable, Sendable, Equatable {
    public var address: String?
    public var extendedAddress: String?
    public var city: String?
    /// The state, e.g. "CO".
    public var region: String?
    /// `XXXXX` or `XXXXX-XXXX`.
    public var postalCode: String?

    public init(
        address: String? = nil,
        extendedAddress: String? = nil,
        city: String? = nil,
        region: String? = nil,
        postalCode: String? = nil
    ) {
        self.address = address
        self.extendedAddress = extendedAddress
        self.city = city
        self.region = region
        self.postalCode = postalCode
    }
}

// MARK: Redacted descriptions

extension ProveIndividual: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "ProveIndividual(\(ProveRedaction.presence(firstName, lastName, dob, ssn)), "
            + "emailAddresses: \(emailAddresses?.count ?? 0), addresses: \(addresses?.count ?? 0))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension ProveAddress: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "ProveAddress(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension PrefillStartRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "PrefillStartRequest(flowType: \(flowType), phoneNumber: \(phoneNumber.map(ProveRedaction.maskPhone) ?? "nil"), "
            + "dob: \(ProveRedaction.redact(dob)), ssn: \(ProveRedaction.redact(ssn)), "
            + "emailAddress: \(ProveRedaction.redact(emailAddress)), ipAddress: \(ProveRedaction.redact(ipAddress)))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension PrefillValidateResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "PrefillValidateResponse(success: \(success), challengeMissing: \(challengeMissing), next: \(next), "
            + "phoneNumber: \(phoneNumber.map(ProveRedaction.maskPhone) ?? "nil"))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension PrefillChallengeRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "PrefillChallengeRequest(correlationId: \(correlationId), dob: \(ProveRedaction.redact(dob)), "
            + "ssn: \(ProveRedaction.redact(ssn)))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension PrefillChallengeResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "PrefillChallengeResponse(success: \(success), next: \(next), individual: \(individual.map(\.description) ?? "nil"))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension PrefillCompleteRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "PrefillCompleteRequest(correlationId: \(correlationId), individual: \(individual))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
