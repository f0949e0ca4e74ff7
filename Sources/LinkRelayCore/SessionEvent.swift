import Foundation

/// One entry of a session's event log, as desktop channels receive it.
public struct SessionEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case waiting(expiresAt: Date)
        case tapped(asc: Bool)
        case result(Outcome)
        case expired
        case cancelled(reason: CancelReason = .integrator)

        public var type: String {
            switch self {
            case .waiting: "waiting"
            case .tapped: "tapped"
            case .result: "result"
            case .expired: "expired"
            case .cancelled: "cancelled"
            }
        }

        public var isTerminal: Bool {
            switch self {
            case .waiting, .tapped: false
            case .result, .expired, .cancelled: true
            }
        }
    }

    public var seq: Int
    public var kind: Kind
    public var at: Date

    public init(seq: Int, kind: Kind, at: Date) {
        self.seq = seq
        self.kind = kind
        self.at = at
    }

    public var isTerminal: Bool { kind.isTerminal }
}

extension SessionEvent: Codable {
    private enum CodingKeys: String, CodingKey {
        case seq, type, at, expiresAt, asc, outcome, reason
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        seq = try container.decode(Int.self, forKey: .seq)
        at = try container.decode(Date.self, forKey: .at)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "waiting": kind = .waiting(expiresAt: try container.decode(Date.self, forKey: .expiresAt))
        case "tapped": kind = .tapped(asc: try container.decode(Bool.self, forKey: .asc))
        case "result": kind = .result(try container.decode(Outcome.self, forKey: .outcome))
        case "expired": kind = .expired
        case "cancelled":
            kind = .cancelled(reason: try container.decodeIfPresent(CancelReason.self, forKey: .reason) ?? .integrator)
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown event type")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(seq, forKey: .seq)
        try container.encode(kind.type, forKey: .type)
        try container.encode(at, forKey: .at)
        switch kind {
        case .waiting(let expiresAt): try container.encode(expiresAt, forKey: .expiresAt)
        case .tapped(let asc): try container.encode(asc, forKey: .asc)
        case .result(let outcome): try container.encode(outcome, forKey: .outcome)
        case .cancelled(let reason): try container.encode(reason, forKey: .reason)
        case .expired: break
        }
    }
}
