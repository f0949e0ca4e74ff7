import Foundation

/// Who ended a session with `cancelled`.
public enum CancelReason: String, Codable, Sendable, CaseIterable {
    /// The integrator's backend (`POST /v1/sessions/{id}/cancel`).
    case integrator
    /// The person holding the phone answered "Not me" on the confirm page (`--confirm-on-phone`).
    case rejected
}
