import Foundation
import LinkRelayCore
import PostgresNIO

extension PostgresSessionStore {
    /// Every instance's live sessions, counted by the server in one grouped query (a handful of rows
    /// come back, however many sessions wait); `createdAt` and the flow are read from the stored JSON,
    /// the flow by `Session.flow`'s rule (a Nevis operation makes it nevis, Pre-Fill's progress prefill).
    /// Bounded like `ping`: the pool waits while the server is down, and a scrape or the ops page must not.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount] {
        let seconds = now.timeIntervalSinceReferenceDate
        return try await withTimeLimit(.seconds(2)) { [client, logger] in
            let rows = try await client.query(
                """
                SELECT CASE WHEN json_typeof(data::json->'nevis') = 'object' THEN 'nevis'
                    WHEN json_typeof(data::json->'prefill') = 'object' THEN 'prefill' ELSE 'unify' END,
                  state, greatest(0, floor((\(seconds) - (data::json->>'createdAt')::float8) / \(
                    LiveSessionCount.binSeconds)))::int8 AS bin, count(*)::int8
                FROM linkrelay_sessions WHERE state IN ('waiting', 'tapped') GROUP BY 1, 2, 3
                """, logger: logger)
            var counts: [LiveSessionCount] = []
            for try await (flow, state, bin, count) in rows.decode((String, String, Int, Int).self) {
                guard let flow = Flow(rawValue: flow), let state = SessionState(rawValue: state) else { continue }
                counts.append(LiveSessionCount(flow: flow, state: state, ageBin: bin, count: count))
            }
            return counts
        }
    }
}
