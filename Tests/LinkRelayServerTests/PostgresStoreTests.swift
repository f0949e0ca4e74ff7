import Foundation
import LinkRelayCore
import Logging
import PostgresNIO
import Testing

@testable import LinkRelayServer

/// The PostgreSQL server the tests may use: `LINKRELAY_TEST_POSTGRES_URL` (`.ci/run` starts one with
/// `scripts/postgres-cluster.sh`). Each test gets a database of its own.
enum TestPostgres {
    static let url = ProcessInfo.processInfo.environment["LINKRELAY_TEST_POSTGRES_URL"]
    static var available: Bool { url != nil }

    /// A new empty database on the test server, as a `postgres://` URL.
    static func createDatabase() async throws -> String {
        let base = try #require(url)
        let name = "linkrelay_" + Secrets.token(length: 12).lowercased()
        try await withConnection(base) { connection in
            _ = try await connection.query("CREATE DATABASE \(unescaped: name)", logger: logger).collect()
        }
        var parts = try #require(URLComponents(string: base))
        parts.path = "/" + name
        return try #require(parts.string)
    }

    static func withConnection<T>(_ url: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await PostgresConnection.connect(
            configuration: try PostgresURL(url).connectionConfiguration(), id: 1, logger: logger)
        do {
            let value = try await body(connection)
            try await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static let logger = Logger(label: "test.postgres")
}

@Suite(
    "PostgreSQL store", .enabled(if: TestPostgres.available, "LINKRELAY_TEST_POSTGRES_URL is not set"),
    .timeLimit(.minutes(2)))
struct PostgresStoreTests {
    static func open(_ url: String) async throws -> PostgresSessionStore {
        try await PostgresSessionStore.open(url: try PostgresURL(url), logger: TestPostgres.logger)
    }

    /// A new waiting session and its first event.
    static func waiting(_ index: Int) -> (Session, SessionEvent) {
        let session = SQLiteStoreTests.session(index)
        return (session, SessionEvent(seq: 1, kind: .waiting(expiresAt: session.expiresAt), at: session.createdAt))
    }

    @Test("Sessions and events round-trip; a stale version and a taken Idempotency-Key change nothing")
    func roundTrip() async throws {
        let store = try await Self.open(try await TestPostgres.createDatabase())
        var (session, waiting) = Self.waiting(1)
        session.idempotencyKey = "idem-1"
        try await store.insert(session, event: waiting)
        #expect(try await store.session(id: "ses_1") == session)
        #expect(try await store.session(linkKey: "key1") == session)
        #expect(try await store.session(idempotencyKey: "idem-1") == session)
        #expect(try await store.session(id: "ses_2") == nil)

        var (taken, takenEvent) = Self.waiting(2)
        taken.idempotencyKey = "idem-1"
        await #expect(throws: StoreError.duplicateIdempotencyKey) { try await store.insert(taken, event: takenEvent) }
        #expect(try await store.session(id: "ses_2") == nil)

        var tapped = session
        let event = tapped.record(.tapped(asc: true), at: Date())
        tapped.version += 1
        #expect(try await store.update(tapped, expectedVersion: session.version, appending: [event]))
        #expect(try await !store.update(tapped, expectedVersion: session.version, appending: [event]))
        #expect(try await store.session(id: "ses_1") == tapped)
        #expect(try await store.events(sessionID: "ses_1", after: 0) == [waiting, event])
        #expect(try await store.events(sessionID: "ses_1", after: 1) == [event])
        #expect(try await store.activeSessions().map(\.id) == ["ses_1"])

        // A change without events (a second landing of a tapped session) is written as well.
        var seen = tapped
        seen.seenAuthIds.append("auth-2")
        seen.version += 1
        #expect(try await store.update(seen, expectedVersion: tapped.version, appending: []))
        #expect(try await !store.update(seen, expectedVersion: tapped.version, appending: []))
        #expect(try await store.session(id: "ses_1") == seen)
        #expect(try await store.events(sessionID: "ses_1", after: 0) == [waiting, event])

        var ended = seen
        let cancelled = ended.record(.cancelled(), at: Date())
        ended.version += 1
        #expect(try await store.update(ended, expectedVersion: seen.version, appending: [cancelled]))
        #expect(try await store.activeSessions().isEmpty)
        try await store.close()
    }

    @Test("The events of several sessions come in one read, each session's in order; unknown ones have none")
    func eventsOfSeveralSessions() async throws {
        let store = try await Self.open(try await TestPostgres.createDatabase())
        var written: [String: [SessionEvent]] = [:]
        for index in 1...3 {
            let (session, waiting) = Self.waiting(index)
            try await store.insert(session, event: waiting)
            written[session.id] = [waiting]
        }
        var (second, _) = Self.waiting(2)
        let tapped = second.record(.tapped(asc: true), at: Date())
        let result = second.record(.result(.verified), at: Date())
        second.version += 1
        #expect(try await store.update(second, expectedVersion: second.version - 1, appending: [tapped, result]))
        written["ses_2"]! += [tapped, result]

        #expect(try await store.events(of: ["ses_2", "ses_1", "ses_3", "ses_9"]) == written)
        #expect(try await store.events(of: ["ses_2"]) == ["ses_2": written["ses_2"]!])
        #expect(try await store.events(of: ["ses_9"]).isEmpty)
        try await store.close()
    }

    @Test("Instances starting at once apply each schema version once, and a restart applies none")
    func migrationsOnce() async throws {
        let url = try await TestPostgres.createDatabase()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<3 { group.addTask { try await Self.open(url).close() } }
            try await group.waitForAll()
        }
        try await Self.open(url).close()
        let versions = try await TestPostgres.withConnection(url) { connection in
            var versions: [Int] = []
            for try await version in try await connection.query(
                "SELECT version FROM linkrelay_schema ORDER BY version", logger: TestPostgres.logger
            ).decode(Int.self) {
                versions.append(version)
            }
            return versions
        }
        #expect(versions == Array(1...PostgresSessionStore.schemaVersion))
    }

    @Test("A write with events notifies its session id and last seq once committed; a refused one does not")
    func notifiesCommittedWrites() async throws {
        let url = try await TestPostgres.createDatabase()
        let store = try await Self.open(url)
        try await TestPostgres.withConnection(url) { listener in
            try await listener.listen(on: PostgresSessionStore.channel) { notifications in
                var iterator = notifications.makeAsyncIterator()
                let (session, waiting) = Self.waiting(1)
                try await store.insert(session, event: waiting)
                #expect(try await iterator.next()?.payload == "ses_1 1")

                var next = session
                let tapped = next.record(.tapped(asc: true), at: Date())
                next.version += 1
                #expect(try await !store.update(next, expectedVersion: 7, appending: [tapped]))
                #expect(try await store.update(next, expectedVersion: session.version, appending: [tapped]))
                // The refused write sent nothing: the next wake-up is the committed one's.
                #expect(try await iterator.next()?.payload == "ses_1 2")
            }
        }
        try await store.close()
    }

    @Test("One running instance verifies a landed session; once it is gone, another takes the session over")
    func verificationClaims() async throws {
        let url = try await TestPostgres.createDatabase()
        let (a, b) = (try await Self.open(url), try await Self.open(url))
        let (session, waiting) = Self.waiting(1)
        try await a.insert(session, event: waiting)
        try await a.heartbeat()
        try await b.heartbeat()
        // A's write lands the session: A holds its verification from that write on.
        var tapped = session
        let event = tapped.record(.tapped(asc: true), at: Date())
        tapped.version += 1
        tapped.verificationPending = true
        #expect(try await a.update(tapped, expectedVersion: session.version, appending: [event]))
        #expect(try await a.sessionToVerify(id: "ses_1") != nil, "a claim is kept by its holder")
        #expect(try await b.sessionToVerify(id: "ses_1") == nil)
        #expect(try await b.orphanedVerifications().isEmpty)

        // A stops saying it runs.
        try await TestPostgres.withConnection(url) { connection in
            _ = try await connection.query(
                "UPDATE linkrelay_instances SET seen_at = now() - interval '1 minute' WHERE id = \(a.instanceID)",
                logger: TestPostgres.logger
            ).collect()
        }
        #expect(try await b.orphanedVerifications() == ["ses_1"])
        #expect(try await b.sessionToVerify(id: "ses_1") != nil)
        #expect(try await a.sessionToVerify(id: "ses_1") == nil, "B runs and holds it now")

        // B leaves (shutdown): its claims are free at once.
        try await b.leave()
        try await a.heartbeat()
        #expect(try await a.sessionToVerify(id: "ses_1") != nil)
        try await a.close()
        try await b.close()
    }

    @Test(
        "The instance whose write landed a session verifies it as written; a cancel on another instance meanwhile refuses the verifier's write"
    )
    func verificationFromOwnWrite() async throws {
        let url = try await TestPostgres.createDatabase()
        let (a, b) = (try await Self.open(url), try await Self.open(url))
        let (session, waiting) = Self.waiting(1)
        try await a.insert(session, event: waiting)
        var tapped = session
        let tap = tapped.record(.tapped(asc: true), at: Date())
        tapped.version += 1
        tapped.verificationPending = true
        #expect(try await a.update(tapped, expectedVersion: session.version, appending: [tap]))

        // B cancels the session before A's verifier starts.
        var cancelled = try #require(try await b.session(id: "ses_1"))
        let cancel = cancelled.record(.cancelled(), at: Date())
        cancelled.version += 1
        #expect(try await b.update(cancelled, expectedVersion: tapped.version, appending: [cancel]))

        let toVerify = try #require(try await a.sessionToVerify(id: "ses_1"))
        #expect(toVerify.version == tapped.version && toVerify.state == .tapped, "as A's landing wrote it")
        var verified = toVerify
        let result = verified.record(.result(.verified), at: Date())
        verified.version += 1
        #expect(
            try await a.update(verified, expectedVersion: toVerify.version, appending: [result]) == false,
            "B's cancel came first")
        #expect(try await a.session(id: "ses_1")?.state == .cancelled)
        #expect(
            try await a.events(sessionID: "ses_1", after: 0).map(\.kind.type) == ["waiting", "tapped", "cancelled"])
        // Used once: the verifier's next look goes to the database and sees the cancel.
        #expect(try await a.sessionToVerify(id: "ses_1")?.state == .cancelled)
        try await a.close()
        try await b.close()
    }

    @Test("An Idempotency-Key reserved by a running instance is refused to another until released or gone")
    func idempotencyReservations() async throws {
        let url = try await TestPostgres.createDatabase()
        let (a, b) = (try await Self.open(url), try await Self.open(url))
        #expect(try await a.reserveIdempotencyKey("k"))
        #expect(try await a.reserveIdempotencyKey("k"), "its own reservation is its to renew")
        #expect(try await !b.reserveIdempotencyKey("k"))
        try await a.releaseIdempotencyKey("k")
        #expect(try await b.reserveIdempotencyKey("k"))
        #expect(try await !a.reserveIdempotencyKey("k"))
        // B stops saying it runs: its reservation no longer holds.
        try await TestPostgres.withConnection(url) { connection in
            _ = try await connection.query(
                "UPDATE linkrelay_instances SET seen_at = now() - interval '1 minute' WHERE id = \(b.instanceID)",
                logger: TestPostgres.logger
            ).collect()
        }
        #expect(try await a.reserveIdempotencyKey("k"))
        try await a.close()
        try await b.close()
    }

    @Test("Sessions past their hold by more than the grace are overdue; live and ended ones are not")
    func overdueSessions() async throws {
        let store = try await Self.open(try await TestPostgres.createDatabase())
        let (live, liveEvent) = Self.waiting(1)
        try await store.insert(live, event: liveEvent)
        var (late, lateEvent) = Self.waiting(2)
        late.expiresAt = Date().addingTimeInterval(-60)
        try await store.insert(late, event: lateEvent)
        var (ended, endedEvent) = Self.waiting(3)
        ended.expiresAt = late.expiresAt
        try await store.insert(ended, event: endedEvent)
        var cancelled = ended
        let cancel = cancelled.record(.cancelled(), at: Date())
        cancelled.version += 1
        #expect(try await store.update(cancelled, expectedVersion: ended.version, appending: [cancel]))

        #expect(try await store.overdueSessions(grace: 10) == ["ses_2"])
        #expect(try await store.overdueSessions(grace: 120).isEmpty)
        try await store.close()
    }

    @Test("A store whose server cannot be reached fails to open")
    func unreachable() async throws {
        // A port nothing listens on.
        let port = try PersistenceTests.freePort()
        let base = try #require(TestPostgres.url)
        var parts = try #require(URLComponents(string: base))
        parts.port = port
        let url = try #require(parts.string)
        let error = await #expect(throws: StoreUnreachable.self) {
            try await PostgresSessionStore.open(
                url: try PostgresURL(url), logger: TestPostgres.logger, limit: .seconds(2))
        }
        #expect(error?.description == "PostgreSQL at 127.0.0.1:\(port) did not answer within 2.0 seconds")
    }
}
