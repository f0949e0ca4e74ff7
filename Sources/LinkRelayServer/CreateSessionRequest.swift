import Foundation
import LinkRelayCore

/// The body of `POST /v1/sessions`, checked field by field so that every problem is named.
struct CreateSessionRequest: Codable, Sendable, Equatable {
    var phoneNumber: String
    var clientRequestId: String?
    var clientCustomerId: String?
    var clientHumanId: String?
    var emailAddress: String?
    var ipAddress: String?
    var proveId: String?
    var deviceId: String?
    var checkReputation: Bool?
    var allowOTPRetry: Bool?
    var smsMessage: String?
    var rebind: Bool?
    var holdSeconds: Int?

    static let maximumBodySize = 4096

    private static let stringFields = [
        "phoneNumber", "clientRequestId", "clientCustomerId", "clientHumanId", "emailAddress", "ipAddress", "proveId",
        "deviceId", "smsMessage",
    ]
    private static let boolFields = ["checkReputation", "allowOTPRetry", "rebind"]
    private static let knownFields = Set(stringFields + boolFields + ["holdSeconds"])

    /// Decodes and validates a request body. Malformed JSON or unknown fields give 400, invalid fields 422.
    static func parse(_ data: Data, maximumHold: Int) throws(Problem) -> CreateSessionRequest {
        let object: [String: JSONValue]
        do {
            object = try JSONDecoder().decode([String: JSONValue].self, from: data)
        } catch {
            throw Problem.badRequest("The body must be a JSON object.")
        }
        let unknown = object.keys.filter { !knownFields.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw Problem.badRequest("Unknown field(s): " + unknown.joined(separator: ", ") + ".")
        }

        var errors: [Problem.FieldError] = []
        func string(_ name: String, maxLength: Int, allowed: ((Character) -> Bool)? = nil, rule: String = "")
            -> String?
        {
            guard let value = object[name], value != .null else { return nil }
            guard case .string(let text) = value else {
                errors.append(.init(field: name, message: "must be a string"))
                return nil
            }
            if text.isEmpty || text.count > maxLength {
                errors.append(.init(field: name, message: "must be 1 to \(maxLength) characters"))
            } else if let allowed, !text.allSatisfy(allowed) {
                errors.append(.init(field: name, message: "may contain only \(rule)"))
            }
            return text
        }
        func bool(_ name: String) -> Bool? {
            guard let value = object[name], value != .null else { return nil }
            guard case .bool(let flag) = value else {
                errors.append(.init(field: name, message: "must be true or false"))
                return nil
            }
            return flag
        }
        let isAlphanumeric: (Character) -> Bool = { $0.isASCII && ($0.isLetter || $0.isNumber) }
        let printable: (Character) -> Bool = { $0.isASCII && $0 >= "!" && $0 <= "~" }

        let phone = string(
            "phoneNumber", maxLength: 20, allowed: { isAlphanumeric($0) || $0 == "+" }, rule: "letters, digits and +")
        if object["phoneNumber"] == nil || object["phoneNumber"] == .null {
            errors.append(.init(field: "phoneNumber", message: "is required"))
        }
        var request = CreateSessionRequest(phoneNumber: phone ?? "")
        request.clientRequestId = string(
            "clientRequestId", maxLength: 128, allowed: printable, rule: "printable ASCII without spaces")
        request.clientCustomerId = string("clientCustomerId", maxLength: 128)
        request.clientHumanId = string("clientHumanId", maxLength: 128)
        request.emailAddress = string(
            "emailAddress", maxLength: 254, allowed: { isAlphanumeric($0) || "@.+".contains($0) },
            rule: "letters, digits and @ . +")
        request.ipAddress = string(
            "ipAddress", maxLength: 45, allowed: { isAlphanumeric($0) || ".:".contains($0) },
            rule: "letters, digits and . :")
        request.proveId = string("proveId", maxLength: 128)
        request.deviceId = string("deviceId", maxLength: 128)
        request.smsMessage = string("smsMessage", maxLength: 160)
        if let message = request.smsMessage, message.count <= 160, !message.contains("####") {
            errors.append(.init(field: "smsMessage", message: "must contain #### where the link goes"))
        }
        request.checkReputation = bool("checkReputation")
        request.allowOTPRetry = bool("allowOTPRetry")
        request.rebind = bool("rebind")
        if let value = object["holdSeconds"], value != .null {
            if case .number(let number) = value, number == number.rounded(), number >= 1,
                number <= Double(maximumHold)
            {
                request.holdSeconds = Int(number)
            } else {
                errors.append(.init(field: "holdSeconds", message: "must be whole seconds from 1 to \(maximumHold)"))
            }
        }
        guard errors.isEmpty else { throw Problem.invalid(errors) }
        return request
    }

    /// A canonical form, to tell a repeated request from a different one under the same Idempotency-Key.
    var fingerprint: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }
}

/// Any JSON value, so that a body can be checked before it is trusted.
enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
