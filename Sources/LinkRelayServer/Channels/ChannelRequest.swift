import LinkRelayCore
import NIOHTTP1

/// A request for a desktop channel (`GET /v1/sessions/{id}/events|poll|ws`), as its route hands it over.
struct ChannelRequest: Sendable {
    let sessionID: String
    let transport: ChannelTransport
    let request: RelayRequest

    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 55
}

/// What a channel may start with, once the gate let it through.
struct ChannelAdmission: Sendable {
    let session: Session
    /// The last event the client has: `?after=N`, or SSE's `Last-Event-ID`, else 0.
    let cursor: Int
    /// How long a long-poll may wait, in seconds (`?timeout=`).
    let pollTimeout: Int
    /// CORS headers for the answer.
    let headers: HTTPHeaders

    /// The session has ended and the client already has its every event: nothing will ever come.
    var hasEverything: Bool { session.state.isTerminal && cursor >= session.lastSeq }
}
