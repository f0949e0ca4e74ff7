import Foundation
import NIOCore
import NIOHTTP1

/// An answer's error as `application/problem+json` (RFC 9457). Never carries a secret. `ErrorMapping`
/// makes one of every error; a controller throws one itself only for what is about HTTP (a missing key,
/// a wrong content type).
struct Problem: Error, Sendable {
    struct FieldError: Codable, Sendable, Equatable {
        var field: String
        var message: String
    }

    let status: HTTPResponseStatus
    let title: String
    let detail: String
    var errors: [FieldError] = []
    var headers: HTTPHeaders = [:]

    static func unauthorized(_ detail: String = "A valid API key is required as a Bearer token.") -> Problem {
        Problem(status: .unauthorized, title: "Unauthorized", detail: detail, headers: ["WWW-Authenticate": "Bearer"])
    }

    static func notFound(_ detail: String = "No such resource.") -> Problem {
        Problem(status: .notFound, title: "Not Found", detail: detail)
    }

    static func badRequest(_ detail: String) -> Problem {
        Problem(status: .badRequest, title: "Bad Request", detail: detail)
    }

    static func forbidden(_ detail: String) -> Problem {
        Problem(status: .forbidden, title: "Forbidden", detail: detail)
    }

    static func invalid(_ errors: [FieldError]) -> Problem {
        Problem(
            status: .unprocessableEntity, title: "Invalid request",
            detail: "Some fields are invalid: " + errors.map(\.field).joined(separator: ", ") + ".", errors: errors)
    }

    static func conflict(_ detail: String) -> Problem {
        Problem(status: .conflict, title: "Conflict", detail: detail)
    }

    static let internalError = Problem(
        status: .internalServerError, title: "Internal Server Error", detail: "The relay could not answer.")

    private struct Body: Encodable {
        var type = "about:blank"
        var title: String
        var status: Int
        var detail: String
        var errors: [FieldError]?
    }

    /// The problem+json answer.
    var answer: Answer {
        var headers = headers
        headers.replaceOrAdd(name: "Content-Type", value: "application/problem+json")
        headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        let body = Body(title: title, status: Int(status.code), detail: detail, errors: errors.isEmpty ? nil : errors)
        return Answer(status: status, headers: headers, body: ByteBuffer(bytes: RelayJSON.encode(body)))
    }
}
