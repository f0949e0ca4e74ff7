import LinkRelayCore
import Logging
import NIOHTTP1
import NevisAPI
import ProveAPI

/// The one place errors become answers: problem+json for the API, an HTML page for a person (the
/// phone's landing, the demo). What it does not know is a 500, logged by its type and never echoed.
final class ErrorMapping: Sendable {
    let pages: Pages
    let logger: Logger
    /// `{public-url}/errors`, the page every problem's `type` points into; nil where none is served
    /// (`linkrelay sandbox`).
    let errorsPage: String?

    init(pages: Pages, logger: Logger, publicURL: String?) {
        self.pages = pages
        self.logger = logger
        self.errorsPage = publicURL.map { $0 + "/errors" }
    }

    func answer(for error: any Error, audience: Route.Audience) -> Answer {
        // Over a limit: a bare 429, no detail and no precise Retry-After (security-anchors R1.9).
        if error is LimitExceeded, audience == .api { return .tooManyRequests }
        let problem = problem(for: error)
        switch audience {
        case .api: return problem.answer(errorsPage: errorsPage)
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
        case let error as NevisClientError: problem(error)
        case StoreError.unavailable:
            Problem(
                .storeUnavailable, "The relay cannot store anything right now, so nothing was changed; retry shortly.",
                headers: ["Retry-After": "5"])
        // Not to be retried at once: the file needs an operator. Another instance may answer meanwhile.
        case StoreError.corrupt:
            Problem(
                .storeCorrupt,
                "The relay's database is damaged and it can neither read nor store sessions until an operator restores it.",
                headers: ["Retry-After": "60"])
        case is LimitExceeded: Problem(.rateLimited, "Try again later.")
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
        case .notFound: Problem(.sessionNotFound, "No session with this id.")
        case .alreadyEnded: Problem(.sessionEnded, "The session has already ended.")
        case .idempotencyKeyReused:
            Problem(.idempotencyKeyReused, "This Idempotency-Key was used with a different request body.")
        case .idempotencyKeyInProgress:
            Problem(.idempotencyKeyInProgress, "A request with this Idempotency-Key is in progress; retry it.")
        case .expired: Problem(.sessionExpired, "The session's hold has passed.")
        case .bindNotAllowed:
            Problem(
                .bindNotAllowed,
                "A bind is allowed once, on a session whose outcome is possession_required, within 15 minutes of its creation."
            )
        case .stepNotAllowed(let detail): Problem(.stepNotAllowed, detail)
        case .stepNotOffered(let flow, let step):
            Problem(
                .stepNotOffered,
                "This session is a \(flow.rawValue) flow; \(step) is a \(flow == .unify ? "Pre-Fill" : "Unify") step.")
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
            Problem(.payloadTooLarge, "The body may be at most \(CreateSessionRequest.maximumBodySize) bytes.")
        case .malformedJSON(let detail): Problem(.malformedJSON, detail)
        case .malformed(let detail): .badRequest(detail)
        case .invalid(let errors): .invalid(errors.map { .init(field: $0.field, message: $0.message) })
        }
    }

    /// How a Prove failure reaches the integrator. What the caller sent and Prove refused (a phone number
    /// it does not know or support, a field it rejects: a 400 with Prove's code) is 422; a step Prove
    /// calls out of order (8003, formerly 1003) is 409; credentials Prove refuses (401, 403, 8009: another
    /// product's) are the operator's to fix; the rest is Prove's own failure (502) or outage (503).
    static func problem(_ error: ProveClientError) -> Problem {
        switch error {
        case .rejected(let status, let body):
            let said =
                "Prove answered \(status) (" + (body?.code.map { "code \($0)" } ?? "no code") + "): "
                + (body?.message ?? "no message")
            switch (status, body?.code) {
            case (_, 8003?), (_, 1003?):
                return Problem(.stepOutOfOrder, said + ". Read the session's next step and call that one.")
            case (_, 8009?):
                return Problem(
                    .proveCredentials,
                    said
                        + ". The relay's Prove credentials belong to another Prove product than this flow's: the operator configures the flow's own."
                )
            case (401, _), (403, _), (_, 8002?):
                return Problem(
                    .proveCredentials, said + ". Prove refused the relay's credentials: the operator checks them.")
            // 8000 is Prove's internal error, 8008 a correlation the relay sent: neither is the caller's.
            case (400, 8000?), (400, 8008?):
                return Problem(.proveFailed, said)
            case (400, _):
                let aboutPhone = body?.message.lowercased().contains("phone") ?? false
                return Problem(aboutPhone ? .phoneNumberNotSupported : .rejectedByProve, said)
            default:
                return Problem(.proveFailed, said)
            }
        case .unavailable(let reason):
            return Problem(
                .proveUnavailable, "Prove could not be reached after retries: \(reason)", headers: ["Retry-After": "5"])
        }
    }

    static func problem(_ error: NevisClientError) -> Problem {
        switch error {
        case .rejected(let status, let detail):
            let said = "Nevis answered \(status)" + (detail.map { ": \($0)" } ?? "")
            return status == 401 || status == 403
                ? Problem(
                    .nevisCredentials, said + ". Nevis refused the relay's credentials: the operator checks them.")
                : Problem(.rejectedByNevis, said)
        case .unavailable(let reason):
            return Problem(
                .nevisUnavailable, "Nevis could not be reached after retries: \(reason)", headers: ["Retry-After": "5"])
        }
    }
}
