import Foundation
import LinkRelaySupport
import NIOCore
import NIOHTTP1

/// Every kind of error the relay answers, each a stable snake_case word: problem+json's `code`, and the
/// anchor of its entry on `GET /errors` (its `type` is `{public-url}/errors#{code}`). A code fixes the
/// status and the title, so an answer and the page that explains it cannot disagree.
enum ErrorCode: String, CaseIterable, Sendable {
    case malformedRequest = "malformed_request"
    case malformedJSON = "malformed_json"
    case unauthorized
    case channelTokenRequired = "channel_token_required"
    case originNotAllowed = "origin_not_allowed"
    case notFound = "not_found"
    case sessionNotFound = "session_not_found"
    case webhookMessageNotFound = "webhook_message_not_found"
    case methodNotAllowed = "method_not_allowed"
    case sessionEnded = "session_ended"
    case bindNotAllowed = "bind_not_allowed"
    case stepNotAllowed = "step_not_allowed"
    case stepNotOffered = "step_not_offered"
    case stepOutOfOrder = "step_out_of_order"
    case idempotencyKeyInProgress = "idempotency_key_in_progress"
    case sessionExpired = "session_expired"
    case payloadTooLarge = "payload_too_large"
    case unsupportedMediaType = "unsupported_media_type"
    case expectationFailed = "expectation_failed"
    case upgradeRequired = "upgrade_required"
    case invalidRequest = "invalid_request"
    case idempotencyKeyReused = "idempotency_key_reused"
    case phoneNumberNotSupported = "phone_number_not_supported"
    case rejectedByProve = "rejected_by_prove"
    case rateLimited = "rate_limited"
    case internalError = "internal_error"
    case notImplemented = "not_implemented"
    case proveFailed = "prove_failed"
    case proveCredentials = "prove_credentials"
    case proveUnavailable = "prove_unavailable"
    case rejectedByNevis = "rejected_by_nevis"
    case nevisCredentials = "nevis_credentials"
    case nevisUnavailable = "nevis_unavailable"
    case storeUnavailable = "store_unavailable"
    case storeCorrupt = "store_corrupt"

    var status: HTTPResponseStatus {
        switch self {
        case .malformedRequest, .malformedJSON: .badRequest
        case .unauthorized, .channelTokenRequired: .unauthorized
        case .originNotAllowed: .forbidden
        case .notFound, .sessionNotFound, .webhookMessageNotFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .sessionEnded, .bindNotAllowed, .stepNotAllowed, .stepNotOffered, .stepOutOfOrder,
            .idempotencyKeyInProgress:
            .conflict
        case .sessionExpired: .gone
        case .payloadTooLarge: .payloadTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .expectationFailed: .expectationFailed
        case .upgradeRequired: .upgradeRequired
        case .invalidRequest, .idempotencyKeyReused, .phoneNumberNotSupported, .rejectedByProve, .rejectedByNevis:
            .unprocessableEntity
        case .rateLimited: .tooManyRequests
        case .internalError: .internalServerError
        case .notImplemented: .notImplemented
        case .proveFailed, .proveCredentials, .nevisCredentials: .badGateway
        case .proveUnavailable, .nevisUnavailable, .storeUnavailable, .storeCorrupt: .serviceUnavailable
        }
    }

    var title: String {
        switch self {
        case .malformedRequest: "Malformed request"
        case .malformedJSON: "Malformed JSON"
        case .unauthorized: "Unauthorized"
        case .channelTokenRequired: "Channel token required"
        case .originNotAllowed: "Origin not allowed"
        case .notFound: "Not found"
        case .sessionNotFound: "Session not found"
        case .webhookMessageNotFound: "Webhook message not found"
        case .methodNotAllowed: "Method not allowed"
        case .sessionEnded: "Session ended"
        case .bindNotAllowed: "Bind not allowed"
        case .stepNotAllowed: "Step not allowed now"
        case .stepNotOffered: "Step not offered by this flow"
        case .stepOutOfOrder: "Step out of order"
        case .idempotencyKeyInProgress: "Idempotency-Key in progress"
        case .sessionExpired: "Session expired"
        case .payloadTooLarge: "Content too large"
        case .unsupportedMediaType: "Unsupported media type"
        case .expectationFailed: "Expectation failed"
        case .upgradeRequired: "Upgrade required"
        case .invalidRequest: "Invalid request"
        case .idempotencyKeyReused: "Idempotency-Key reused"
        case .phoneNumberNotSupported: "Phone number not supported"
        case .rejectedByProve: "Rejected by Prove"
        case .rateLimited: "Too many requests"
        case .internalError: "Internal error"
        case .notImplemented: "Not implemented"
        case .proveFailed: "Prove failed"
        case .proveCredentials: "Prove credentials"
        case .proveUnavailable: "Prove unavailable"
        case .rejectedByNevis: "Rejected by Nevis"
        case .nevisCredentials: "Nevis credentials"
        case .nevisUnavailable: "Nevis unavailable"
        case .storeUnavailable: "Store unavailable"
        case .storeCorrupt: "Store corrupt"
        }
    }

