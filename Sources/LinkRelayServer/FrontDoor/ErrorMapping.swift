import LinkRelayCore
import Logging
import NIOHTTP1
import ProveAPI

/// The one place errors become answers: problem+json for the API, an HTML page for a person. What it
/// does not know is a 500, logged by its type and never echoed.
struct ErrorMapping: Sendable {
    let pages: Pages
    let logger: Logger

    func answer(for error: any Error, audience: Route.Audience) -> Answer {
        let problem = problem(for: error)
        switch audience {
        case .api: return problem.answer
        case .person: return page(for: problem.status)
        }
    }

    func problem(for error: any Error) -> Problem {
        if let known = Self.knownProblem(error) { return known }
        logger.error("Request failed", metadata: ["error.type": "\(type(of: error))"])
        return .internalError
    }

    /// The problem of an error the relay raises on purpose; nil for any other (a store's, say).
    static func knownProblem(_ error: any Error) -> Problem? {
        switch error {
        case let problem as Problem: problem
        case let error as SessionError: problem(error)
        case let rejection as CreateSessionRequest.Rejection: problem(rejection)
        case let error as ProveClientError: problem(error)
        default: nil
        }
    }

    /// The page a person's browser gets for an error of this status.
    func page(for status: HTTPResponseStatus) -> Answer {
        switch status {
        case .notFound: pages.page("error-unknown", status: .notFound)
        case .badRequest: pages.page("error-bad-link", status: .badRequest)
        default: pages.page("error-unavailable", status: status)
        }
    }

    static func problem(_ error: SessionError) -> Problem {
        switch error {
        case .notFound: .notFound("No session with this id.")
        case .alreadyEnded: .conflict("The session has already ended.")
        case .idempotencyKeyReused:
            Problem(
                status: .unprocessableEntity, title: "Idempotency-Key reused",
                detail: "This Idempotency-Key was used with a different request body.")
        case .idempotencyKeyInProgress: .conflict("A request with this Idempotency-Key is in progress; retry it.")
        }
    }

    /// A refused `POST /v1/sessions` body: 413 over the size, 400 malformed or unknown fields, 422 with every
    /// invalid field named.
    static func problem(_ rejection: CreateSessionRequest.Rejection) -> Problem {
        switch rejection {
        case .tooLarge:
            Problem(
                status: .payloadTooLarge, title: "Content Too Large",
                detail: "The body may be at most \(CreateSessionRequest.maximumBodySize) bytes.")
        case .malformed(let detail): .badRequest(detail)
        case .invalid(let errors): .invalid(errors.map { .init(field: $0.field, message: $0.message) })
        }
    }

    /// How a Prove failure reaches the integrator: 502 with Prove's code, or 503.
    static func problem(_ error: ProveClientError) -> Problem {
        switch error {
        case .rejected(let status, let body):
            let code = body?.code.map { "code \($0)" } ?? "no code"
            let message = body?.message ?? "no message"
            return Problem(
                status: .badGateway, title: "Prove rejected the request",
                detail: "Prove answered \(status) (\(code)): \(message)")
        case .unavailable(let reason):
            return Problem(
                status: .serviceUnavailable, title: "Prove unavailable",
                detail: "Prove could not be reached after retries: \(reason)", headers: ["Retry-After": "5"])
        }
    }
}
