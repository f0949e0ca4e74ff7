import Foundation
import LinkRelayCore

extension CreateSessionRequest {
    /// Decodes and validates a request body as the API answers it: over-long bodies give 413, malformed JSON or
    /// unknown fields 400, invalid fields 422 with every one of them named.
    static func parse(_ data: Data, maximumHold: Int) throws(Problem) -> CreateSessionRequest {
        switch validate(data, maximumHold: maximumHold) {
        case .success(let request): request
        case .failure(let rejection): throw Problem(rejection)
        }
    }
}

extension Problem {
    /// The problem+json answer for a refused `POST /v1/sessions` body.
    init(_ rejection: CreateSessionRequest.Rejection) {
        switch rejection {
        case .tooLarge:
            self.init(
                status: .contentTooLarge, title: "Content Too Large",
                detail: "The body may be at most \(CreateSessionRequest.maximumBodySize) bytes.")
        case .malformed(let detail):
            self = .badRequest(detail)
        case .invalid(let errors):
            self = .invalid(errors.map { FieldError(field: $0.field, message: $0.message) })
        }
    }
}
