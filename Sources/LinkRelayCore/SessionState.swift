import Foundation

/// Where a session is in its life. The last five are terminal.
public enum SessionState: String, Codable, Sendable, CaseIterable {
    case waiting
    case tapped
    case verified
    case failed
    case possessionRequired = "possession_required"
    case expired
    case cancelled

    public var isTerminal: Bool {
        switch self {
        case .waiting, .tapped: false
        default: true
        }
    }
}
