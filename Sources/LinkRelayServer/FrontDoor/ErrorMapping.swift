import LinkRelayCore
import Logging
import NIOHTTP1
import ProveAPI

/// The one place errors become answers: problem+json for the API, an HTML page for a person (the
/// phone's landing, the demo). What it does not know is a 500, logged by its type and never echoed.
final class ErrorMapping: Sendable {
    let pages: Pages
    let logger: Logger

    init(pages: Pages, logger: Logger) {
        self.pages = pages
        self.logger = logger
    }

    func answer(for error: any Error, audience: Route.Audience) -> Answer {
        // Over a limit: a bare 429, no detail and no precise Retry-After (security-anchors R1.9).
        if error is LimitExceeded, audience == .api { return .tooManyRequests }
        let problem = problem(for: error)
        switch audience {
        case .api: return problem.answer
        case .person: return page(for: problem)
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
        case let rejection as LandingRedirect.Rejection: problem(rejection)
        case let error as ProveClientError: problem(error)
        case StoreError.unavailable:
            Problem(
                status: .serviceUnavailable, title: "Store unavailable",
                detail: "The relay cannot store anything right now, so nothing was changed; retry shortly.",
                headers: ["Retry-After": "5"])
        // Not to be retried at once: the file needs an operator. Another instance may answer meanwhile.
        case StoreError.corrupt:
            Problem(
                status: .serviceUnavailable, title: "Store corrupt",
                detail:
                    "The relay's database is damaged and it can neither read nor store sessions until an operator restores it.",
                headers: ["Retry-After": "60"])
        case is LimitExceeded: Problem(status: .tooManyRequests, title: "Too Many Requests", detail: "Try again later.")
        default: nil
        }
    }

    /// The page a person's browser gets for a problem: one per status the landing answers, with the
    /// problem's own headers (a 405's `Allow`).
    func page(for problem: Problem) -> Answer {
        let template =
            switch problem.status {
            case .badRequest, .forbidden, .methodNotAllowed: "error-bad-link"
            case .notFound: "error-unknown"
            case .conflict: "error-used"
            case .gone: "error-expired"
            case .tooManyRequests: "error-busy"
            // The rest of what a phone's own request gets wrong (a form too large, a head too long): open
            // the link again.
            case let status where status.code < 500: "error-bad-link"
            default: "error-unavailable"
            }
        return pages.page(template, status: problem.status, headers: problem.headers)
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
        case .expired: Problem(status: .gone, title: "Gone", detail: "The session's hold has passed.")
        case .bindNotAllowed:
            .conflict(
                "A bind is allowed once, on a session whose outcome is possession_required, within 15 minutes of its creation."
            )
        case .stepNotAllowed(let detail): .conflict(detail)
        }
    }

    /// A landing that breaks the landing's rules: 400, or 404 for a path that is no link of the relay's.
    static func problem(_ rejection: LandingRedirect.Rejection) -> Problem {
        switch rejection {
        case .badParameters(let reason): .badRequest("This link is not valid: \(reason.rawValue).")
        case .notALink: .notFound("No such link.")
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
