import LinkRelayCore
import NIOHTTP1

/// One line of the route table (`Routes`): a method and a path pattern, whom errors are written for, who
/// may call it (its guard), how much body is read and of which types, its CORS, and the handler.
final class Route: Sendable {
    /// Who reads this route's errors.
    enum Audience: String, Sendable {
        /// An integrator's backend or a desktop's script: problem+json.
        case api
        /// A person's browser (the phone's landing, the demo): an HTML page.
        case person
    }

    /// Who may call a route, checked on the request's head before any body byte is read (`admit`).
    /// What it establishes is the request's `credential`.
    enum Guard: String, Sendable {
        /// Anyone.
        case none
        /// `Authorization: Bearer <api key>`: the caller's tenant and key (401 without one).
        case apiKey = "api-key"
        /// A desktop channel: an `Origin` some tenant allows, or none (403); the channel token as presented.
        /// `ChannelGate` checks the session's tenant's origins and its token once it has read the session.
        case channelToken = "channel-token"
        /// The finish hook: an API key, or a channel token from an origin some tenant allows (403), one
        /// of the two required (401).
        case apiKeyOrChannelToken = "api-key|channel-token"
        /// The ops page: a token of the client's ops limit (429, a page), then HTTP Basic with an ops key
        /// as the password, or without any ops key a `default` tenant's API key (401, a sign-in page;
        /// counted as a security event when the request had an `Authorization` header).
        case opsBasic = "ops-basic"
    }

    /// Which browser pages may read a route's answers.
    enum CORS: String, Sendable {
        /// None but the relay's own (no CORS headers).
        case none
        /// Pages of the origins the session's tenant allows: its errors carry an allowed origin's CORS
        /// headers (`ChannelGate.readable`), its answers the tenant's own (the handler's).
        case tenantOrigins = "tenant-origins"
    }

    let method: HTTPMethod
    let pattern: PathPattern
    let audience: Audience
    let `guard`: Guard
    /// The most body bytes read; a larger body reaches the handler as nil.
    let maximumBody: Int
    /// The media types a body may be sent as (`Content-Type` up to its parameters, any case); empty: any.
    /// A body that names another, or none, answers 415; an empty body (none, or `Content-Length: 0`) is
    /// taken whatever it names.
    let accepts: [String]
    let cors: CORS
    /// The answer's task is cancelled when the client's connection closes: the sandbox's hangs end so.
    let cancelledWhenClientLeaves: Bool
    let handler: @Sendable (RelayRequest) throws -> Reply
    /// What the guards check against; set when the line joins a table (`Routes`). A route without them
    /// admits only what needs no check.
    let guards: Guards?

    init(
        _ method: HTTPMethod, _ pattern: PathPattern, _ audience: Audience, guard: Guard = .none,
        body maximumBody: Int = 0, accepts: [String] = [], cors: CORS = .none, cancelledWhenClientLeaves: Bool = false,
        guards: Guards? = nil, _ handler: @escaping @Sendable (RelayRequest) throws -> Reply
    ) {
        self.method = method
        self.pattern = pattern
        self.audience = audience
        self.guard = `guard`
        self.maximumBody = maximumBody
        self.accepts = accepts.map { $0.lowercased() }
        self.cors = cors
        self.cancelledWhenClientLeaves = cancelledWhenClientLeaves
        self.guards = guards
        self.handler = handler
    }

    /// A route of the API (`.api`).
    convenience init(
        _ method: HTTPMethod, _ pattern: PathPattern, guard: Guard = .none, body maximumBody: Int = 0,
        accepts: [String] = [], cors: CORS = .none, cancelledWhenClientLeaves: Bool = false,
        _ handler: @escaping @Sendable (RelayRequest) throws -> Reply
    ) {
        self.init(
            method, pattern, .api, guard: `guard`, body: maximumBody, accepts: accepts, cors: cors,
            cancelledWhenClientLeaves: cancelledWhenClientLeaves, handler)
    }

    /// This line with the guards' services, as a table holds it.
    func checked(by guards: Guards) -> Route {
        Route(
            method, pattern, audience, guard: `guard`, body: maximumBody, accepts: accepts, cors: cors,
            cancelledWhenClientLeaves: cancelledWhenClientLeaves, guards: guards, handler)
    }

