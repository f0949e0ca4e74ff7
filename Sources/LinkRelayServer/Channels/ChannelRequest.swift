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

/// What a channel may start with, once the gate let it through. A channel keeps it while it is open, so
/// it holds only what the channel needs, not the session it was read from (docs/memory.md).
struct ChannelAdmission: Sendable {
    let sessionID: String
    /// The last event the client has: `?after=N`, or SSE's `Last-Event-ID`, else 0.
    let cursor: Int
    /// How long a long-poll may wait, in seconds (`?timeout=`).
    let pollTimeout: Int
    /// CORS headers for the answer.
    let headers: HTTPHeaders

    /// The session had ended when it was read, and the client already has its every event: nothing will
    /// ever come.
    let hasEverything: Bool

    init(_ session: Session, cursor: Int, pollTimeout: Int, headers: HTTPHeaders) {
        sessionID = session.id
        self.cursor = cursor
        self.pollTimeout = pollTimeout
        self.headers = headers
        hasEverything = session.state.isTerminal && cursor >= session.lastSeq
    }
}
