import Foundation
import Hummingbird

/// An API error, answered as `application/problem+json` (RFC 9457). Never carries a secret.
struct Problem: Error, HTTPResponseError {
    struct FieldError: Codable, Sendable, Equatable {
        var field: String
        var message: String
    }

    let status: HTTPResponse.Status
    let title: String
    let detail: String
    var errors: [FieldError] = []
    var headers: HTTPFields = [:]

    static func unauthorized() -> Problem {
        Problem(
            status: .unauthorized, title: "Unauthorized", detail: "A valid API key is required as a Bearer token.",
            headers: [.wwwAuthenticate: "Bearer"])
    }

    static func notFound(_ detail: String = "No such resource.") -> Problem {
        Problem(status: .notFound, title: "Not Found", detail: detail)
    }

    static func badRequest(_ detail: String) -> Problem {
        Problem(status: .badRequest, title: "Bad Request", detail: detail)
    }

    static func invalid(_ errors: [FieldError]) -> Problem {
        Problem(
            status: .unprocessableContent, title: "Invalid request",
            detail: "Some fields are invalid: " + errors.map(\.field).joined(separator: ", ") + ".", errors: errors)
    }

    static func conflict(_ detail: String) -> Problem {
        Problem(status: .conflict, title: "Conflict", detail: detail)
    }

    private struct Body: Encodable {
        var type: String
        var title: String
        var status: Int
        var detail: String
        var errors: [FieldError]?
    }

    private var body: Body {
        Body(
            type: "about:blank", title: title, status: Int(status.code), detail: detail,
            errors: errors.isEmpty ? nil : errors)
    }

    /// The problem+json document.
    var document: Data { RelayJSON.data(body) }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try RelayJSON.response(body, status: status, headers: headers, contentType: "application/problem+json")
    }
}
