import Foundation
import LinkRelayCore

/// The server-to-server API: create, read and cancel sessions (`Authorization: Bearer <api key>`).
struct SessionsController: Sendable {
    let service: SessionService
    let apiKeys: [String]
    let publicURL: String
    let limits: RequestLimits

    /// `POST /v1/sessions`.
    func create(_ request: RelayRequest) throws -> Reply {
        guard limits.allowCreate(keyIndex: try authorize(request)) else { return .now(.tooManyRequests) }
        if let type = request.headers.first(name: "Content-Type"), !type.lowercased().hasPrefix("application/json") {
            throw Problem(
                status: .unsupportedMediaType, title: "Unsupported Media Type",
                detail: "Send the body as application/json.")
        }
        guard let body = request.body else { throw CreateSessionRequest.Rejection.tooLarge }
        let input = try CreateSessionRequest.validate(
            Data(body.readableBytesView), maximumHold: RelayConfiguration.maximumHold
        ).get()
        let key = request.headers.first(name: "Idempotency-Key")
        if let key, key.isEmpty || key.count > 255 {
            throw Problem.badRequest("Idempotency-Key must be 1 to 255 characters.")
        }
        return .later { [service, publicURL] in
            let session = try await service.create(input, idempotencyKey: key)
            return .json(CreatedSession(session, publicURL: publicURL), status: .created)
        }
    }

    /// `GET /v1/sessions/{id}`.
    func show(_ request: RelayRequest) throws -> Reply {
        try authorize(request)
        let id = String(request.parameters[0])
        return .later { [service] in
            guard let session = try await service.store.session(id: id) else { throw SessionError.notFound }
            let events = try await service.store.events(sessionID: id, after: 0)
            return .json(SessionView(session, events: events))
        }
    }

    /// `POST /v1/sessions/{id}/cancel`.
    func cancel(_ request: RelayRequest) throws -> Reply {
        try authorize(request)
        let id = String(request.parameters[0])
        return .later { [service] in
            let session = try await service.cancel(sessionID: id)
            let events = try await service.store.events(sessionID: id, after: 0)
            return .json(SessionView(session, events: events))
        }
    }

    /// The index of the API key the request carries; every key is compared, in constant time.
    @discardableResult
    private func authorize(_ request: RelayRequest) throws -> Int {
        guard let token = request.bearerToken else { throw Problem.unauthorized() }
        var match: Int?
        for (index, key) in apiKeys.enumerated() where Secrets.constantTimeEquals(token, key) { match = index }
        guard let match else { throw Problem.unauthorized() }
        return match
    }
}

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
