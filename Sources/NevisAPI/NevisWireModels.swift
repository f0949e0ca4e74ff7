/// The bodies both Nevis backends take and answer, with the field names nevis-oob.md confirms (§1, §2).
/// Encoding omits nil fields; decoding ignores fields the relay does not read.

// MARK: - Authentication Cloud

/// `POST /api/v1/approval` (Bearer access key).
public struct AuthCloudApprovalRequest: Codable, Sendable, Equatable {
    public var channel: String
    public var username: String?
    public var userId: String?
    /// `"*"`: any of the user's authenticators (channel `app` only); usernameless leaves it out too.
    public var authenticatorId: String?
    /// Asks the customer to accept or deny actively; `message` is then required.
    public var prompt: Bool?
    public var message: String?
    public var notificationMessage: String?

    public init(
        channel: String, username: String? = nil, userId: String? = nil, authenticatorId: String? = nil,
        prompt: Bool? = nil, message: String? = nil, notificationMessage: String? = nil
    ) {
        self.channel = channel
        self.username = username
        self.userId = userId
        self.authenticatorId = authenticatorId
        self.prompt = prompt
        self.message = message
        self.notificationMessage = notificationMessage
    }
}

/// The approval's answer. Only `statusToken` is confirmed; the rest is as nevis-oob.md §1a expects.
public struct AuthCloudApprovalResponse: Codable, Sendable, Equatable {
    public struct QRCode: Codable, Sendable, Equatable {
        public var type: String?
        public var size: Int?
        public var dataUri: String

        public init(type: String? = "image/png", size: Int? = nil, dataUri: String) {
            self.type = type
            self.size = size
            self.dataUri = dataUri
        }
    }

    public var transactionId: String?
    public var statusToken: String
    public var userId: String?
    public var username: String?
    public var qrCode: QRCode?
    public var appLinkUri: String?
    public var createdAt: String?

    public init(
        transactionId: String?, statusToken: String, userId: String? = nil, username: String? = nil,
        qrCode: QRCode? = nil, appLinkUri: String? = nil, createdAt: String? = nil
    ) {
        self.transactionId = transactionId
        self.statusToken = statusToken
        self.userId = userId
        self.username = username
        self.qrCode = qrCode
        self.appLinkUri = appLinkUri
        self.createdAt = createdAt
    }
}

extension AuthCloudApprovalRequest {
    /// The approval's body for `approval`: with a message, `prompt: true` and the message as plain text
    /// (nothing escaped: Auth Cloud reads markup only inside `<html>…</html>`, which the relay never adds).
    /// Usernameless (no username, no user id) leaves `authenticatorId` out as well.
    public init(_ approval: NevisApproval) {
        self.init(
            channel: approval.channel.rawValue, username: approval.username, userId: approval.userId,
            prompt: approval.message == nil ? nil : true, message: approval.message)
    }
}

/// `POST /api/v1/status`: the status token is the credential.
public struct AuthCloudStatusRequest: Codable, Sendable, Equatable {
    public var statusToken: String

    public init(statusToken: String) { self.statusToken = statusToken }
}

/// `pending`, `succeeded`, `failed` (a denial or a timeout), `unknown`. For usernameless operations the user
/// appears only once `succeeded`.
public struct AuthCloudStatusResponse: Codable, Sendable, Equatable {
    public var transactionId: String?
    public var status: String
    public var userId: String?
    public var username: String?
    /// A transaction token with the verifiable result (for Nevis's introspection endpoint).
    public var token: String?
    public var createdAt: String?
    public var lastUpdatedAt: String?

    public init(
        transactionId: String?, status: String, userId: String? = nil, username: String? = nil, token: String? = nil,
        createdAt: String? = nil, lastUpdatedAt: String? = nil
    ) {
        self.transactionId = transactionId
        self.status = status
        self.userId = userId
        self.username = username
        self.token = token
        self.createdAt = createdAt
        self.lastUpdatedAt = lastUpdatedAt
    }
}

// MARK: - nevisFIDO

/// `POST /nevisfido/token/dispatch/authentication`.
public struct DispatchTokenRequest: Codable, Sendable, Equatable {
    public struct GetUafRequest: Codable, Sendable, Equatable {
        /// `Auth` here.
        public var op: String
        /// Stringified JSON: the username (none: usernameless) and the transaction to confirm.
        public var context: String?
        public var previousRequest: String?

        public init(op: String, context: String? = nil, previousRequest: String? = nil) {
            self.op = op
            self.context = context
            self.previousRequest = previousRequest
        }
    }

