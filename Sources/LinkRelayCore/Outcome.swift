import Foundation

/// The authoritative result of a session, as Prove's `/v3/unify-status` reported it.
public enum Outcome: String, Codable, Sendable, CaseIterable {
    case verified
    case failed
    case possessionRequired = "possession_required"

    /// Maps Prove's `success` string; `nil` while Prove still says `pending` (or anything unknown).
    public init?(proveSuccess: String) {
        switch proveSuccess {
        case "true": self = .verified
        case "false": self = .failed
        case "possession_required": self = .possessionRequired
        default: return nil
        }
    }

    var state: SessionState {
        switch self {
        case .verified: .verified
        case .failed: .failed
        case .possessionRequired: .possessionRequired
        }
    }
}
