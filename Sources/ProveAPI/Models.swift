/// Client credentials for Prove's OAuth2 `client_credentials` grant.
///
/// `description` never shows the secret, so a credentials value can be interpolated into logs safely.
public struct ProveCredentials: Sendable, CustomStringConvertible {
    public var clientID: String
    public var clientSecret: String

    public init(clientID: String, clientSecret: String) {
        self.clientID = clientID
        self.clientSecret = clientSecret
    }

    public var description: String { "ProveCredentials(clientID: \(clientID), clientSecret: <redacted>)" }
}

/// `POST /v3/unify` request body (prove-api.md §3.1). Encoding omits `nil` fields.
public struct UnifyRequest: Codable, Sendable, Equatable {
    public var possessionType: String
    public var clientRequestId: String
    public var phoneNumber: String?
    public var finalTargetUrl: String?
    public var smsMessage: String?
    public var allowOTPRetry: Bool?
    public var checkReputation: Bool?
    public var clientCustomerId: String?
    public var clientHumanId: String?
    public var deviceId: String?
    public var emailAddress: String?
    public var ipAddress: String?
    public var proveId: String?
    public var rebind: Bool?

    public init(
        possessionType: String,
        clientRequestId: String,
        phoneNumber: String? = nil,
        finalTargetUrl: String? = nil,
        smsMessage: String? = nil,
        allowOTPRetry: Bool? = nil,
        checkReputation: Bool? = nil,
        clientCustomerId: String? = nil,
        clientHumanId: String? = nil,
        deviceId: String? = nil,
        emailAddress: String? = nil,
        ipAddress: String? = nil,
        proveId: String? = nil,
        rebind: Bool? = nil
    ) {
        self.possessionType = possessionType
        self.clientRequestId = clientRequestId
        self.phoneNumber = phoneNumber
        self.finalTargetUrl = finalTargetUrl
        self.smsMessage = smsMessage
        self.allowOTPRetry = allowOTPRetry
        self.checkReputation = checkReputation
        self.clientCustomerId = clientCustomerId
        self.clientHumanId = clientHumanId
        self.deviceId = deviceId
        self.emailAddress = emailAddress
        self.ipAddress = ipAddress
        self.proveId = proveId
        self.rebind = rebind
    }
}

/// `POST /v3/unify` response body. `success` is a string ("pending", "true", ...).
public struct UnifyResponse: Codable, Sendable, Equatable {
    public var success: String
    public var correlationId: String
    public var authToken: String?

    public init(success: String, correlationId: String, authToken: String? = nil) {
        self.success = success
        self.correlationId = correlationId
        self.authToken = authToken
    }
}

/// `POST /v3/unify-status` request body.
public struct UnifyStatusRequest: Codable, Sendable, Equatable {
    public var correlationId: String
    public var clientRequestId: String?

    public init(correlationId: String, clientRequestId: String? = nil) {
        self.correlationId = correlationId
        self.clientRequestId = clientRequestId
    }
}

/// `POST /v3/unify-bind` request body.
public struct UnifyBindRequest: Codable, Sendable, Equatable {
    public var correlationId: String
    public var phoneNumber: String
    public var clientRequestId: String?

    public init(correlationId: String, phoneNumber: String, clientRequestId: String? = nil) {
        self.correlationId = correlationId
        self.phoneNumber = phoneNumber
        self.clientRequestId = clientRequestId
    }
}

/// The `/v3/unify-status` and `/v3/unify-bind` response body.
public struct UnifyStatusResponse: Codable, Sendable, Equatable {
    /// Open string: "true", "false", "pending", "possession_required"; any other value is kept as is.
    public var success: String
    public var phoneNumber: String?
    public var proveId: String?
    public var deviceId: String?
    public var clientHumanId: String?
    public var clientRequestId: String?
    public var evaluation: [String: EvaluationCategory]?

    public init(
        success: String,
        phoneNumber: String? = nil,
        proveId: String? = nil,
        deviceId: String? = nil,
        clientHumanId: String? = nil,
        clientRequestId: String? = nil,
        evaluation: [String: EvaluationCategory]? = nil
    ) {
        self.success = success
        self.phoneNumber = phoneNumber
        self.proveId = proveId
        self.deviceId = deviceId
        self.clientHumanId = clientHumanId
        self.clientRequestId = clientRequestId
        self.evaluation = evaluation
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        success = try container.decode(String.self, forKey: .success)
        phoneNumber = try container.decodeIfPresent(String.self, forKey: .phoneNumber)
        proveId = try container.decodeIfPresent(String.self, forKey: .proveId)
        deviceId = try container.decodeIfPresent(String.self, forKey: .deviceId)
        clientHumanId = try container.decodeIfPresent(String.self, forKey: .clientHumanId)
        clientRequestId = try container.decodeIfPresent(String.self, forKey: .clientRequestId)
        evaluation = container.decodeEvaluation(forKey: .evaluation)
    }
}

/// One category of the Global Fraud Policy `evaluation` map (prove-api.md §5).
///
/// Prove's SDKs treat `evaluation` as an open map ("upcoming field, not yet enabled" on some routes), so
/// its decoding never fails an answer: a category that is not an object keeps its value as `result`,
/// a reason that is not a string keeps its JSON text, and an `evaluation` that is not a map is left out
/// (`decodeEvaluation`).
public struct EvaluationCategory: Codable, Sendable, Equatable {
    public var result: String
    public var failureReasons: [String: String]?

    public init(result: String, failureReasons: [String: String]? = nil) {
        self.result = result
        self.failureReasons = failureReasons
    }

    private enum CodingKeys: String, CodingKey {
        case result, failureReasons
    }

    public init(from decoder: any Decoder) throws {
        guard let container = try? decoder.container(keyedBy: CodingKeys.self) else {
            result = Self.text(of: try decoder.singleValueContainer())
            return
        }
        result = (try? container.decode(String.self, forKey: .result)) ?? "unknown"
        let reasons = try? container.decodeIfPresent([String: AnyText].self, forKey: .failureReasons)
        failureReasons = reasons?.mapValues(\.text)
    }

    /// A JSON value as text: a string as it is, a number or a boolean as JSON writes it, anything else
    /// as its JSON.
    fileprivate static func text(of container: any SingleValueDecodingContainer) -> String {
        if let string = try? container.decode(String.self) { return string }
        if let bool = try? container.decode(Bool.self) { return String(bool) }
        if let int = try? container.decode(Int.self) { return String(int) }
        if let double = try? container.decode(Double.self) { return String(double) }
        return "unknown"
    }

    private struct AnyText: Decodable {
        let text: String
        init(from decoder: any Decoder) throws {
            text = EvaluationCategory.text(of: try decoder.singleValueContainer())
        }
    }
}

extension KeyedDecodingContainer {
    /// An answer's `evaluation`, or nil when it is absent or not a map: an unexpected shape never fails
    /// the answer that carries it.
    func decodeEvaluation(forKey key: Key) -> [String: EvaluationCategory]? {
        (try? decodeIfPresent([String: EvaluationCategory].self, forKey: key)) ?? nil
    }
}

/// Prove's error body `{"code": Int?, "message": String}` (prove-api.md §6).
public struct ProveErrorBody: Codable, Sendable, Equatable, Error {
    public var code: Int?
    public var message: String

    public init(code: Int? = nil, message: String) {
        self.code = code
        self.message = message
    }
}

/// The OAuth2 token response of `POST /token`.
public struct ProveTokenResponse: Codable, Sendable, Equatable {
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Int

    public init(accessToken: String, tokenType: String = "Bearer", expiresIn: Int) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
    }
}
