import Foundation
import Hummingbird
import LinkRelayCore

/// The server-to-server API: create, read and cancel sessions (`Authorization: Bearer <api key>`).
struct SessionsController {
    let service: SessionService
    let apiKeys: [String]
    let publicURL: String
    let limits: RequestLimits

    func addRoutes(to router: Router<RelayContext>) {
        let group = router.group("v1/sessions")
        group.post(use: create)
        group.get(":id", use: show)
        group.post(":id/cancel", use: cancel)
    }

    /// The index of the API key the request carries; every key is compared, in constant time.
    @discardableResult
    private func authorize(_ request: Request) throws -> Int {
        guard let token = request.bearerToken else { throw Problem.unauthorized() }
        var match: Int?
        for (index, key) in apiKeys.enumerated() where Secrets.constantTimeEquals(token, key) { match = index }
        guard let match else { throw Problem.unauthorized() }
        return match
    }

    @Sendable func create(_ request: Request, context: RelayContext) async throws -> Response {
        guard limits.allowCreate(keyIndex: try authorize(request)) else { return RequestLimits.tooManyRequests() }
        if let type = request.headers[.contentType], !type.lowercased().hasPrefix("application/json") {
            throw Problem(
                status: .unsupportedMediaType, title: "Unsupported Media Type",
                detail: "Send the body as application/json.")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: CreateSessionRequest.maximumBodySize)
        } catch {
            throw Problem(
                status: .contentTooLarge, title: "Content Too Large",
                detail: "The body may be at most \(CreateSessionRequest.maximumBodySize) bytes.")
        }
        let input = try CreateSessionRequest.parse(Data(buffer: body), maximumHold: RelayConfiguration.maximumHold)
        let key = request.headers[.init("Idempotency-Key")!]
        if let key, key.isEmpty || key.count > 255 {
            throw Problem.badRequest("Idempotency-Key must be 1 to 255 characters.")
        }
        let session = try await service.create(input, idempotencyKey: key)
        return try RelayJSON.response(CreatedSession(session, publicURL: publicURL), status: .created)
    }

    @Sendable func show(_ request: Request, context: RelayContext) async throws -> Response {
        try authorize(request)
        let id = try context.parameters.require("id")
        guard let session = try await service.store.session(id: id) else {
            throw Problem.notFound("No session with this id.")
        }
        let events = try await service.store.events(sessionID: id, after: 0)
        return try RelayJSON.response(SessionView(session, events: events))
    }

    @Sendable func cancel(_ request: Request, context: RelayContext) async throws -> Response {
        try authorize(request)
        let id = try context.parameters.require("id")
        let session = try await service.cancel(sessionID: id)
        let events = try await service.store.events(sessionID: id, after: 0)
        return try RelayJSON.response(SessionView(session, events: events))
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