    /// Runs the guard and the content-type check on the request's head alone, before any body byte is
    /// read: nil lets the request go on, with what the guard established in `request.credential`;
    /// otherwise the answer that refuses it.
    func admit(_ request: inout RelayRequest) -> Answer? {
        // A landing, the hot path, needs neither.
        if `guard` == .none, accepts.isEmpty { return nil }
        if `guard` != .none {
            // A line outside a table cannot check a caller: it lets none through.
            guard let guards else { return Problem.unauthorized().answer(errorsPage: nil) }
            let asked = request
            if let refusal = guards.check(`guard`, &request, refusing: { failure($0, asked, errors: guards.errors) }) {
                return refusal
            }
        }
        // One rule for every route that reads JSON: a body must name the route's type (a form's or curl's
        // default type, or none, is not taken for JSON); an empty body is no body, whatever type it names
        // (aiohttp names application/octet-stream on a bodiless POST).
        if !accepts.isEmpty, FrontDoor.body(of: request.head) != .none,
            request.headers.first(name: "Content-Type").map({ !accepts($0) }) ?? true
        {
            let names = accepts.joined(separator: " or ")
            let problem = Problem(.unsupportedMediaType, "Send the body with Content-Type: \(names).")
            return guards.map { failure(problem, request, errors: $0.errors) } ?? problem.answer(errorsPage: nil)
        }
        return nil
    }

    /// Whether `contentType`'s media type (before any `;`) is one this route reads.
    private func accepts(_ contentType: String) -> Bool {
        let media = contentType.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).lowercased()
        return accepts.contains(media)
    }

    /// The handler's reply to `request`; an error it throws is answered as its audience reads errors.
    func reply(to request: RelayRequest, errors: ErrorMapping) -> Reply {
        do {
            let reply = try handler(request)
            guard cors == .tenantOrigins, case .later(let work) = reply else { return reply }
            // The task's errors, too, are readable by the page that asked.
            return .later { [self] in
                do { return try await work() } catch { throw readable(error, request) }
            }
        } catch {
            return .now(failure(error, request, errors: errors))
        }
    }

    /// What a `.later` reply's work answers; an error it throws is answered as for the handler's.
    func answer(_ work: @Sendable () async throws -> Answer, errors: ErrorMapping) async -> Answer {
        do {
            return try await work()
        } catch {
            return errors.answer(for: error, audience: audience)
        }
    }

    /// The answer to `error` for this route's audience, readable by an allowed page where the route's
    /// CORS says so.
    private func failure(_ error: any Error, _ request: RelayRequest, errors: ErrorMapping) -> Answer {
        errors.answer(for: readable(error, request), audience: audience)
    }

    private func readable(_ error: any Error, _ request: RelayRequest) -> any Error {
        guard cors == .tenantOrigins, let gate = guards?.gate else { return error }
        return gate.readable(error, origin: request.headers.first(name: "Origin"))
    }
}

/// What the routes' guards check against, one for a whole table.
final class Guards: Sendable {
    let apiKeys: APIKeys
    let gate: ChannelGate
    let limits: RequestLimits
    let pages: Pages
    let errors: ErrorMapping

    init(apiKeys: APIKeys, gate: ChannelGate, limits: RequestLimits, pages: Pages, errors: ErrorMapping) {
        self.apiKeys = apiKeys
        self.gate = gate
        self.limits = limits
        self.pages = pages
        self.errors = errors
    }

    /// Runs `kind` on `request`'s head: nil when it passes (what it established is in
    /// `request.credential`), else its refusal; `refusing` answers an error as the route writes errors.
    func check(
        _ kind: Route.Guard, _ request: inout RelayRequest, refusing: (any Error) -> Answer
    ) -> Answer? {
        switch kind {
        case .none:
            return nil
        case .apiKey:
            guard let caller = request.bearerToken.flatMap(apiKeys.caller) else {
                return refusing(Problem.unauthorized())
            }
            request.credential = .apiKey(caller)
        case .channelToken, .apiKeyOrChannelToken:
            if kind == .apiKeyOrChannelToken, let caller = request.bearerToken.flatMap(apiKeys.caller) {
                request.credential = .apiKey(caller)
                return nil
            }
            if let refused = gate.refusedOrigin(request.headers.first(name: "Origin")) { return refusing(refused) }
            let token: String?
            do {
                token = try request.queryItem("token") ?? request.bearerToken
            } catch {
                return refusing(error)
            }
            guard let token else {
                return refusing(
                    kind == .channelToken
                        ? Problem.channelTokenRequired
                        : Problem.unauthorized("The API key or the channel token is required."))
            }
            request.credential = .channelToken(token)
        case .opsBasic:
            // Every request spends a token, a wrong password too: guessing a key does not get far.
            guard limits.allowOps(client: limits.client(request)) else {
                return pages.page("ops-signin", ["busy": true], status: .tooManyRequests)
            }
            guard let password = OpsPage.basicPassword(request.headers), apiKeys.opensOps(password) else {
                // A browser asks without credentials first and sends them after the Basic prompt: only a
                // request that offered some and failed is a security event.
                if request.headers.contains(name: "Authorization") { limits.securityEvents.record(.opsUnauthorized) }
                return pages.page(
                    "ops-signin", ["opsKeys": apiKeys.hasOpsKeys], status: .unauthorized,
                    headers: ["WWW-Authenticate": "Basic realm=\"\(OpsPage.realm)\", charset=\"UTF-8\""])
            }
            request.credential = .operator
        }
        return nil
    }
}
