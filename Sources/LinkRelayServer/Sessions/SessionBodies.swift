import Foundation
import LinkRelayCore

/// The body of `201` from `POST /v1/sessions`.
struct CreatedSession: Encodable {
    struct Channel: Encodable {
        var token: String
        var websocket: String
        var events: String
        var poll: String
    }

    /// Nevis only: what the desktop shows the customer (bearer secrets for the hold, as is the channel token).
    struct Approval: Encodable {
        var qrCode: String?
        var appLink: String?
    }

    var sessionId: String
    var state: SessionState
    var createdAt: Date
    var expiresAt: Date
    /// Prove's flows only.
    var finalTargetUrl: String?
    var authToken: String?
    var correlationId: String?
    var possessionType: PossessionType
    var flow: Flow
    var channel: Channel
    var approval: Approval?

    init(_ session: Session, publicURL: String) {
        let base = publicURL + "/v1/sessions/" + session.id
        let websocketBase =
            publicURL.hasPrefix("https://") ? "wss://" + publicURL.dropFirst(8) : "ws://" + publicURL.dropFirst(7)
        sessionId = session.id
        state = session.state
        createdAt = session.createdAt
        expiresAt = session.expiresAt
        if let nevis = session.nevis {
            approval = Approval(qrCode: nevis.qrCode, appLink: nevis.appLink)
        } else {
            finalTargetUrl = session.finalTargetUrl
            authToken = session.authToken
            correlationId = session.correlationId
        }
        possessionType = session.possession
        flow = session.flow
        channel = Channel(
            token: session.channelToken, websocket: websocketBase + "/v1/sessions/" + session.id + "/ws",
            events: base + "/events", poll: base + "/poll")
    }
}

/// The body of `GET /v1/sessions/{id}`.
struct SessionView: Encodable {
    var sessionId: String
    var state: SessionState
    var createdAt: Date
    var expiresAt: Date
    var tappedAt: Date?
    var possessionType: PossessionType
    var flow: Flow
    var result: SessionResult?
    /// Pre-Fill only: Prove's last `next`, and the individual once the challenge found it, while it is kept.
    var prefill: PrefillProgress?
    var events: [SessionEvent]?

    /// The session as of `now`: an individual past its keep time is shown as erased then, whether or not
    /// the retention's sweep has reached it yet.
    init(_ session: Session, events: [SessionEvent]?, at now: Date) {
        sessionId = session.id
        state = session.state
        createdAt = session.createdAt
        expiresAt = session.expiresAt
        tappedAt = session.tappedAt
        possessionType = session.possession
        flow = session.flow
        result = session.result
        prefill = session.prefill
        if let until = prefill?.individualKeptUntil, until <= now { prefill?.eraseIndividual(at: until) }
        self.events = events
    }
}

/// The finish hook's answer.
struct FinishedSession: Encodable {
    var sessionId: String
    var state: SessionState
}

/// `POST /v1/sessions/{id}/bind`'s answer: Prove's, as `result.binding` keeps it.
struct BindingView: Encodable {
    var success: Bool
    var phoneNumber: String
    var deviceId: String?
    var evaluation: [String: SessionResult.Evaluation]?

    init(_ binding: SessionResult.Binding) {
        success = binding.success
        phoneNumber = binding.phoneNumber
        deviceId = binding.deviceId
        evaluation = binding.evaluation
    }
}

/// The answers of `POST /v1/sessions/{id}/challenge` and `/complete`: Prove's, as the session keeps them.
struct PrefillStepView: Encodable {
    var success: Bool
    var individual: PrefillIndividual?
    var next: [String: String]
}
