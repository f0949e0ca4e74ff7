import Foundation
import LinkRelayCore
import Logging
import Testing

@testable import LinkRelayServer

@Suite("SQLite store")
struct SQLiteStoreTests {
    private static func session(_ index: Int) -> Session {
        let now = Date()
        var session = Session(
            id: "ses_\(index)", linkKey: "key\(index)", channelToken: "token", createdAt: now,
            expiresAt: now.addingTimeInterval(180), correlationId: "c\(index)", authToken: nil,
            clientRequestId: "r\(index)", phoneNumber: "2001004014", finalTargetUrl: "http://relay/l/key\(index)",
            idempotencyKey: nil, requestFingerprint: "f")
        session.record(.waiting(expiresAt: session.expiresAt), at: now)
        return session
    }

    /// The verifier reads a session right after a landing committed its tap. SQLite lets statements
    /// that run at once on one connection share a read transaction, so a read that overlapped a
    /// longer one saw the row as it was before the commit: the verifier thought nothing was landed,
    /// and the session never got its result (2 of 15,000 in the benchmark).
    @Test("A read after a commit sees it, while other reads run at the same time")
    func readAfterCommit() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteSessionStore.open(
            path: directory.appendingPathComponent("relay.sqlite").path, logger: Logger(label: "test"))
        for index in 0..<50 {
            let session = Self.session(index)
            try await store.insert(
                session, event: SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: Date()))
        }
        var current = try #require(try await store.session(id: "ses_0"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Long reads that keep the connection busy meanwhile.
            let done = Locked(false)
            for _ in 0..<2 {
                group.addTask {
                    while !done.withLock({ $0 }) { _ = try await store.activeSessions() }
                }
            }
            var stale = 0
            for _ in 0..<100 {
                var next = current
                next.version += 1
                #expect(try await store.update(next, expectedVersion: current.version, appending: []))
                if try await store.session(id: "ses_0")?.version != next.version { stale += 1 }
                current = next
            }
            done.withLock { $0 = true }
            try await group.waitForAll()
            #expect(stale == 0, "reads that missed a commit before them")
        }
        try await store.close()
    }
}
