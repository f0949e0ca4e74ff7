import Foundation

/// Where a session is in its life. The last five are terminal.
public enum SessionState: String, Codable, Sendable, CaseIterable {
    case waiting
    case tapped
    case verified
    case failed
    case possessionRequired = "possession_required"
    case expired
    case cancelled

    public var isTerminal: Bool {
        switch self {
        case .waiting, .tapped: false
        default: true
        }
    }
}

/// The authoritative result of a session, as Prove's `/v3/unify-status` reported it.
public enum Outcome: String, Codable, Sendable, CaseIterable {
    case verified
    case failed
    case possessionRequired = "possession_required"

    /// Maps Prove's `success` string; `nil` while Prove still says `pending` (or anything unknown).
    public init?(proveSuccess: String) {
        switch proveSuccess {
        case "true": self = .verified
        case "false": self = .failed
        case "possession_required": self = .possessionRequired
        default: return nil
        }
    }

    var state: SessionState {
        switch self {
        case .verified: .verified
        case .failed: .failed
        case .possessionRequired: .possessionRequired
        }
    }
}

/// Who ended a session with `cancelled`.
public enum CancelReason: String, Codable, Sendable, CaseIterable {
    /// The integrator's backend (`POST /v1/sessions/{id}/cancel`).
    case integrator
    /// The person holding the phone answered "Not me" on the confirm page (`--confirm-on-phone`).
    case rejected
}

/// One entry of a session's event log, as desktop channels receive it.
public struct SessionEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case waiting(expiresAt: Date)
        case tapped(asc: Bool)
        case result(Outcome)
        case expired
        case cancelled(reason: CancelReason = .integrator)

        public var type: String {
            switch self {
            case .waiting: "waiting"
            case .tapped: "tapped"
            case .result: "result"
            case .expired: "expired"
            case .cancelled: "cancelled"
            }
        }

        public var isTerminal: Bool {
            switch self {
            case .waiting, .tapped: false
            case .result, .expired, .cancelled: true
            }
        }
    }

    public var seq: Int
    public var kind: Kind
    public var at: Date

    public init(seq: Int, kind: Kind, at: Date) {
        self.seq = seq
        self.kind = kind
        self.at = at
    }

    public var isTerminal: Bool { kind.isTerminal }
}

extension SessionEvent: Codable {
    private enum CodingKeys: String, CodingKey {
        case seq, type, at, expiresAt, asc, outcome, reason
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        seq = try container.decode(Int.self, forKey: .seq)
        at = try container.decode(Date.self, forKey: .at)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "waiting": kind = .waiting(expiresAt: try container.decode(Date.self, forKey: .expiresAt))
        case "tapped": kind = .tapped(asc: try container.decode(Bool.self, forKey: .asc))
        case "result": kind = .result(try container.decode(Outcome.self, forKey: .outcome))
        case "expired": kind = .expired
        case "cancelled":
            kind = .cancelled(reason: try container.decodeIfPresent(CancelReason.self, forKey: .reason) ?? .integrator)
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown event type")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(seq, forKey: .seq)
        try container.encode(kind.type, forKey: .type)
        try container.encode(at, forKey: .at)
        switch kind {
        case .waiting(let expiresAt): try container.encode(expiresAt, forKey: .expiresAt)
        case .tapped(let asc): try container.encode(asc, forKey: .asc)
        case .result(let outcome): try container.encode(outcome, forKey: .outcome)
        case .cancelled(let reason): try container.encode(reason, forKey: .reason)
        case .expired: break
        }
    }
}

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

/// One desktop verification attempt. Its state moves only through `record(_:at:)`.
public struct Session: Codable, Sendable, Equatable {
    public var id: String
    /// The random part of the finalTargetUrl (`/l/{linkKey}`).
    public var linkKey: String
    /// The secret a desktop channel presents.
    public var channelToken: String
    public var state: SessionState
    public var createdAt: Date
    public var expiresAt: Date
    public var tappedAt: Date?
    /// Grows by one with every stored change; stores use it for optimistic concurrency.
    public var version: Int
    /// The seq of the newest event.
    public var lastSeq: Int
    public var correlationId: String
    public var authToken: String?
    public var clientRequestId: String
    public var phoneNumber: String
    public var finalTargetUrl: String
    /// The desktop's IP address as the integrator's backend gave it (`ipAddress`), shown on the confirm page.
    public var desktopIPAddress: String?
    public var idempotencyKey: String?
    /// A canonical form of the create request, to tell a repeat from a different request with the same key.
    public var requestFingerprint: String
    /// Every `authId` a valid landing carried, in order.
    public var seenAuthIds: [String]
    /// A landing asked for the result and the verifier has not delivered it yet.
    public var verificationPending: Bool
    public var result: SessionResult?

    public init(
        id: String, linkKey: String, channelToken: String, createdAt: Date, expiresAt: Date,
        correlationId: String, authToken: String?, clientRequestId: String, phoneNumber: String,
        finalTargetUrl: String, idempotencyKey: String?, requestFingerprint: String, desktopIPAddress: String? = nil
    ) {
        self.desktopIPAddress = desktopIPAddress
        self.id = id
        self.linkKey = linkKey
        self.channelToken = channelToken
        self.state = .waiting
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.tappedAt = nil
        self.version = 0
        self.lastSeq = 0
        self.correlationId = correlationId
        self.authToken = authToken
        self.clientRequestId = clientRequestId
        self.phoneNumber = phoneNumber
        self.finalTargetUrl = finalTargetUrl
        self.idempotencyKey = idempotencyKey
        self.requestFingerprint = requestFingerprint
        self.seenAuthIds = []
        self.verificationPending = false
        self.result = nil
    }

    /// Past its hold at `now`, whatever its stored state says.
    public func isPastHold(at now: Date) -> Bool { now >= expiresAt }

    /// Appends an event, moving the state machine. Returns the event to store and publish.
    @discardableResult
    public mutating func record(_ kind: SessionEvent.Kind, at now: Date) -> SessionEvent {
        switch kind {
        case .waiting: break
        case .tapped:
            state = .tapped
            tappedAt = now
        case .result(let outcome): state = outcome.state
        case .expired: state = .expired
        case .cancelled: state = .cancelled
        }
        if kind.isTerminal { verificationPending = false }
        lastSeq += 1
        return SessionEvent(seq: lastSeq, kind: kind, at: now)
    }
}
