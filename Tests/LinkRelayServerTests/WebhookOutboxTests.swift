import Foundation
import LinkRelayCore
import Logging
import Testing

@testable import LinkRelayServer

/// The outbox as each store keeps it: the same behaviour from memory, SQLite and PostgreSQL.
@Suite("Webhooks: the outbox in each store", .timeLimit(.minutes(2)))
struct WebhookOutboxTests {
    static var stores: [String] { ["memory", "sqlite"] + (TestPostgres.available ? ["postgres"] : []) }

    /// Opens a new store of `kind`, runs `body`, and closes it even when `body` throws (SQLiteNIO stops a
    /// process whose connections were left open).
    static func withStore(_ kind: String, _ body: (any RelayStore) async throws -> Void) async throws {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any RelayStore =
            switch kind {
            case "sqlite":
                try await SQLiteSessionStore.open(
                    path: directory.appendingPathComponent("relay.sqlite").path, logger: Logger(label: "test"))
            case "postgres": try await PostgresStoreTests.open(try await TestPostgres.createDatabase())
            default: MemorySessionStore()
            }
        do {
            try await body(store)
        } catch {
            try await store.close()
            throw error
        }
        try await store.close()
    }

    @Test(
        "A message is written only with its change, leased to one claimer, retried, listed and pruned",
        arguments: stores)
    func contract(kind: String) async throws {
        try await Self.withStore(kind) { store in
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            let message = try await WebhookFixtures.enqueue(store, at: t0)
            // A change refused for its version writes no message.
            var session = try #require(try await store.session(id: message.sessionId))
            let stale = session.version - 1
            session.version += 1
            let lost = WebhookMessage(type: "session.cancelled", sessionId: session.id, createdAt: t0, payload: [])
            #expect(
                try await !store.update(
                    session, expectedVersion: stale, appending: [], reporting: [lost], committed: {}))
            #expect(
                try await store.webhookMessages(tenant: Tenant.defaultName, state: nil, limit: 10).map(\.id) == [
                    message.id
                ])
            #expect(try await store.webhookBacklog() == WebhookBacklog(pending: 1, oldestPending: t0))

