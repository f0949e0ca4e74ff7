import Foundation
import LinkRelayCore
import LinkRelaySupport

extension SessionEvent {
    /// The form the channels send (API.md): keys in sorted order, dates in ISO 8601 with milliseconds.
    var wireJSON: [UInt8] {
        var json = JSONObjectWriter(capacity: 96)
        if case .tapped(let asc) = kind { json.add("asc", asc) }
        json.add("at", iso8601: at)
        if case .waiting(let expiresAt) = kind { json.add("expiresAt", iso8601: expiresAt) }
        if case .result(let outcome) = kind { json.add("outcome", outcome.rawValue) }
        if case .cancelled(let reason) = kind { json.add("reason", reason.rawValue) }
        json.add("seq", seq)
        json.add("type", kind.type)
        return json.finish()
    }

    /// A long-poll's answer (API.md): `{"after": N, "done": Bool, "events": [...]}`, keys sorted.
    static func pollAnswerJSON(_ events: [SessionEvent], after: Int, done: Bool) -> [UInt8] {
        var json = JSONObjectWriter(capacity: 64 + 128 * events.count)
        json.add("after", after)
        json.add("done", done)
        json.add("events", objects: events.map(\.wireJSON))
        return json.finish()
    }
}
