/// A client of one Nevis backend (Authentication Cloud or nevisFIDO), as the relay's Nevis flow needs it:
/// start an out-of-band operation, then ask its status. Every call takes the session's absolute deadline.
public protocol NevisClient: Sendable {
    /// Starts the operation: Auth Cloud `POST /api/v1/approval`, nevisFIDO
    /// `POST /nevisfido/token/dispatch/authentication`.
    func start(_ approval: NevisApproval, deadline: ContinuousClock.Instant) async throws -> NevisStarted
    /// Asks where the operation is: Auth Cloud `POST /api/v1/status` with the status token, nevisFIDO
    /// `POST /nevisfido/status` with the session id.
    func status(_ handle: String, deadline: ContinuousClock.Instant) async throws -> NevisStatus
}

/// Where the phone's app gets the operation.
public enum NevisChannel: String, Codable, Sendable, CaseIterable {
    /// A QR code and a link (Auth Cloud `channel: app`; nevisFIDO's QR and link dispatchers).
    case app
    /// A push to the user's registered device; the app also fetches it when it opens.
    case push
}

/// What the relay asks Nevis to start. No username and no user id: usernameless (channel `app` only).
public struct NevisApproval: Sendable, Equatable {
    public var username: String?
    public var userId: String?
    /// Plain text the app shows for a transaction confirmation.
    public var message: String?
    public var channel: NevisChannel

    public init(username: String? = nil, userId: String? = nil, message: String? = nil, channel: NevisChannel = .app) {
        self.username = username
        self.userId = userId
        self.message = message
        self.channel = channel
    }
}

/// What a started operation gives the relay. `handle`, `qrCode` and `appLink` are bearer secrets.
public struct NevisStarted: Sendable, Equatable {
    /// What the status question takes: Auth Cloud's `statusToken`, nevisFIDO's `sessionId`.
    public var handle: String
    public var transactionId: String?
    /// `data:image/png;base64,…`, for channel `app`.
    public var qrCode: String?
    /// The link that opens the app, for channel `app`.
    public var appLink: String?
    /// nevisFIDO's `dispatchResult` when it is not `dispatched` (HTTP said 200 all the same).
    public var dispatchFailure: String?

    public init(
        handle: String, transactionId: String? = nil, qrCode: String? = nil, appLink: String? = nil,
        dispatchFailure: String? = nil
    ) {
        self.handle = handle
        self.transactionId = transactionId
        self.qrCode = qrCode
        self.appLink = appLink
        self.dispatchFailure = dispatchFailure
    }
}

/// An operation's status, both backends' answers read the same way.
public struct NevisStatus: Sendable, Equatable {
    public enum Progress: Sendable, Equatable {
        /// Nobody has acted yet (Auth Cloud `pending`, nevisFIDO `tokenCreated`).
        case pending
        /// The app has the operation and the customer is answering (nevisFIDO `clientAuthenticating`).
        case redeemed
        case succeeded
        /// Denied, or timed out at Nevis (`failed`, nevisFIDO `tokenTimedOut`).
        case failed
        /// Nevis does not know the operation.
        case unknown
    }

    public var progress: Progress
    /// Nevis's `status` as it answered.
    public var status: String
    public var transactionId: String?
    public var userId: String?
    public var username: String?

    public init(
        progress: Progress, status: String, transactionId: String? = nil, userId: String? = nil,
        username: String? = nil
    ) {
        self.progress = progress
        self.status = status
        self.transactionId = transactionId
        self.userId = userId
        self.username = username
    }
}

/// The errors a `NevisClient` throws (besides `CancellationError`).
public enum NevisClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A 4xx other than 429: the request itself was refused. Not retried.
    case rejected(status: Int, detail: String?)
    /// Timeouts, connection errors, 5xx, 429 after the retries, a redirect (never followed), an answer over
    /// 1 MiB, an undecodable 2xx body, or the deadline.
    case unavailable(reason: String)

    public var description: String {
        switch self {
        case .rejected(let status, let detail):
            "Nevis rejected the request with \(status)" + (detail.map { ": \($0)" } ?? "")
        case .unavailable(let reason): "Nevis unavailable: \(reason)"
        }
    }
}

/// The Nevis backend the relay talks to (`--nevis`).
public enum NevisBackend: Sendable, Equatable {
    /// `https://{instance}.mauth.nevis.cloud`, with the access key as Bearer.
    case authCloud(baseURL: String)
    /// `fido:https://HOST`: nevisFIDO's dispatch token and status services.
    case fido(baseURL: String, dispatcher: NevisDispatcher)
}

/// nevisFIDO's dispatchers for channel `app` (`--nevis-dispatcher`).
public enum NevisDispatcher: String, Sendable, CaseIterable {
    /// A QR code of a link: a phone camera opens the app from it (Nevis's recommendation).
    case linkQRCode = "link-png-qr-code"
    /// The link alone; the relay draws its QR code.
    case link
    /// A QR code of the raw payload, which only the Access App's own scanner reads.
    case qrCode = "png-qr-code"
}
