import Foundation

/// Which provider's flow a session runs: Prove's Unify (`/v3/unify`) or Pre-Fill (`/v3/start`), or a Nevis
/// out-of-band approval.
public enum Flow: String, Codable, Sendable, CaseIterable {
    case unify
    case prefill
    case nevis
}

/// A Pre-Fill session's place in Prove's steps: Prove's last `next`, and what the steps after the
/// result brought. It holds identity data, so it goes to the integrator's backend only (the GET, its
/// webhooks), never to a channel or a log line: its descriptions are redacted.
public struct PrefillProgress: Codable, Sendable, Equatable {
    /// Prove's last `next`: step name → path, e.g. `["v3-challenge": "/v3/challenge"]`; `done` ends it.
    public var next: [String: String]
    /// `/v3/validate` said the challenge needs a `dob` or `ssn`, none having come with the create.
    public var challengeMissing: Bool?
    /// The person `/v3/challenge` found, for the customer to confirm and `/complete` to send back.
    public var individual: PrefillIndividual?
    /// `/v3/complete`'s `success`, once asked.
    public var completed: Bool?
    /// While the individual is kept: when it is erased (`--identity-retention` after the complete step or
    /// after Prove's 15 minutes, whichever comes first).
    public var individualKeptUntil: Date?
    /// When the individual was erased from the store.
    public var individualErasedAt: Date?

    public init(
        next: [String: String], challengeMissing: Bool? = nil, individual: PrefillIndividual? = nil,
        completed: Bool? = nil
    ) {
        self.next = next
        self.challengeMissing = challengeMissing
        self.individual = individual
        self.completed = completed
    }

    /// The steps the integrator's backend asks the relay for, by Prove's names.
    public enum Step: String, Sendable, CaseIterable {
        case challenge = "v3-challenge"
        case complete = "v3-complete"

        /// The relay's name for it: `POST /v1/sessions/{id}/challenge`, `/complete`.
        public var route: String { self == .challenge ? "challenge" : "complete" }
    }

    /// Keeps the individual at most until `until`: an earlier deadline stays.
    public mutating func keepIndividual(until: Date) {
        guard individual != nil else { return }
        individualKeptUntil = min(individualKeptUntil ?? until, until)
    }

    /// Erases the individual, keeping when.
    public mutating func eraseIndividual(at now: Date) {
        guard individual != nil else { return }
        individual = nil
        individualKeptUntil = nil
        individualErasedAt = now
    }

    /// The steps Prove's last `next` offers the backend, in order.
    public var offeredSteps: [Step] { Step.allCases.filter { next[$0.rawValue] != nil } }
}

extension PrefillProgress: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "PrefillProgress(next: \(next.keys.sorted()), individual: \(individual == nil ? "nil" : "<redacted>"))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// A person as Pre-Fill finds and confirms it (Prove's `individual`); every field is optional, as in
/// Prove's answers.
public struct PrefillIndividual: Codable, Sendable, Equatable {
    public var firstName: String?
    public var lastName: String?
    public var dob: String?
    public var ssn: String?
    public var emailAddresses: [String]?
    public var addresses: [Address]?

    public struct Address: Codable, Sendable, Equatable {
        public var address: String?
        public var extendedAddress: String?
        public var city: String?
        public var region: String?
        public var postalCode: String?

        public init(
            address: String? = nil, extendedAddress: String? = nil, city: String? = nil, region: String? = nil,
            postalCode: String? = nil
        ) {
            self.address = address
            self.extendedAddress = extendedAddress
            self.city = city
            self.region = region
            self.postalCode = postalCode
        }
    }

    public init(
        firstName: String? = nil, lastName: String? = nil, dob: String? = nil, ssn: String? = nil,
        emailAddresses: [String]? = nil, addresses: [Address]? = nil
    ) {
        self.firstName = firstName
        self.lastName = lastName
        self.dob = dob
        self.ssn = ssn
        self.emailAddresses = emailAddresses
        self.addresses = addresses
    }

    /// What an invalid `dob` and `ssn` are told, wherever they come.
    static let dobRule = "must be YYYY-MM-DD, YYYY-MM or MM-DD"
    static let ssnRule = "must be 9 digits, or the last 4"

    /// Prove's three forms of a date of birth: `YYYY-MM-DD`, `YYYY-MM` or `MM-DD`, with real months and days.
    public static func isValidDob(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }) else { return false }
        let widths = parts.map(\.count)
        func month(_ text: String) -> Bool { (1...12).contains(Int(text) ?? 0) }
        func day(_ text: String) -> Bool { (1...31).contains(Int(text) ?? 0) }
        switch widths {
        case [4, 2, 2]: return month(parts[1]) && day(parts[2])
        case [4, 2]: return month(parts[1])
        case [2, 2]: return month(parts[0]) && day(parts[1])
        default: return false
        }
    }

    /// The full SSN (9 digits) or its last 4.
    public static func isValidSSN(_ text: String) -> Bool {
        (text.count == 9 || text.count == 4) && text.allSatisfy { $0.isASCII && $0.isNumber }
    }
}

extension PrefillIndividual: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "PrefillIndividual(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension PrefillIndividual.Address: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "Address(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
