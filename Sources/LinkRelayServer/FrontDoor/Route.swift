import NIOHTTP1

/// One line of the route table (`Routes`): a method and a path pattern, whom errors are written for,
/// how much body is read, and the handler.
final class Route: Sendable {
    /// Who reads this route's errors.
    enum Audience: Sendable {
        /// An integrator's backend or a desktop's script: problem+json.
        case api
        /// A person's browser (the phone's landing, the demo): an HTML page.
        case person
    }

    let method: HTTPMethod
    let pattern: PathPattern
    let audience: Audience
    /// The most body bytes read; a larger body reaches the handler as nil.
    let maximumBody: Int
    /// The answer's task is cancelled when the client's connection closes: the sandbox's hangs end so.
    let cancelledWhenClientLeaves: Bool
    let handler: @Sendable (RelayRequest) throws -> Reply

    init(
        _ method: HTTPMethod, _ pattern: PathPattern, _ audience: Audience, body maximumBody: Int = 0,
        cancelledWhenClientLeaves: Bool = false, _ handler: @escaping @Sendable (RelayRequest) throws -> Reply
    ) {
        self.method = method
        self.pattern = pattern
        self.audience = audience
        self.maximumBody = maximumBody
        self.cancelledWhenClientLeaves = cancelledWhenClientLeaves
        self.handler = handler
    }

    /// The handler's reply to `request`; an error it throws is answered as its audience reads errors.
    func reply(to request: RelayRequest, errors: ErrorMapping) -> Reply {
        do {
            return try handler(request)
        } catch {
            return .now(errors.answer(for: error, audience: audience))
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

    /// A route of the API (`.api`).
    convenience init(
        _ method: HTTPMethod, _ pattern: PathPattern, body maximumBody: Int = 0,
        cancelledWhenClientLeaves: Bool = false,
        _ handler: @escaping @Sendable (RelayRequest) throws -> Reply
    ) {
        self.init(
            method, pattern, .api, body: maximumBody, cancelledWhenClientLeaves: cancelledWhenClientLeaves, handler)
    }
}
