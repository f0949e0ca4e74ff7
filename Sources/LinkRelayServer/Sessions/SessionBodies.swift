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

    var sessionId: String
    var state: SessionState
    var createdAt: Date
    var expiresAt: Date
    var finalTargetUrl: String
    var authToken: String?
    var correlationId: String
    var channel: Channel

    init(_ session: Session, publicURL: String) {
        let base = publicURL + "/v1/sessions/" + session.id
        let websocketBase =
            publicURL.hasPrefix("https://") ? "wss://" + publicURL.dropFirst(8) : "ws://" + publicURL.dropFirst(7)
        sessionId = session.id
        state = session.state
        createdAt = session.createdAt
        expiresAt = session.expiresAt
        finalTargetUrl = session.finalTargetUrl
        authToken = session.authToken
        correlationId = session.correlationId
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
    var result: SessionResult?
    var events: [SessionEvent]

    init(_ session: Session, events: [SessionEvent]) {
        sessionId = session.id
        state = session.state
        createdAt = session.createdAt
        expiresAt = session.expiresAt
        tappedAt = session.tappedAt
        result = session.result
        self.events = events
    }
}

/// The finish hook's answer.
struct FinishedSession: Encodable {
    var sessionId: String
    var state: SessionState
}