            // Claimed once until its lease ends.
            let claimed = try await store.claimWebhooks(
                tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 10)
            #expect(claimed.map(\.id) == [message.id])
            #expect(claimed.first?.payload == message.payload)
            #expect(
                try await store.claimWebhooks(
                    tenant: Tenant.defaultName, dueBy: t0 + 59, leaseUntil: t0 + 120, limit: 10
                ).isEmpty)
            #expect(
                try await store.claimWebhooks(
                    tenant: Tenant.defaultName, dueBy: t0 + 60, leaseUntil: t0 + 120, limit: 10
                ).count == 1)

            // An attempt's outcome is kept with its attempts.
            var attempted = message
            attempted.attempts = [.init(at: t0 + 60, status: 500, error: "answered 500", durationMs: 3)]
            attempted.nextAttemptAt = t0 + 65
            try await store.recordWebhookAttempts([attempted])
            let pending = try await store.webhookMessages(tenant: Tenant.defaultName, state: .pending, limit: 10)
            #expect(pending.first?.attempts == attempted.attempts)
            #expect(pending.first?.nextAttemptAt == t0 + 65)
            attempted.state = .delivered
            try await store.recordWebhookAttempts([attempted])
            #expect(
                try await store.webhookMessages(tenant: Tenant.defaultName, state: .delivered, limit: 10).map(\.id) == [
                    message.id
                ])
            #expect(try await store.webhookMessages(tenant: Tenant.defaultName, state: .pending, limit: 10).isEmpty)
            #expect(try await store.webhookBacklog() == WebhookBacklog(pending: 0, oldestPending: nil))

            // A retry makes it due now, whatever its state.
            #expect(
                try await store.retryWebhook(id: message.id, tenant: Tenant.defaultName, now: t0 + 100)?.state
                    == .pending)
            #expect(try await store.retryWebhook(id: "msg_unknown", tenant: Tenant.defaultName, now: t0 + 100) == nil)
            #expect(
                try await store.claimWebhooks(
                    tenant: Tenant.defaultName, dueBy: t0 + 100, leaseUntil: t0 + 160, limit: 10
                ).count == 1)

            // Pruning keeps what is pending.
            let second = try await WebhookFixtures.enqueue(store, at: t0 + 1)
            attempted.state = .failed
            try await store.recordWebhookAttempts([attempted])
            #expect(
                try await store.pruneWebhooks(deliveredBefore: t0 + 3600, failedBefore: t0 + 3600, limit: 1000) == 1)
            #expect(
                try await store.webhookMessages(tenant: Tenant.defaultName, state: nil, limit: 10).map(\.id) == [
                    second.id
                ])
        }
    }

    @Test(
        "Outcomes stored together each end their message's lease: delivered ones stay, a retry comes due again",
        arguments: stores)
    func outcomesTogether(kind: String) async throws {
        try await Self.withStore(kind) { store in
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            let first = try await WebhookFixtures.enqueue(store, at: t0)
            let second = try await WebhookFixtures.enqueue(store, at: t0)
            let claimed = try await store.claimWebhooks(
                tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 10)
            #expect(Set(claimed.map(\.id)) == [first.id, second.id])
            var delivered = first
            delivered.state = .delivered
            delivered.attempts = [.init(at: t0, status: 204, error: nil, durationMs: 1)]
            var failed = second
            failed.attempts = [.init(at: t0, status: 500, error: "answered 500", durationMs: 1)]
            failed.nextAttemptAt = t0 + 5
            try await store.recordWebhookAttempts([delivered, failed])
            #expect(
                try await store.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 10)
                    .isEmpty)
            let again = try await store.claimWebhooks(
                tenant: Tenant.defaultName, dueBy: t0 + 5, leaseUntil: t0 + 65, limit: 10)
            #expect(again.map(\.id) == [second.id])
            #expect(again.first?.attempts == failed.attempts)
            #expect(
                try await store.webhookMessages(tenant: Tenant.defaultName, state: .delivered, limit: 10).map(\.id) == [
                    first.id
                ])
        }
    }

    /// A new session of `tenant` whose change put one message per date of `at` in the outbox.
    static func report(_ store: any RelayStore, at dates: [Date], tenant: String = Tenant.defaultName) async throws
        -> [WebhookMessage]
    {
        let now = dates[0]
        var session = Session(
            id: Secrets.sessionID(), linkKey: Secrets.token(length: 22), channelToken: "t", createdAt: now,
            expiresAt: now.addingTimeInterval(180), correlationId: "c", authToken: nil, clientRequestId: "r",
            phoneNumber: "2001004014", finalTargetUrl: "https://relay.example/l/x", idempotencyKey: nil,
            requestFingerprint: "f", desktopIPAddress: nil)
        session.tenant = tenant == Tenant.defaultName ? nil : tenant
        let first = session.record(.waiting(expiresAt: session.expiresAt), at: now)
        try await store.insert(session, event: first)
        let version = session.version
        let event = session.record(.tapped(asc: true), at: now)
        session.version = version + 1
        let messages = dates.map {
            WebhookMessage(
                type: "session.tapped", sessionId: session.id, tenant: tenant, createdAt: $0,
                payload: Array(#"{"type":"session.tapped"}"#.utf8))
        }
        #expect(
            try await store.update(
                session, expectedVersion: version, appending: [event], reporting: messages, committed: {}))
        return messages
    }

    @Test(
        "The list goes page by page to its end, newest first, by session and state, never another tenant's",
        arguments: stores)
    func pages(kind: String) async throws {
        try await Self.withStore(kind) { store in
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            var singles: [WebhookMessage] = []
            for index in 0..<5 { singles += try await Self.report(store, at: [t0 + Double(index)]) }
            // Two in one millisecond: the id orders them.
            let pair = try await Self.report(store, at: [t0 + 10, t0 + 10])
            let acme = try await Self.report(store, at: [t0 + 20], tenant: "acme")
            // Outcomes for two (on SQLite they leave the queue for their rows): the pages span both tables.
            let claimed = try await store.claimWebhooks(
                tenant: Tenant.defaultName, dueBy: t0 + 10, leaseUntil: t0 + 70, limit: 2)
            var outcomes = claimed
            outcomes[0].state = .delivered
            outcomes[1].nextAttemptAt = t0 + 40
            for index in outcomes.indices {
                outcomes[index].attempts = [.init(at: t0 + 10, status: 204, error: nil, durationMs: 1)]
            }
            try await store.recordWebhookAttempts(outcomes)

            func paged(_ listing: WebhookListing, tenant: String = Tenant.defaultName) async throws -> [String] {
                var listing = listing
                var ids: [String] = []
                while true {
                    let page = try await store.webhookMessages(tenant: tenant, listing)
                    ids += page.map(\.id)
                    guard page.count == listing.limit, let last = page.last else { return ids }
                    listing.after = WebhookCursor(last)
                }
            }
            let newestFirst = (singles + pair).sorted { WebhookCursor($0) > WebhookCursor($1) }.map(\.id)
            #expect(newestFirst.prefix(2) == ArraySlice(pair.map(\.id).sorted(by: >)))
            for limit in [1, 2, 3, 100] {
                #expect(try await paged(WebhookListing(limit: limit)) == newestFirst, "limit \(limit)")
            }
            let delivered = outcomes[0].id
            #expect(
                try await paged(WebhookListing(state: .pending, limit: 2)) == newestFirst.filter { $0 != delivered })
            #expect(try await paged(WebhookListing(state: .delivered, limit: 1)) == [delivered])
            #expect(
                try await paged(WebhookListing(sessionId: pair[0].sessionId, limit: 1)) == pair.map(\.id).sorted(by: >))
            #expect(
                try await paged(WebhookListing(state: .delivered, sessionId: pair[0].sessionId, limit: 5)).isEmpty)
            #expect(try await paged(WebhookListing(sessionId: acme[0].sessionId, limit: 5)).isEmpty, "another tenant's")
            #expect(try await paged(WebhookListing(limit: 5), tenant: "acme") == acme.map(\.id))
            // A cursor past every message ends the list.
            let oldest = try #require(singles.first)
            #expect(
                try await store.webhookMessages(
                    tenant: Tenant.defaultName, WebhookListing(after: WebhookCursor(oldest), limit: 5)
                ).isEmpty)
        }
    }

    @Test(
        "A receiver back: what waits for a retry is due at once, oldest first; what is being sent keeps its lease",
        arguments: stores)
    func retriesDue(kind: String) async throws {
        try await Self.withStore(kind) { store in
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            var messages: [WebhookMessage] = []
            for index in 0..<4 { messages += try await Self.report(store, at: [t0 + Double(index)]) }
            let other = try await Self.report(store, at: [t0], tenant: "acme")
            #expect(
                try await store.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0 + 3, leaseUntil: t0 + 63, limit: 10)
                    .count == 4)
            #expect(try await store.claimWebhooks(tenant: "acme", dueBy: t0, leaseUntil: t0 + 60, limit: 10).count == 1)
            // The first three failed and wait for retries, not in their order; the fourth is being sent.
            var failed = Array(messages.prefix(3)) + other
            for (index, delay) in [40.0, 20, 30, 25].enumerated() {
                failed[index].attempts = [.init(at: t0 + 3, status: 503, error: "answered 503", durationMs: 1)]
                failed[index].nextAttemptAt = t0 + delay
            }
            try await store.recordWebhookAttempts(failed)
            #expect(
                try await store.claimWebhooks(
                    tenant: Tenant.defaultName, dueBy: t0 + 10, leaseUntil: t0 + 70, limit: 10
                )
                .isEmpty)

            #expect(try await store.makeRetriesDue(tenant: Tenant.defaultName, now: t0 + 10) == 3)
            #expect(
                try await store.claimWebhooks(
                    tenant: Tenant.defaultName, dueBy: t0 + 10, leaseUntil: t0 + 70, limit: 10
                )
                .map(\.id) == messages.prefix(3).map(\.id))
            // Another tenant's receiver is not back: its message waits for its own retry.
            #expect(
                try await store.claimWebhooks(tenant: "acme", dueBy: t0 + 10, leaseUntil: t0 + 70, limit: 10).isEmpty)
        }
    }

    @Test("Newest first, and at most the limit")
    func listing() async throws {
        try await Self.withStore("sqlite") { store in
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            var ids: [String] = []
            for index in 0..<5 { ids.append(try await WebhookFixtures.enqueue(store, at: t0 + Double(index)).id) }
            #expect(
                try await store.webhookMessages(tenant: Tenant.defaultName, state: nil, limit: 3).map(\.id)
                    == Array(ids.reversed().prefix(3)))
        }
    }

    @Test("Pending messages outlive the process: a reopened SQLite file still has them, due")
    func survivesRestart() async throws {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let message = try? await WebhookFixtures.enqueue(first, at: t0)
        // Claimed by the process that then stops: the lease ends, and the message is due again.
        _ = try? await first.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 10)
        try await first.close()
        let second = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        let claimed = try? await second.claimWebhooks(
            tenant: Tenant.defaultName, dueBy: t0 + 60, leaseUntil: t0 + 120, limit: 10)
        try await second.close()
        #expect(claimed?.map(\.id) == [try #require(message).id])
    }

    @Test(
        "Two instances claiming at once on PostgreSQL get each message once",
        .enabled(if: TestPostgres.available, "LINKRELAY_TEST_POSTGRES_URL is not set"))
    func claimsAcrossInstances() async throws {
        let url = try await TestPostgres.createDatabase()
        let a = try await PostgresStoreTests.open(url)
        let b = try await PostgresStoreTests.open(url)
        defer {
            Task {
                try await a.close()
                try await b.close()
            }
        }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var all: Set<String> = []
        for _ in 0..<60 { all.insert(try await WebhookFixtures.enqueue(a, at: t0).id) }
        var claimed: [String] = []
        while claimed.count < all.count {
            async let fromA = a.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 7)
            async let fromB = b.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 7)
            let batch = try await fromA + fromB
            #expect(!batch.isEmpty)
            if batch.isEmpty { break }
            claimed += batch.map(\.id)
        }
        #expect(claimed.count == all.count)
        #expect(Set(claimed) == all)
    }

    /// SQLite's claims read without writing: a read whose snapshot predates an outcome's commit must not
    /// take that message again, and a read after it takes what is due.
    @Test("A claim whose read began before an outcome was stored does not take that message again")
    func staleReadAfterSettling() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let message = WebhookMessage(type: "session.tapped", sessionId: "ses_1", createdAt: t0, payload: [])
        var leases = WebhookLeases()
        let (read, _) = leases.beginClaim(now: t0)
        #expect(leases.take([message], readAfter: read, until: t0 + 60, limit: 10).map(\.id) == [message.id])
        #expect(leases.take([message], readAfter: read, until: t0 + 60, limit: 10).isEmpty, "leased")

        // A retry is stored while the next claim's read runs: that read may predate it.
        let (stale, skipped) = leases.beginClaim(now: t0 + 1)
        #expect(skipped == 1)
        leases.settle([message.id])
        #expect(leases.take([message], readAfter: stale, until: t0 + 61, limit: 10).isEmpty)
        // A read that began after the commit sees the stored state: a message due again is taken.
        let (fresh, _) = leases.beginClaim(now: t0 + 5)
        #expect(leases.take([message], readAfter: fresh, until: t0 + 65, limit: 10).map(\.id) == [message.id])
        // A lease that ran out (its outcome never stored) frees the message.
        let (late, _) = leases.beginClaim(now: t0 + 66)
        #expect(leases.take([message], readAfter: late, until: t0 + 126, limit: 10).count == 1)
    }

    /// SQLite: the event's write appends its message to `webhook_queue` only; its first outcome moves it,
    /// with its indexes, into `webhook_messages`. Until then the outbox reads it from the queue, after a
    /// restart too, and a retry gives it its row.
    @Test("SQLite: a new message waits in the queue until its first outcome, and is read from there meanwhile")
    func sqliteQueue() async throws {
        let directory = try SQLiteStoreTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.sqlite").path
        func count(_ store: SQLiteSessionStore, _ table: String) async throws -> Int {
            Int(try await store.read("SELECT count(*) AS n FROM \(table)").first?.column("n")?.integer ?? -1)
        }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        var first = try await WebhookFixtures.enqueue(store, at: t0)
        #expect(try await count(store, "webhook_queue") == 1)
        #expect(try await count(store, "webhook_messages") == 0)
        #expect(
            try await store.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0, leaseUntil: t0 + 60, limit: 10).map(
                \.id) == [first.id])
        #expect(try await count(store, "webhook_messages") == 0, "a claim writes nothing")
        first.attempts = [.init(at: t0, status: 500, error: "answered 500", durationMs: 1)]
        first.nextAttemptAt = t0 + 5
        try await store.recordWebhookAttempts([first])
        #expect(try await count(store, "webhook_queue") == 0)
        #expect(try await count(store, "webhook_messages") == 1)
        let second = try await WebhookFixtures.enqueue(store, at: t0 + 1)
        let third = try await WebhookFixtures.enqueue(store, at: t0 + 2)
        try await store.close()

        store = try await SQLiteSessionStore.open(path: path, logger: Logger(label: "test"))
        #expect(try await store.webhookBacklog() == WebhookBacklog(pending: 3, oldestPending: t0))
        #expect(
            try await store.webhookMessages(tenant: Tenant.defaultName, state: .pending, limit: 10).map(\.id) == [
                third.id, second.id, first.id,
            ])
        #expect(try await store.webhookMessages(tenant: Tenant.defaultName, state: .delivered, limit: 10).isEmpty)
        // Oldest due first, across both tables: the queued ones came due when they were written.
        #expect(
            try await store.claimWebhooks(tenant: Tenant.defaultName, dueBy: t0 + 5, leaseUntil: t0 + 65, limit: 2).map(
                \.id) == [
                    second.id, third.id,
                ])
        #expect(
            try await store.retryWebhook(id: third.id, tenant: Tenant.defaultName, now: t0 + 6)?.nextAttemptAt == t0 + 6
        )
        #expect(try await count(store, "webhook_queue") == 1)
        try await store.close()
    }
}
