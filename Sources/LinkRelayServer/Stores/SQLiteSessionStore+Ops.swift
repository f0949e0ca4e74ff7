import Foundation
import LinkRelayCore
import SQLiteNIO

extension SQLiteSessionStore {
    /// One grouped query on a reader: the live sessions' rows (the partial index on `state` finds them)
    /// are counted in SQLite, their `createdAt` read from the stored JSON, so no session is decoded.
    func liveSessionCounts(at now: Date) async throws -> [LiveSessionCount] {
        let rows = try await read(
            """
            SELECT state, max(0, CAST((? - json_extract(data, '$.createdAt')) / ? AS INTEGER)) AS bin, count(*) AS n
            FROM sessions WHERE state IN ('waiting', 'tapped') GROUP BY state, bin
            """, [.float(now.timeIntervalSinceReferenceDate), .float(LiveSessionCount.binSeconds)])
        return rows.compactMap { row in
            guard let state = row.column("state")?.string.flatMap(SessionState.init(rawValue:)),
                let bin = row.column("bin")?.integer, let count = row.column("n")?.integer
            else { return nil }
            return LiveSessionCount(state: state, ageBin: Int(bin), count: Int(count))
        }
    }
}
