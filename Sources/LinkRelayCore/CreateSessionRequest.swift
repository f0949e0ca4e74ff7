import Foundation

/// The body of `POST /v1/sessions`, checked field by field so that every problem is named.
///
/// Framework-free so that it can be unit-tested and fuzzed without the server; the server maps a
/// ``Rejection`` to its problem+json answer.
public struct CreateSessionRequest: Codable, Sendable, Equatable {
    /// Required but for a Unify session whose phone Prove finds itself: `possessionType` `mobile` (Mobile
    /// Auth: "Mobile Auth in the United States doesn't require a phone number", seed 000), `none` (the
    /// bind names it), or a `proveId`.
    public var phoneNumber: String?
    public var clientRequestId: String?
    public var clientCustomerId: String?
    public var clientHumanId: String?
    public var emailAddress: String?
    public var ipAddress: String?
    public var proveId: String?
    public var deviceId: String?
    public var checkReputation: Bool?
    public var allowOTPRetry: Bool?
    public var smsMessage: String?
    public var rebind: Bool?
    public var holdSeconds: Int?
    /// `desktop` when not given.
    public var possessionType: PossessionType?
    /// `unify` when not given.
    public var flow: Flow?
    /// Pre-Fill only: the challenge, given up front (`YYYY-MM-DD`, `YYYY-MM` or `MM-DD`).
    public var dob: String?
    /// Pre-Fill only: the challenge, given up front (the full SSN or its last 4 digits).
    public var ssn: String?
    /// Nevis only: who approves; neither this nor `userId`: usernameless (channel `app`).
    public var username: String?
    /// Nevis only: the user's id at Nevis (a UUID), instead of `username`.
    public var userId: String?
    /// Nevis only: plain text the app shows for the customer to confirm.
    public var message: String?
    /// Nevis only: `app` (QR code and link, the default) or `push`.
    public var channel: String?

    public init(
        phoneNumber: String?, clientRequestId: String? = nil, clientCustomerId: String? = nil,
        clientHumanId: String? = nil, emailAddress: String? = nil, ipAddress: String? = nil, proveId: String? = nil,
        deviceId: String? = nil, checkReputation: Bool? = nil, allowOTPRetry: Bool? = nil, smsMessage: String? = nil,
        rebind: Bool? = nil, holdSeconds: Int? = nil
    ) {
        self.phoneNumber = phoneNumber
        self.clientRequestId = clientRequestId
        self.clientCustomerId = clientCustomerId
        self.clientHumanId = clientHumanId
        self.emailAddress = emailAddress
        self.ipAddress = ipAddress
        self.proveId = proveId
        self.deviceId = deviceId
        self.checkReputation = checkReputation
        self.allowOTPRetry = allowOTPRetry
        self.smsMessage = smsMessage
        self.rebind = rebind
        self.holdSeconds = holdSeconds
    }

    public static let phoneNumberRule =
        "is required, but for flow unify with a proveId or with possessionType mobile (Mobile Auth) or none"

    /// The largest body, in bytes, that is read at all.
    public static let maximumBodySize = 4096

    /// One invalid field and what is wrong with it.
    public struct FieldError: Sendable, Equatable {
        public var field: String
        public var message: String

        public init(field: String, message: String) {
            self.field = field
            self.message = message
        }
    }

    /// Why a body was refused.
    public enum Rejection: Error, Sendable, Equatable {
        /// More than ``maximumBodySize`` bytes (413).
        case tooLarge
        /// Not RFC 8259 JSON (400 `malformed_json`); the detail names the line and column.
        case malformedJSON(String)
        /// Not a JSON object, or a field this API does not know (400); the detail says which.
        case malformed(String)
        /// A JSON object with known fields, some of them invalid (422); never empty.
        case invalid([FieldError])
    }

    private static let stringFields = [
        "phoneNumber", "clientRequestId", "clientCustomerId", "clientHumanId", "emailAddress", "ipAddress", "proveId",
        "deviceId", "smsMessage",
    ]
    private static let boolFields = ["checkReputation", "allowOTPRetry", "rebind"]
    private static let nevisFields = ["username", "userId", "message", "channel"]
    private static let knownFields = Set(
        stringFields + boolFields + nevisFields + ["holdSeconds", "possessionType", "flow", "dob", "ssn"])
    /// What `/v3/start` does not take: refused on a Pre-Fill session rather than dropped unseen.
    private static let unifyOnlyFields = ["clientHumanId", "proveId", "deviceId", "checkReputation", "rebind"]

