import Foundation
import LinkRelayCore
import NIOCore
import NIOHTTP1

/// The server-to-server API: create, read and cancel sessions (`Authorization: Bearer <api key>`: each
/// route's guard, `Route.Guard.apiKey`, establishes the caller). Every route that names a session answers
/// another tenant's as an unknown one (404).
final class SessionsController: Sendable {
    let service: SessionService
    let apiKeys: APIKeys
    let publicURL: String
    let limits: RequestLimits
    /// The channels' checks, which the finish hook shares when a page calls it with the channel token.
    let gate: ChannelGate

    init(
        service: SessionService, apiKeys: APIKeys, publicURL: String, limits: RequestLimits, gate: ChannelGate
    ) {
        self.service = service
        self.gate = gate
        self.apiKeys = apiKeys
        self.publicURL = publicURL
        self.limits = limits
    }

    /// `POST /v1/sessions`.
    func create(_ request: RelayRequest) throws -> Reply {
        let caller = try request.caller()
        guard limits.allowCreate(keyID: caller.keyID) else { throw LimitExceeded() }
        let input = try CreateSessionRequest.validate(
            try Self.jsonBody(request), maximumHold: RelayConfiguration.maximumHold
        ).get()
        let key = request.headers.first(name: "Idempotency-Key")
        if let key, key.isEmpty || key.count > 255 {
            throw Problem.badRequest("Idempotency-Key must be 1 to 255 characters.")
        }
        // Scoped to the tenant: its keys share them (a key can be rotated under a retried create), and
        // another tenant's request with the same Idempotency-Key is a request of its own, never an answer
        // with the first one's session and channel token.
        let scopedKey = key.map { caller.tenant + "/" + $0 }
        // Before tenants, an Idempotency-Key was scoped to the API key's id; those sessions are `default`'s.
        let legacyKey = caller.tenant == Tenant.defaultName ? key.map { caller.keyID + ":" + $0 } : nil
        return .later { [service, publicURL] in
            let session = try await service.create(
                input, tenant: caller.tenant, idempotencyKey: scopedKey, legacyKey: legacyKey)
            return .json(CreatedSession(session, publicURL: publicURL), status: .created)
        }
    }

    /// `GET /v1/sessions/{id}`.
    func show(_ request: RelayRequest) throws -> Reply {
        let tenant = try request.caller().tenant
        let id = try request.parameter("id")
        return .later { [service] in
            let session = try await service.session(id, of: tenant)
            let events = try await service.events(of: id)
            return .json(SessionView(session, events: events, at: service.now()))
        }
    }

    /// `POST /v1/sessions/{id}/cancel`.
    func cancel(_ request: RelayRequest) throws -> Reply {
        let tenant = try request.caller().tenant
        let id = try request.parameter("id")
        return .later { [service] in
            let session = try await service.cancel(sessionID: id, tenant: tenant)
            let events = try await service.events(of: id)
            return .json(SessionView(session, events: events, at: service.now()))
        }
    }

    /// The largest finish body the relay reads (`{"redirectUrl":"…"}`).
    static let maximumFinishBody = 2048

    /// `POST /v1/sessions/{id}/finish` (API.md v1.1): by the backend with the API key, or by the page
    /// or the app with the channel token (the route's guard, `apiKeyOrChannelToken`, has checked that an
    /// `Origin` is some tenant's and that one of the two came). An optional `redirectUrl`, checked by the
    /// landing's rules, must be this session's link; its `authId` is recorded. Answers 202 while the
    /// session is live, 200 once it has ended. Its errors carry the CORS headers of an allowed origin (the
    /// route's `cors`), so that a page of that origin can read them. With an API key, another tenant's
    /// session is unknown (404); with the channel token, the origin must be one of the session's tenant's,
    /// and a token that does not match is answered as an unknown session (`ChannelGate.unknownSession`).
    func finish(_ request: RelayRequest) throws -> Reply {
        let id = try request.parameter("id")
        let (caller, token): (APIKeys.Caller?, String?)
        switch request.credential {
        case .apiKey(let key): (caller, token) = (key, nil)
        case .channelToken(let presented): (caller, token) = (nil, presented)
        case .none, .operator: throw Problem.unauthorized("The API key or the channel token is required.")
        }
        let origin = request.headers.first(name: "Origin")
        guard limits.allowFinish(sessionID: id) else { throw LimitExceeded() }
        let redirect = try Self.finishRedirect(request.body)
        return .later { [service, gate] in
            let stored: Session
            var headers: HTTPHeaders = [:]
            if let caller {
                stored = try await service.session(id, of: caller.tenant)
            } else {
                guard let session = try await service.anyTenantsSession(id) else { throw SessionError.notFound }
                if let refused = gate.refusedOrigin(origin, tenant: session.owner) { throw refused }
                guard let token, Secrets.constantTimeEquals(token, session.channelToken) else {
                    throw await gate.unknownSession()
                }
                (stored, headers) = (session, gate.corsHeaders(origin, tenant: session.owner))
            }
            if let redirect, redirect.linkKey != stored.linkKey {
                throw Problem.badRequest("The redirectUrl is not this session's link.")
            }
            let session = try await service.finished(sessionID: id, authId: redirect?.parameters.authId)
            return .json(
                FinishedSession(sessionId: session.id, state: session.state),
                status: session.state.isTerminal ? .ok : .accepted, headers: headers)
        }
    }