    public var dispatcher: String
    public var dispatchTargetId: String?
    public var dispatchInformation: String?
    public var getUafRequest: GetUafRequest

    public init(
        dispatcher: String, dispatchTargetId: String? = nil, dispatchInformation: String? = nil,
        getUafRequest: GetUafRequest
    ) {
        self.dispatcher = dispatcher
        self.dispatchTargetId = dispatchTargetId
        self.dispatchInformation = dispatchInformation
        self.getUafRequest = getUafRequest
    }
}

/// What the `context` of a `GetUafRequest` holds, before it is stringified (its layout is unconfirmed:
/// docs/nevis.md).
public struct DispatchContext: Codable, Sendable, Equatable {
    public struct Transaction: Codable, Sendable, Equatable {
        public var contentType: String
        /// base64url of the text.
        public var content: String

        public init(contentType: String, content: String) {
            self.contentType = contentType
            self.content = content
        }
    }

    public var username: String?
    public var transaction: [Transaction]?

    public init(username: String? = nil, transaction: [Transaction]? = nil) {
        self.username = username
        self.transaction = transaction
    }
}

/// HTTP 200 for any well-formed request: `dispatchResult` says whether it went.
public struct DispatchTokenResponse: Codable, Sendable, Equatable {
    public struct DispatcherInformation: Codable, Sendable, Equatable {
        public var name: String?
        /// The QR code's PNG (base64) or the link, for the QR and link dispatchers.
        public var response: String?

        public init(name: String? = nil, response: String? = nil) {
            self.name = name
            self.response = response
        }
    }

    public var token: String?
    public var sessionId: String?
    public var dispatcherInformation: DispatcherInformation?
    /// `dispatched`, `dispatchError`, `dispatchTargetExpired`, `dispatchTargetNotFound`, `dispatcherNotFound`,
    /// `userNotFound`, `internalError`.
    public var dispatchResult: String

    public init(
        token: String?, sessionId: String?, dispatcherInformation: DispatcherInformation? = nil,
        dispatchResult: String
    ) {
        self.token = token
        self.sessionId = sessionId
        self.dispatcherInformation = dispatcherInformation
        self.dispatchResult = dispatchResult
    }
}

/// `POST /nevisfido/status`: keyed by the dispatch's `sessionId`, not a status token.
public struct FidoStatusRequest: Codable, Sendable, Equatable {
    public var sessionId: String

    public init(sessionId: String) { self.sessionId = sessionId }
}

/// `tokenCreated`, `clientRegistering`, `clientAuthenticating`, `succeeded`, `failed`, `unknown`; an unredeemed
/// token that expired says `tokenInformation.tokenResult: tokenTimedOut`.
public struct FidoStatusResponse: Codable, Sendable, Equatable {
    public struct TokenInformation: Codable, Sendable, Equatable {
        public var dispatchTargetExtId: String?
        public var tokenResult: String?

        public init(dispatchTargetExtId: String? = nil, tokenResult: String? = nil) {
            self.dispatchTargetExtId = dispatchTargetExtId
            self.tokenResult = tokenResult
        }
    }

    public var status: String
    public var timestamp: String?
    public var userId: String?
    public var uafStatusCode: Int?
    public var tokenInformation: TokenInformation?

    public init(
        status: String, timestamp: String? = nil, userId: String? = nil, uafStatusCode: Int? = nil,
        tokenInformation: TokenInformation? = nil
    ) {
        self.status = status
        self.timestamp = timestamp
        self.userId = userId
        self.uafStatusCode = uafStatusCode
        self.tokenInformation = tokenInformation
    }
}

// MARK: - What the phone gets

/// The payload a QR code or a link carries to the app (seed 004, nevis-oob.md §1c): in a link as the
/// `dispatchTokenResponse` query parameter, base64url of this JSON.
public struct NevisAppPayload: Codable, Sendable, Equatable {
    public struct RedeemData: Codable, Sendable, Equatable {
        public var token: String
        public var redeemURL: String

        public init(token: String, redeemURL: String) {
            self.token = token
            self.redeemURL = redeemURL
        }

        enum CodingKeys: String, CodingKey {
            case token
            case redeemURL = "redeem_url"
        }
    }

    public var data: RedeemData
    public var contentType: String
    public var version: String

    public init(token: String, redeemURL: String) {
        data = RedeemData(token: token, redeemURL: redeemURL)
        contentType = "application/json"
        version = "1"
    }

    enum CodingKeys: String, CodingKey {
        case data = "nma_data"
        case contentType = "nma_data_content_type"
        case version = "nma_data_version"
    }
}
