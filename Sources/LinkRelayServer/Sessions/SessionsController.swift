import Crypto
import Foundation
import LinkRelayCore

/// The server-to-server API: create, read and cancel sessions (`Authorization: Bearer <api key>`).
final class SessionsController: Sendable {
    let service: SessionService
    let apiKeys: [String]
    /// Per API key, the prefix that scopes its Idempotency-Keys: a digest, so the key itself is never
    /// stored, and stable when keys are added, removed or reordered.
    private let idempotencyScopes: [String]
    let publicURL: String
    let limits: RequestLimits

    init(service: SessionService, apiKeys: [String], publicURL: String, limits: RequestLimits) {
        self.service = service
        self.apiKeys = apiKeys
        self.idempotencyScopes = apiKeys.map { key in
            SHA256.hash(data: Data(key.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
        }
        self.publicURL = publicURL
        self.limits = limits
    }

    /// `POST /v1/sessions`.
    func create(_ request: RelayRequest) throws -> Reply {
        let keyIndex = try authorize(request)
        guard limits.allowCreate(keyIndex: keyIndex) else { throw LimitExceeded() }
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
        // Scoped to the API key, as Stripe does: another key's request with the same Idempotency-Key is
        // a request of its own, never an answer with the first key's session and channel token.
        let scopedKey = key.map { idempotencyScopes[keyIndex] + ":" + $0 }
        return .later { [service, publicURL] in
            let session = try await service.create(input, idempotencyKey: scopedKey)
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
