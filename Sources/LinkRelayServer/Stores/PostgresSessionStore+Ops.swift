import Foundation
import LinkRelayCore
import PostgresNIO

extension PostgresSessionStore {
    /// Every instance's live sessions, counted by the server in one grouped query (a handful of rows
    /// come back, however many sessions wait); `createdAt` is read from the stored JSON. Bounded like
    /// `ping`: the pool waits while the server is down, and a scrape or the ops page must not.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount] {
        let seconds = now.timeIntervalSinceReferenceDate
        return try await withTimeLimit(.seconds(2)) { [client, logger] in
            let rows = try await client.query(
                """
                SELECT state, greatest(0, floor((\(seconds) - (data::json->>'createdAt')::float8) / \(
                    LiveSessionCount.binSeconds)))::int8 AS bin, count(*)::int8
                FROM linkrelay_sessions WHERE state IN ('waiting', 'tapped') GROUP BY 1, 2
                """, logger: logger)
            var counts: [LiveSessionCount] = []
            for try await (state, bin, count) in rows.decode((String, Int, Int).self) {
                guard let state = SessionState(rawValue: state) else { continue }
                counts.append(LiveSessionCount(state: state, ageBin: bin, count: count))
            }
            return counts
        }
    }
}