    /// Decodes and validates a request body: every invalid field is named, not just the first.
    public static func validate(_ data: Data, maximumHold: Int) -> Result<CreateSessionRequest, Rejection> {
        let object: [String: JSONValue]
        switch jsonObject(data, knownFields: knownFields) {
        case .success(let read): object = read
        case .failure(let rejection): return .failure(rejection)
        }

        var errors: [FieldError] = []
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
        var request = CreateSessionRequest(phoneNumber: phone)
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
        if let value = object["possessionType"], value != .null {
            if case .string(let text) = value, let type = PossessionType(rawValue: text) {
                request.possessionType = type
            } else {
                errors.append(.init(field: "possessionType", message: "must be desktop, mobile or none"))
            }
        }
        if let value = object["flow"], value != .null {
            if case .string(let text) = value, let flow = Flow(rawValue: text) {
                request.flow = flow
            } else {
                errors.append(.init(field: "flow", message: "must be unify, prefill or nevis"))
            }
        }
        request.dob = string("dob", maxLength: 10)
        if let dob = request.dob, dob.count <= 10, !PrefillIndividual.isValidDob(dob) {
            errors.append(.init(field: "dob", message: PrefillIndividual.dobRule))
        }
        request.ssn = string("ssn", maxLength: 9)
        if let ssn = request.ssn, ssn.count <= 9, !PrefillIndividual.isValidSSN(ssn) {
            errors.append(.init(field: "ssn", message: PrefillIndividual.ssnRule))
        }
        let given = { (field: String) in object[field] != nil && object[field] != .null }
        switch request.flow ?? .unify {
        case .nevis:
            for field in stringFields + boolFields + ["possessionType", "dob", "ssn"] where given(field) {
                errors.append(.init(field: field, message: "applies to Prove's flows only"))
            }
            validateNevis(object, into: &request, errors: &errors)
        case .unify, .prefill:
            for field in nevisFields where given(field) {
                errors.append(.init(field: field, message: "applies to flow nevis only"))
            }
            if !given("phoneNumber") {
                let proveFindsIt =
                    request.flow != .prefill
                    && (request.proveId != nil
                        || [PossessionType.mobile, PossessionType.none].contains(request.possessionType ?? .desktop))
                if !proveFindsIt { errors.append(.init(field: "phoneNumber", message: Self.phoneNumberRule)) }
            }
            if request.flow == .prefill {
                for field in unifyOnlyFields where given(field) {
                    errors.append(.init(field: field, message: "applies to flow unify only"))
                }
                if let type = request.possessionType, type != .desktop {
                    errors.append(.init(field: "possessionType", message: "must be desktop for flow prefill"))
                }
            } else {
                for field in ["dob", "ssn"] where given(field) {
                    errors.append(.init(field: field, message: "applies to flow prefill only"))
                }
            }
        }
        guard errors.isEmpty else { return .failure(.invalid(errors)) }
        return .success(request)
    }

    /// Unicode's bidirectional controls (UAX #9): embeddings, overrides, isolates and marks.
    static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
            || [0x200E, 0x200F, 0x061C].contains(scalar.value)
    }

    /// A scalar that shows: not a space, a format character (zero-width ones, U+FEFF), a control, or a
    /// mark or variation selector that only changes another.
    static func isVisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .format, .control, .spaceSeparator, .lineSeparator, .paragraphSeparator, .nonspacingMark,
            .enclosingMark, .unassigned, .surrogate, .privateUse:
            false
        default: !scalar.properties.isWhitespace && !scalar.properties.isDefaultIgnorableCodePoint
        }
    }

    /// The Nevis fields: who approves (a username, a user id, or neither for usernameless, which only a QR
    /// code or a link can reach), what the app shows, and the channel.
    private static func validateNevis(
        _ object: [String: JSONValue], into request: inout CreateSessionRequest, errors: inout [FieldError]
    ) {
        // What the phone shows must be what the backend sent: no control characters, no bidirectional
        // controls (U+202E would show text backwards), and something visible (not only zero-width marks).
        func text(_ name: String, maxLength: Int, newlines: Bool = false) -> String? {
            guard let value = object[name], value != .null else { return nil }
            guard case .string(let text) = value, (1...maxLength).contains(text.count),
                !text.unicodeScalars.contains(where: {
                    ($0.properties.generalCategory == .control && !(newlines && $0 == "\n")) || isBidiControl($0)
                }),
                text.unicodeScalars.contains(where: isVisible)
            else {
                errors.append(
                    .init(
                        field: name,
                        message:
                            "must be visible text of 1 to \(maxLength) characters without control or bidirectional characters"
                    ))
                return nil
            }
            return text
        }
        request.username = text("username", maxLength: 256)
        request.message = text("message", maxLength: 500, newlines: true)
        if let value = object["userId"], value != .null {
            if case .string(let id) = value, UUID(uuidString: id) != nil {
                request.userId = id
            } else {
                errors.append(.init(field: "userId", message: "must be a UUID"))
            }
        }
        if object["username"].map({ $0 != .null }) == true, object["userId"].map({ $0 != .null }) == true {
            errors.append(.init(field: "userId", message: "give username or userId, not both"))
        }
        if let value = object["channel"], value != .null {
            if case .string(let channel) = value, channel == "app" || channel == "push" {
                request.channel = channel
            } else {
                errors.append(.init(field: "channel", message: "must be app or push"))
            }
        }
        if request.channel == "push", object["username"] ?? .null == .null, object["userId"] ?? .null == .null {
            errors.append(
                .init(
                    field: "channel", message: "push needs a username or userId: only a QR code or link is usernameless"
                ))
        }
    }

    /// A body of at most ``maximumBodySize`` bytes that is a JSON object of `knownFields` only, each key
    /// once at every depth: 413 over the size, 400 otherwise (the detail names the duplicate key or the
    /// unknown fields). Every API body is read so.
    static func jsonObject(_ data: Data, knownFields: Set<String>) -> Result<[String: JSONValue], Rejection> {
        guard data.count <= maximumBodySize else { return .failure(.tooLarge) }
        // The decoder takes more than RFC 8259 (a trailing comma, for one); another reader may not.
        if let broken = StrictJSON.check(data) { return .failure(.malformedJSON(broken.detail)) }
        guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: data) else {
            return .failure(.malformed("The body must be a JSON object."))
        }
        // The decoder kept one of a duplicate key's values; another reader of the same body may keep the other.
        if let duplicate = JSONDuplicateKey.first(in: data) { return .failure(.malformed(duplicate.detail)) }
        let unknown = object.keys.filter { !knownFields.contains($0) }.sorted()
        guard unknown.isEmpty else {
            return .failure(.malformed("Unknown field(s): " + unknown.joined(separator: ", ") + "."))
        }
        return .success(object)
    }

    /// A canonical form, to tell a repeated request from a different one under the same Idempotency-Key.
    /// It holds the request's identity data (`dob`, `ssn`): the server stores only its digest.
    public var fingerprint: String {
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
