import Foundation

/// The bodies of `POST /v1/sessions/{id}/challenge` and `/complete`, checked as the create's is: 413
/// over the size, 400 for anything but a JSON object of known fields, 422 naming every invalid field.
public enum PrefillStepBody {
    public typealias Rejection = CreateSessionRequest.Rejection

    /// The challenge's `dob` or `ssn`; neither (an empty body or `{}`) uses those the create gave.
    public struct Challenge: Sendable, Equatable {
        public var dob: String?
        public var ssn: String?

        public init(dob: String? = nil, ssn: String? = nil) {
            self.dob = dob
            self.ssn = ssn
        }
    }

    public static func challenge(_ data: Data) -> Result<Challenge, Rejection> {
        guard !data.isEmpty else { return .success(Challenge()) }
        return CreateSessionRequest.jsonObject(data, knownFields: ["dob", "ssn"]).flatMap { object in
            var fields = Fields(object)
            let challenge = Challenge(dob: fields.dob("dob"), ssn: fields.ssn("ssn"))
            return fields.errors.isEmpty ? .success(challenge) : .failure(.invalid(fields.errors))
        }
    }

    /// `{"individual":{…}}`: the person as the customer confirmed it. Names are required; Prove takes only
    /// the first address and the first email, and the relay up to 3 of each, as Prove answers them.
    public static func complete(_ data: Data) -> Result<PrefillIndividual, Rejection> {
        CreateSessionRequest.jsonObject(data, knownFields: ["individual"]).flatMap { object in
            guard case .object(let person)? = object["individual"] else {
                return .failure(.invalid([.init(field: "individual", message: "is required, as an object")]))
            }
            let known: Set = ["firstName", "lastName", "dob", "ssn", "emailAddresses", "addresses"]
            if let unknown = unknownFields(person, known: known, prefix: "individual.") { return .failure(unknown) }
            var fields = Fields(person, prefix: "individual.")
            var individual = PrefillIndividual(
                firstName: fields.text("firstName", maxLength: 64, required: true),
                lastName: fields.text("lastName", maxLength: 64, required: true),
                dob: fields.dob("dob"), ssn: fields.ssn("ssn"))
            individual.emailAddresses = fields.list("emailAddresses") { fields, name, value in
                fields.text(name, value, maxLength: 254)
            }
            individual.addresses = fields.list("addresses") { fields, name, value in
                guard case .object(let address) = value else {
                    fields.errors.append(.init(field: name, message: "must be an object"))
                    return nil
                }
                let parts: Set = ["address", "extendedAddress", "city", "region", "postalCode"]
                if case .invalid(let errors)? = unknownFields(address, known: parts, prefix: name + ".") {
                    fields.errors += errors
                    return nil
                }
                var inner = Fields(address, prefix: name + ".")
                let result = PrefillIndividual.Address(
                    address: inner.text("address", maxLength: 128),
                    extendedAddress: inner.text("extendedAddress", maxLength: 128),
                    city: inner.text("city", maxLength: 64), region: inner.text("region", maxLength: 32),
                    postalCode: inner.text("postalCode", maxLength: 10))
                fields.errors += inner.errors
                return result
            }
            return fields.errors.isEmpty ? .success(individual) : .failure(.invalid(fields.errors))
        }
    }

    /// Unknown fields inside the body are invalid fields (422), named with their path.
    private static func unknownFields(_ object: [String: JSONValue], known: Set<String>, prefix: String)
        -> Rejection?
    {
        let unknown = object.keys.filter { !known.contains($0) }.sorted()
        guard !unknown.isEmpty else { return nil }
        return .invalid(unknown.map { .init(field: prefix + $0, message: "is not a field of this object") })
    }

    /// Reads fields of one object, collecting every problem.
    private struct Fields {
        let object: [String: JSONValue]
        let prefix: String
        var errors: [CreateSessionRequest.FieldError] = []

        init(_ object: [String: JSONValue], prefix: String = "") {
            self.object = object
            self.prefix = prefix
        }

        mutating func text(_ name: String, maxLength: Int, required: Bool = false) -> String? {
            guard let value = object[name], value != .null else {
                if required { errors.append(.init(field: prefix + name, message: "is required")) }
                return nil
            }
            return text(prefix + name, value, maxLength: maxLength)
        }

        mutating func text(_ field: String, _ value: JSONValue, maxLength: Int) -> String? {
            guard case .string(let text) = value else {
                errors.append(.init(field: field, message: "must be a string"))
                return nil
            }
            guard (1...maxLength).contains(text.count), !text.contains(where: \.isNewline) else {
                errors.append(.init(field: field, message: "must be 1 to \(maxLength) characters on one line"))
                return nil
            }
            return text
        }

        mutating func dob(_ name: String) -> String? {
            checked(name, maxLength: 10, PrefillIndividual.isValidDob, PrefillIndividual.dobRule)
        }

        mutating func ssn(_ name: String) -> String? {
            checked(name, maxLength: 9, PrefillIndividual.isValidSSN, PrefillIndividual.ssnRule)
        }

        private mutating func checked(_ name: String, maxLength: Int, _ isValid: (String) -> Bool, _ rule: String)
            -> String?
        {
            guard let text = text(name, maxLength: maxLength) else { return nil }
            guard isValid(text) else {
                errors.append(.init(field: prefix + name, message: rule))
                return nil
            }
            return text
        }

        /// An array of up to 3 items, each read by `item` with its path (`addresses[0]`).
        mutating func list<Item>(
            _ name: String, _ item: (inout Fields, String, JSONValue) -> Item?
        ) -> [Item]? {
            guard let value = object[name], value != .null else { return nil }
            guard case .array(let values) = value, (1...3).contains(values.count) else {
                errors.append(.init(field: prefix + name, message: "must be an array of 1 to 3 items"))
                return nil
            }
            return values.enumerated().compactMap { index, value in item(&self, "\(prefix)\(name)[\(index)]", value) }
        }
    }
}
