import Foundation

/// A Prove endpoint of the sandbox that a fault can be set on.
///
/// Faults never apply to the outbox, the Instant Link page or the fault control endpoints.
public enum SandboxEndpoint: String, CaseIterable, Codable, Sendable {
    case token
    case unify
    case unifyStatus = "unify-status"
    case unifyBind = "unify-bind"
    case start
    case validate
    case challenge
    case complete
    /// `*`: every Prove endpoint that has no fault of its own.
    case all = "*"

    /// The endpoint named `name` ("token", "unify", …, "*").
    public init(name: String) throws(SandboxFaultError) {
        guard let endpoint = SandboxEndpoint(rawValue: name) else {
            let names = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw SandboxFaultError("unknown endpoint \"\(name)\" (expected one of \(names))")
        }
        self = endpoint
    }
}