    /// What the one who reads the answer does about it, as `GET /errors` says.
    var whatToDo: String {
        switch self {
        case .malformedRequest:
            "The request could not be read: a body that is not the JSON object the route takes, an unknown or duplicate field, a bad query parameter or header. Fix the request as the detail says; do not retry it unchanged."
        case .malformedJSON:
            "The body is not strict JSON (RFC 8259): no trailing commas, comments, single quotes, `NaN`, leading zeros or lone surrogates. The detail names the line and column; fix the body there."
        case .unauthorized:
            "Send a valid API key as `Authorization: Bearer <key>` (a channel: the session's channel token). A key of another tenant, or one removed from the relay's configuration, is refused the same way."
        case .channelTokenRequired:
            "A channel takes the session's channel token, as `?token=` or `Authorization: Bearer <token>`: the `channel.token` of the create's answer. A token that does not match is answered as an unknown session (404)."
        case .originNotAllowed:
            "The page's origin is not in its tenant's allowed origins. Add it to `--allowed-origin` (or the tenant's `allowedOrigins`) as `scheme://host[:port]`."
        case .notFound:
            "Nothing is served at this path. Check the URL against `/openapi.json`."
        case .sessionNotFound:
            "No session has this id for your tenant: it never existed, belongs to another tenant, or was deleted after the retention period. Create a new session."
        case .webhookMessageNotFound:
            "No webhook message has this id for your tenant, or your tenant has no webhook configured."
        case .methodNotAllowed:
            "The path exists under other methods: use one of those the `Allow` header lists."
        case .sessionEnded:
            "The session has ended and changes no more. Read its result with `GET /v1/sessions/{id}`, or create a new session."
        case .bindNotAllowed:
            "A bind is allowed once, on a Unify session whose outcome is `possession_required`, within 15 minutes of its creation. Read the session first."
        case .stepNotAllowed:
            "Prove's last `next` does not offer this step now (or Prove's 15-minute flow has passed, or another step of the session is under way). The detail names the steps allowed now; read the session's `prefill.next`."
        case .stepNotOffered:
            "The session's flow has no such step: `challenge` and `complete` are Pre-Fill steps, `bind` a Unify step. The detail names the session's flow; call the step its flow offers."
        case .stepOutOfOrder:
            "Prove refused the step as called out of order (its code 8003). Read the session's `prefill.next` and call the step it names."
        case .idempotencyKeyInProgress:
            "A request with this Idempotency-Key is still being answered. Retry it in a moment with the same key and body."
        case .sessionExpired:
            "The session's hold has passed. Create a new session."
        case .payloadTooLarge:
            "The body is larger than the route reads (the detail says how much). Send less."
        case .unsupportedMediaType:
            "A route that reads JSON takes its body only as `Content-Type: application/json`. Send the header with the body (a request without a body needs none)."
        case .expectationFailed:
            "The relay meets no `Expect` but `100-continue`. Drop the header."
        case .upgradeRequired:
            "Open this URL as a WebSocket."
        case .invalidRequest:
            "Some fields are invalid: `errors` lists each with why. Fix them; the request changed nothing."
        case .idempotencyKeyReused:
            "This Idempotency-Key came before with a different body. Use a new key for a new request."
        case .phoneNumberNotSupported:
            "Prove does not know or does not support this phone number (the detail carries Prove's code; in Prove's sandbox only its test users exist). Ask the person for another number."
        case .rejectedByProve:
            "Prove refused a field of the request (the detail carries Prove's code and message). Fix the field as it says; nothing was started."
        case .rateLimited:
            "Over a limit: the answer is a bare 429 with no body. Slow down and retry later."
        case .internalError:
            "The relay could not answer; the error is in its log. Retry; if it persists, tell the operator."
        case .notImplemented:
            "The relay decodes no transfer coding but `chunked`."
        case .proveFailed:
            "Prove failed to answer the request (the detail carries Prove's status and code). Retry later; if it persists, check Prove's status."
        case .proveCredentials:
            "Prove refused the relay's credentials: the operator's configuration (wrong client id or secret, the wrong environment, or credentials of another Prove product than the flow's). The operator fixes `PROVE_CLIENT_ID`/`PROVE_CLIENT_SECRET` or `--prove`."
        case .proveUnavailable:
            "Prove could not be reached after retries, or the relay's circuit breaker is open. Retry after `Retry-After` seconds."
        case .rejectedByNevis:
            "Nevis refused the operation (an unknown user, a user without a device, a message it does not take; the detail says what Nevis answered). Fix the request; nothing was started."
        case .nevisCredentials:
            "Nevis refused the relay's credentials: the operator checks `NEVIS_ACCESS_KEY` (Authentication Cloud) or `NEVIS_FIDO_TOKEN` (nevisFIDO) and `--nevis`."
        case .nevisUnavailable:
            "Nevis could not be reached after retries, or the relay's circuit breaker for it is open. Retry after `Retry-After` seconds."
        case .storeUnavailable:
            "The relay cannot store anything right now, so nothing was changed. Retry after `Retry-After` seconds."
        case .storeCorrupt:
            "The relay's database is damaged; an operator must restore it. Another instance may answer meanwhile."
        }
    }
}

