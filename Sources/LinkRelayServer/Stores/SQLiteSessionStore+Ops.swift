import Foundation
import LinkRelayCore
import SQLiteNIO

extension SQLiteSessionStore {
    /// One grouped query on a reader: the live sessions' rows (the partial index on `state` finds them)
    /// are counted in SQLite, their `createdAt` and flow read from the stored JSON, so no session is
    /// decoded. The flow is `Session.flow`'s rule: a Nevis operation makes it nevis, Pre-Fill's progress
    /// prefill.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount] {
        let rows = try await read(
            """
            SELECT CASE WHEN json_extract(data, '$.nevis') IS NOT NULL THEN 'nevis'
                WHEN json_extract(data, '$.prefill') IS NOT NULL THEN 'prefill' ELSE 'unify' END AS flow,
              state, max(0, CAST((? - json_extract(data, '$.createdAt')) / ? AS INTEGER)) AS bin, count(*) AS n
            FROM sessions WHERE state IN ('waiting', 'tapped') GROUP BY flow, state, bin
            """, [.float(now.timeIntervalSinceReferenceDate), .float(LiveSessionCount.binSeconds)])
        return rows.compactMap { row in
            guard let flow = row.column("flow")?.string.flatMap(Flow.init(rawValue:)),
                let state = row.column("state")?.string.flatMap(SessionState.init(rawValue:)),
                let bin = row.column("bin")?.integer, let count = row.column("n")?.integer
            else { return nil }
            return LiveSessionCount(flow: flow, state: state, ageBin: Int(bin), count: Int(count))
        }
    }
}
