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
        guard target.hasPrefix("/l/") else { return nil }
        let afterPrefix = target.dropFirst(3)
        let key = afterPrefix.prefix { $0 != "?" }
        guard key.utf8.count == SessionService.linkKeyLength else { return nil }
        let query = afterPrefix.dropFirst(key.count + 1)
        guard case .success(let parameters) = LandingParameters.parse(query: String(query)) else { return nil }
        let entry = table.withLock { $0.entries[String(key)] }
        guard let entry, entry.authIds.contains(parameters.authId) else { return nil }
        return entry.rejected ? pages.rejected : pages.final
    }

    /// The link key of a landing target, for the per-link limit.
    static func linkKey(_ target: String) -> String {
        String(target.dropFirst(3).prefix { $0 != "?" })
    }
}