/// An answer's error as `application/problem+json` (RFC 9457) with its `code`. Never carries a secret.
/// `ErrorMapping` makes one of every error; a controller throws one itself only for what is about HTTP
/// (a missing key, a wrong content type).
struct Problem: Error, Sendable {
    struct FieldError: Codable, Sendable, Equatable {
        var field: String
        var message: String
    }

    let code: ErrorCode
    let detail: String
    var errors: [FieldError] = []
    var headers: HTTPHeaders = [:]

    init(_ code: ErrorCode, _ detail: String, errors: [FieldError] = [], headers: HTTPHeaders = [:]) {
        self.code = code
        self.detail = detail
        self.errors = errors
        self.headers = headers
    }

    var status: HTTPResponseStatus { code.status }
    var title: String { code.title }

    static func unauthorized(_ detail: String = "A valid API key is required as a Bearer token.") -> Problem {
        Problem(.unauthorized, detail, headers: ["WWW-Authenticate": "Bearer"])
    }

    static let channelTokenRequired = Problem(
        .channelTokenRequired, "The session's channel token is required.", headers: ["WWW-Authenticate": "Bearer"])

    static func notFound(_ detail: String = "No such resource.") -> Problem {
        Problem(.notFound, detail)
    }

    static func badRequest(_ detail: String) -> Problem {
        Problem(.malformedRequest, detail)
    }

    static func forbidden(_ detail: String) -> Problem {
        Problem(.originNotAllowed, detail)
    }

    static func invalid(_ errors: [FieldError]) -> Problem {
        Problem(
            .invalidRequest, "Some fields are invalid: " + errors.map(\.field).joined(separator: ", ") + ".",
            errors: errors)
    }

    static let internalError = Problem(.internalError, "The relay could not answer.")

    private struct Body: Encodable {
        var type: String
        var code: String
        var title: String
        var status: Int
        var detail: String
        var errors: [FieldError]?
    }

    /// The problem+json answer; `errorsPage` is where `GET /errors` is served (`{public-url}/errors`), the
    /// `type`'s base, or nil where no such page is (`type` is then `about:blank`).
    func answer(errorsPage: String?) -> Answer {
        var headers = headers
        headers.replaceOrAdd(name: "Content-Type", value: "application/problem+json")
        headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        let body = Body(
            type: errorsPage.map { $0 + "#" + code.rawValue } ?? "about:blank", code: code.rawValue, title: title,
            status: Int(status.code), detail: detail, errors: errors.isEmpty ? nil : errors)
        return Answer(status: status, headers: headers, body: ByteBuffer(bytes: RelayJSON.encode(body)))
    }
}

extension ErrorCode {
    /// Every code as `GET /errors` lists it (`templates/errors.mustache`): `whatToDo` is HTML, its
    /// backquoted words as code.
    static var pageEntries: [[String: Any]] {
        allCases.map { code in
            [
                "code": code.rawValue, "status": "\(code.status.code) \(code.status.reasonPhrase)",
                "title": code.title, "whatToDo": html(code.whatToDo),
            ]
        }
    }

    private static func html(_ text: String) -> String {
        HTML.escape(text).split(separator: "`", omittingEmptySubsequences: false).enumerated().map { index, part in
            index % 2 == 1 ? "<code>\(part)</code>" : String(part)
        }.joined()
    }
}
