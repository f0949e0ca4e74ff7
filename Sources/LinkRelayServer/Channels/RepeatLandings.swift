import Foundation
import HTTPTypes
import LinkRelayCore
import NIOCore

/// The phone's browser reloading its landing after the session ended: answered from memory, on the
/// event loop, without the store, a task or Hummingbird.
///
/// Only what `LandingController` has already answered once as a final page is kept: an ended
/// session never changes, so an entry cannot go stale. Every other landing (the first, one of a
/// session still going, any refusal) goes to `LandingController`, which applies the same limits.
final class RepeatLandings: Sendable {
    /// The final page, its variant for a session the phone turned down, and the busy page, rendered once.
    struct Pages: Sendable {
        let final: ByteBuffer
        let rejected: ByteBuffer
        let busy: ByteBuffer
        let headers: HTTPFields
    }

    private struct Entry {
        let authIds: Set<String>
        let rejected: Bool
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        var order: [String] = []
        var oldest = 0
    }

    let pages: Pages
    private let capacity: Int
    private let table = Locked(Table())

    init(pages: Pages, capacity: Int = 20_000) {
        self.pages = pages
        self.capacity = capacity
    }

    /// Keeps an ended session's final page for its repeat landings. The oldest entry goes first.
    func remember(_ session: Session) {
        guard session.state.isTerminal, session.state != .expired else { return }
        let entry = Entry(authIds: Set(session.seenAuthIds), rejected: session.state == .cancelled)
        table.withLock { table in
            if table.entries.updateValue(entry, forKey: session.linkKey) != nil { return }
            if table.order.count < capacity {
                table.order.append(session.linkKey)
            } else {
                table.entries[table.order[table.oldest]] = nil
                table.order[table.oldest] = session.linkKey
                table.oldest = (table.oldest + 1) % capacity
            }
        }
    }

    /// The page for `GET /l/{key}?…` when it is a repeat landing of an ended session, else nil.
    func page(target: String) -> ByteBuffer? {
        guard let (key, query) = Self.split(target), key.utf8.count == SessionService.linkKeyLength,
            case .success(let parameters) = LandingParameters.parse(query: query),
            let entry = table.withLock({ $0.entries[key] }), entry.authIds.contains(parameters.authId)
        else { return nil }
        return entry.rejected ? pages.rejected : pages.final
    }

    /// The link key and the query of a landing target.
    static func split(_ target: String) -> (key: String, query: String)? {
        let bytes = target.utf8
        guard bytes.starts(with: "/l/".utf8) else { return nil }
        let start = bytes.index(bytes.startIndex, offsetBy: 3)
        let mark = bytes[start...].firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        let query = mark == bytes.endIndex ? "" : String(target[bytes.index(after: mark)...])
        return (String(target[start..<mark]), query)
    }
}
