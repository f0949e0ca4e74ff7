import Foundation

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
    /// Nil for a Unify session Prove identifies the phone of itself (Mobile Auth, a `proveId`, or a
    /// customer-supplied possession whose bind names the number).
    public var phoneNumber: String?
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
    @Boxed public var result: SessionResult? = nil
    /// Nil for `desktop` (and for sessions stored before there were others).
    public var possessionType: PossessionType?

    public var possession: PossessionType { possessionType ?? .desktop }
    /// Set from the create on, for Pre-Fill sessions only.
    @Boxed public var prefill: PrefillProgress? = nil
    /// The tenant whose API key created it; nil for `default`, and for sessions stored before tenants.
    public var tenant: String?
    /// When its terminal event came: ended sessions are deleted `--retention` days later.
    public var endedAt: Date?
    /// Set from the create on, for Nevis sessions only.
    @Boxed public var nevis: NevisOperation? = nil

    /// The tenant it belongs to: only that tenant's keys see it.
    public var owner: String { tenant ?? Tenant.defaultName }

    public var flow: Flow { nevis != nil ? .nevis : prefill == nil ? .unify : .prefill }

    public init(
        id: String, linkKey: String, channelToken: String, createdAt: Date, expiresAt: Date,
        correlationId: String, authToken: String?, clientRequestId: String, phoneNumber: String?,
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
        if kind.isTerminal {
            verificationPending = false
            endedAt = now
        }
        lastSeq += 1
        return SessionEvent(seq: lastSeq, kind: kind, at: now)
    }
}