    /// The finish body's redirect: none for an empty body; 400 unless a URL the landing would take.
    static func finishRedirect(_ body: ByteBuffer?) throws -> LandingRedirect? {
        guard let url = try onlyField("redirectUrl", of: body) else { return nil }
        guard let url = url as? String else { throw Problem.badRequest("redirectUrl must be a string.") }
        switch LandingRedirect.parse(url) {
        case .success(let redirect): return redirect
        case .failure(let rejection): throw Problem.badRequest("redirectUrl is not a valid redirect: \(rejection).")
        }
    }

    /// `POST /v1/sessions/{id}/bind` (API key), body `{"phoneNumber"?}` (the session's when absent).
    func bind(_ request: RelayRequest) throws -> Reply {
        let tenant = try request.caller().tenant
        let id = try request.parameter("id")
        var phoneNumber: String?
        if let value = try Self.onlyField("phoneNumber", of: request.body) {
            guard let phone = value as? String, (1...20).contains(phone.count),
                phone.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "+") })
            else { throw Problem.badRequest("phoneNumber must be 1 to 20 digits (and +).") }
            phoneNumber = phone
        }
        return .later { [service, phoneNumber] in
            .json(BindingView(try await service.bind(sessionID: id, tenant: tenant, phoneNumber: phoneNumber)))
        }
    }

    /// `POST /v1/sessions/{id}/challenge` (API key), body `{"dob"}`, `{"ssn"}` or nothing (the create's).
    func challenge(_ request: RelayRequest) throws -> Reply {
        let tenant = try request.caller().tenant
        let id = try request.parameter("id")
        let input = try PrefillStepBody.challenge(try Self.jsonBody(request)).get()
        return .later { [service] in
            let answer = try await service.challenge(sessionID: id, tenant: tenant, input)
            return .json(
                PrefillStepView(
                    success: answer.success, individual: answer.individual.map(PrefillIndividual.init),
                    next: answer.next))
        }
    }

    /// `POST /v1/sessions/{id}/complete` (API key), body `{"individual":{…}}`.
    func complete(_ request: RelayRequest) throws -> Reply {
        let tenant = try request.caller().tenant
        let id = try request.parameter("id")
        let individual = try PrefillStepBody.complete(try Self.jsonBody(request)).get()
        return .later { [service] in
            let answer = try await service.complete(sessionID: id, tenant: tenant, individual)
            return .json(PrefillStepView(success: answer.success, next: answer.next))
        }
    }

    /// The body as read; none means it was over the route's limit (413).
    private static func jsonBody(_ request: RelayRequest) throws -> Data {
        guard let body = request.body else { throw CreateSessionRequest.Rejection.tooLarge }
        return Data(body.readableBytesView)
    }

    /// The one, optional, field of a small body: nil for an empty body or no field; 400 for anything but
    /// a JSON object with at most that field, once (at any depth); 413 over the route's maximum (the body
    /// is then nil).
    private static func onlyField(_ name: String, of body: ByteBuffer?) throws -> Any? {
        guard let body else {
            throw Problem(.payloadTooLarge, "The body is too large.")
        }
        guard body.readableBytes > 0 else { return nil }
        let data = Data(body.readableBytesView)
        if let broken = StrictJSON.check(data) { throw Problem(.malformedJSON, broken.detail) }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            Set(object.keys).isSubset(of: [name])
        else { throw Problem.badRequest("The body is {\"\(name)\": …} or nothing.") }
        if let duplicate = JSONDuplicateKey.first(in: data) { throw Problem.badRequest(duplicate.detail) }
        return object[name]
    }

}
