import Foundation
import LinkRelayCore
import PostgresNIO
import Testing

@testable import LinkRelayServer

/// Two real `linkrelay` processes on one PostgreSQL database, with Prove's sandbox as a process of
/// its own: the phone lands on A, the desktop waits on B.
///
/// One test at a time: each starts three processes, and under ThreadSanitizer seven such tests at
/// once kept the 2 cores so busy that connecting to PostgreSQL took longer than its timeout.
@Suite(
    "Many instances on PostgreSQL", .enabled(if: TestPostgres.available, "LINKRELAY_TEST_POSTGRES_URL is not set"),
    .serialized, .timeLimit(.minutes(2)))
struct MultiInstanceTests {
    typealias Child = PersistenceTests.Child

    struct Cluster {
        let database: String
        let sandbox: (child: Child, port: Int)
        let a: (child: Child, base: String)
        let b: (child: Child, base: String)

        func stop() {
            for child in [a.child, b.child, sandbox.child] { child.stop() }
        }

        /// What the phone does: opens the newest Instant Link at Prove, which redirects to the relay
        /// that started the session; returns the landing's status.
        func tap() async throws -> Int { try await land(try #require(try await links().last)) }

        func create(on base: String? = nil) async throws -> Created {
            let answer = try await TestRelay.fetch(
                .POST, (base ?? a.base) + "/v1/sessions",
                headers: [("Authorization", "Bearer \(TestRelay.apiKey)"), ("Content-Type", "application/json")],
                body: #"{"phoneNumber":"2001004014"}"#)
            #expect(answer.status == 201)
            return try answer.json(Created.self)
        }

        /// A channel URL of a session created on one instance (`http://` or `ws://`), on the other.
        func other(_ url: String) -> String {
            let (hostA, hostB) = (a.base.dropFirst(7), b.base.dropFirst(7))
            return url.contains(hostA)
                ? url.replacingOccurrences(of: hostA, with: hostB) : url.replacingOccurrences(of: hostB, with: hostA)
        }

        /// A desktop's WebSocket for `created`, opened on the instance that did not create it.
        func webSocketOnOther(_ created: Created) -> AsyncThrowingStream<WireEvent, any Error>.Iterator {
            let url = other(created.channel.websocket)
            let page = "http://" + url.dropFirst("ws://".count).prefix { $0 != "/" }
            return ChannelClient.webSocket(url + "?token=\(created.channel.token)", origin: page).makeAsyncIterator()
        }

        /// Every Instant Link the sandbox has sent, oldest first.
        func links() async throws -> [String] {
            let outbox = try await TestRelay.fetch(
                .GET, "http://127.0.0.1:\(sandbox.port)/sandbox/outbox?phoneNumber=2001004014")
            struct Outbox: Decodable {
                struct Message: Decodable { var link: String }
                var messages: [Message]
            }
            return try outbox.json(Outbox.self).messages.map(\.link)
        }

        /// Opens an Instant Link at Prove and follows its redirect to the relay's landing.
        func land(_ link: String) async throws -> Int {
            let landing = try #require(try await TestRelay.fetch(.GET, link).header("Location"))
            return try await TestRelay.fetch(.GET, landing).status
        }

        func sandboxFault(_ body: String?, on endpoint: String) async throws {
            let url = "http://127.0.0.1:\(sandbox.port)/sandbox/faults/\(endpoint)"
            let answer = try await TestRelay.fetch(body == nil ? .DELETE : .PUT, url, body: body)
            #expect(answer.status == 204)
        }

        func session(_ id: String, on base: String) async throws -> SessionBody {
            try await TestRelay.fetch(
                .GET, base + "/v1/sessions/\(id)", headers: [("Authorization", "Bearer \(TestRelay.apiKey)")]
            ).json(SessionBody.self)
        }
    }

    static func start(database named: String? = nil) async throws -> Cluster {
        var database = named ?? ""
        if named == nil { database = try await TestPostgres.createDatabase() }
        let sandbox = try await PersistenceTests.start(ready: "listening") { ["sandbox", "--port", String($0)] }
        func relay() async throws -> (Child, String) {
            let (child, port) = try await PersistenceTests.start(
                ready: "LinkRelay listening", "Listening to other instances' events",
                environment: [
                    "PROVE_CLIENT_ID": "sandbox-client", "PROVE_CLIENT_SECRET": "sandbox-secret",
                    "NEVIS_ACCESS_KEY": "sandbox-nevis-access-key",
                ]
            ) { port in
                [
                    "serve", "--drain-delay", "0", "--port", String(port), "--store", database, "--api-key",
                    TestRelay.apiKey,
                    "--prove", "http://127.0.0.1:\(sandbox.1)/sandbox/prove", "--limits", "off",
                    "--nevis", "http://127.0.0.1:\(sandbox.1)/sandbox/nevis",
                ]
            }
            return (child, "http://127.0.0.1:\(port)")
        }
        return Cluster(database: database, sandbox: sandbox, a: try await relay(), b: try await relay())
    }

    @Test("Created and landed on A: B's WebSocket, SSE and long-poll get tapped and result in order; GET agrees")
    func tapOnAWakesB() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        let created = try await cluster.create()
        let token = created.channel.token

        var socket = cluster.webSocketOnOther(created)
        #expect(try await socket.next()?.type == "waiting")
        var stream = ChannelClient.serverSentEvents(
            TestRelay.client, url: cluster.other(created.channel.events),
            headers: [("Authorization", "Bearer \(token)")]
        ).makeAsyncIterator()
        #expect(try await stream.next()?.event == "waiting")
        async let polled = TestRelay.fetch(
            .GET, cluster.other(created.channel.poll) + "?after=1&timeout=20&token=\(token)")

        #expect(try await cluster.tap() == 200)

        var received: [WireEvent] = []
        while let event = try await socket.next() { received.append(event) }
        #expect(received.map(\.type) == ["tapped", "result"])
        #expect(received.map(\.seq) == [2, 3])
        #expect(received.last?.outcome == "verified")
        var messages: [String?] = []
        while let message = try await stream.next() { messages.append(message.event) }
        #expect(messages == ["tapped", "result"])
        let poll = try await polled.json(PollAnswer.self)
        #expect(poll.events.first?.type == "tapped")

        let onA = try await cluster.session(created.sessionId, on: cluster.a.base)
        let onB = try await cluster.session(created.sessionId, on: cluster.b.base)
        #expect(onA.state == "verified")
        #expect(onB.state == onA.state)
        #expect(onB.events == onA.events)
        #expect(onB.events.map(\.type) == ["waiting", "tapped", "result"])
    }

    @Test("Nevis sessions created on A, approved in the app: B's WebSocket, SSE and long-poll get the result")
    func nevisAcrossInstances() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        for transport in NevisSessionTests.Transport.allCases {
            let created = try await NevisProcessTests.create(#"{"flow":"nevis","username":"dave"}"#, on: cluster.a.base)
            var channel = created.channel
            (channel.websocket, channel.events, channel.poll) = (
                cluster.other(channel.websocket), cluster.other(channel.events), cluster.other(channel.poll)
            )
            // Approved first: the raw WebSocket client gives up after 10 s without a frame, and the answer
            // reaches the channel at the relay's next question (a channel replays what came before it).
            #expect(try await NevisApp.answer(link: try #require(created.approval.appLink), approve: true) == 200)
            let received = try await NevisApp.events(channel, transport, origin: cluster.b.base).value
            #expect(received.map(\.type) == ["waiting", "result"], "\(transport)")
            #expect(received.last?.outcome == "verified")
        }
    }

    @Test("A is killed (SIGKILL) while its Nevis session waits: B asks Nevis instead, and delivers the result")
    func nevisInstanceKilled() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        let created = try await NevisProcessTests.create(#"{"flow":"nevis","username":"dave"}"#, on: cluster.a.base)
        var channel = created.channel
        channel.poll = cluster.other(channel.poll)
        // Long-poll: B's answers come every 10 s at most, however long the take-over takes.
        let events = NevisApp.events(channel, .longPoll)
        await cluster.a.child.kill()
        #expect(try await NevisApp.answer(link: try #require(created.approval.appLink), approve: true) == 200)
        // B takes the questions over once A has been silent for `presumedGone` seconds.
        let received = try await events.value
        #expect(received.map(\.type) == ["waiting", "result"] && received.last?.outcome == "verified")
        #expect(try await cluster.session(created.sessionId, on: cluster.b.base).state == "verified")
    }

    @Test("B's listen connection is cut while a session waits: the tap still reaches B's channel")
    func listenConnectionDropped() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        let created = try await cluster.create()
        var socket = cluster.webSocketOnOther(created)
        #expect(try await socket.next()?.type == "waiting")

        // Both instances listen; ending every listening backend ends B's.
        let ended = try await TestPostgres.withConnection(cluster.database) { connection in
            var count = 0
            for try await ended in try await connection.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND query ILIKE 'LISTEN%'
                """,
                logger: TestPostgres.logger
            ).decode(Bool.self) where ended {
                count += 1
            }
            return count
        }
        #expect(ended == 2)

        #expect(try await cluster.tap() == 200)
        var received: [WireEvent] = []
        while let event = try await socket.next() { received.append(event) }
        #expect(received.map(\.type) == ["tapped", "result"])
    }

    @Test("A is killed (SIGKILL) between landing and result: B finishes the verification, with no duplicate event")
    func killedBetweenLandingAndResult() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        let created = try await cluster.create()
        var socket = cluster.webSocketOnOther(created)
        #expect(try await socket.next()?.type == "waiting")

        // Prove holds A's question about the result; A dies while it waits.
        try await cluster.sandboxFault("hang", on: "unify-status")
        #expect(try await cluster.tap() == 200)
        #expect(try await socket.next()?.type == "tapped")
        await cluster.a.child.kill()
        try await cluster.sandboxFault(nil, on: "unify-status")

        // B takes the verification over once A has been silent for `presumedGone` seconds.
        let result = try await socket.next()
        #expect(result?.type == "result")
        #expect(result?.outcome == "verified")
        let session = try await cluster.session(created.sessionId, on: cluster.b.base)
        #expect(session.state == "verified")
        #expect(session.events.map(\.type) == ["waiting", "tapped", "result"])
        #expect(session.events.map(\.seq) == [1, 2, 3])
    }

    @Test(
        "200 sessions, half created on each instance and each watched on the other: every channel gets its own events")
    func manySessionsAcrossInstances() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        let count = 200
        var created: [Created] = []
        try await withThrowingTaskGroup(of: Created.self) { group in
            for index in 0..<count {
                group.addTask {
                    try await cluster.create(on: index.isMultiple(of: 2) ? cluster.a.base : cluster.b.base)
                }
            }
            for try await session in group { created.append(session) }
        }
        #expect(Set(created.map(\.sessionId)).count == count)

        var received: [String: [WireEvent]] = [:]
        try await withThrowingTaskGroup(of: (String, [WireEvent]).self) { group in
            // Every channel is open (it has its `waiting`) before any link is tapped.
            let (opened, openedContinuation) = AsyncStream<Void>.makeStream()
            for session in created {
                group.addTask {
                    var socket = cluster.webSocketOnOther(session)
                    var events: [WireEvent] = []
                    if let first = try await socket.next() { events.append(first) }
                    openedContinuation.yield()
                    while let event = try await socket.next() { events.append(event) }
                    return (session.sessionId, events)
                }
            }
            var waiting = 0
            for await _ in opened {
                waiting += 1
                if waiting == count { break }
            }
            let links = try await cluster.links()
            #expect(links.count == count)
            try await withThrowingTaskGroup(of: Int.self) { taps in
                for link in links { taps.addTask { try await cluster.land(link) } }
                for try await status in taps { #expect(status == 200) }
            }
            for try await (id, events) in group { received[id] = events }
        }
        #expect(received.count == count)
        for session in created {
            let events = received[session.sessionId] ?? []
            #expect(events.map(\.type) == ["waiting", "tapped", "result"], "session \(session.sessionId)")
            // Its own: the events as the store holds them for that session (the `waiting` of each
            // carries its own expiry).
            let stored = try await cluster.session(session.sessionId, on: cluster.a.base)
            #expect(stored.events == events)
            #expect(stored.state == "verified")
        }
    }

    @Test("An Idempotency-Key holds across instances: the same request on A and on B gives one session")
    func idempotencyAcrossInstances() async throws {
        let cluster = try await Self.start()
        defer { cluster.stop() }
        func create(on base: String, key: String = "order-42") async throws -> HTTPAnswer {
            try await TestRelay.fetch(
                .POST, base + "/v1/sessions",
                headers: [
                    ("Authorization", "Bearer \(TestRelay.apiKey)"), ("Content-Type", "application/json"),
                    ("Idempotency-Key", key),
                ],
                body: #"{"phoneNumber":"2001004014"}"#)
        }
        let first = try await create(on: cluster.a.base)
        let again = try await create(on: cluster.b.base)
        #expect(first.status == 201)
        #expect(again.status == 201)
        #expect(try again.json(Created.self).sessionId == first.json(Created.self).sessionId)
        #expect(try await cluster.links().count == 1, "one SMS")

        // At the same moment on both: one starts the flow; the other answers with its session, or
        // 409 (retry) while it is being made.
        async let onA = create(on: cluster.a.base, key: "order-43")
        async let onB = create(on: cluster.b.base, key: "order-43")
        let answers = try await [onA, onB]
        let made = try answers.filter { $0.status == 201 }.map { try $0.json(Created.self).sessionId }
        #expect(!made.isEmpty)
        #expect(Set(made).count == 1)
        #expect(answers.allSatisfy { [201, 409].contains($0.status) })
        #expect(try await cluster.links().count == 2, "one more SMS")
    }

    /// Runs `scripts/postgres-cluster.sh` with `arguments`; returns what it printed.
    static func postgresCluster(_ arguments: String) async throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID()).out")
        defer { try? FileManager.default.removeItem(at: output) }
        let script = try Child(
            ["-c", "scripts/postgres-cluster.sh \(arguments) > \(output.path)"],
            executable: URL(fileURLWithPath: "/bin/bash"))
        await script.exited()
        return try String(contentsOf: output, encoding: .utf8)
    }

    @Test("PostgreSQL restarts while a desktop waits on B: /readyz is 503 meanwhile, then the tap on A reaches B")
    func postgresRestarts() async throws {
        // A server of its own, since this test stops it.
        let started = try await Self.postgresCluster("start")
        func value(_ name: String) throws -> String {
            let line = try #require(started.split(separator: "\n").first { $0.hasPrefix("export \(name)=") })
            return String(line.dropFirst("export \(name)=".count))
        }
        let directory = try value("LINKRELAY_TEST_POSTGRES_DIR")
        do {
            try await restart(server: try value("LINKRELAY_TEST_POSTGRES_URL"), directory: directory)
        } catch {
            _ = try? await Self.postgresCluster("stop \(directory)")
            throw error
        }
        _ = try await Self.postgresCluster("stop \(directory)")
    }

    private func restart(server: String, directory: String) async throws {
        try await TestPostgres.withConnection(server) { connection in
            _ = try await connection.query("CREATE DATABASE relays", logger: TestPostgres.logger).collect()
        }
        let cluster = try await Self.start(database: server.replacingOccurrences(of: "/postgres?", with: "/relays?"))
        defer { cluster.stop() }
        let created = try await cluster.create()
        var socket = cluster.webSocketOnOther(created)
        #expect(try await socket.next()?.type == "waiting")

        _ = try await Self.postgresCluster("down \(directory)")
        #expect(await cluster.b.child.waitFor("PostgreSQL listen connection lost"))
        let ready = try await TestRelay.fetch(.GET, cluster.b.base + "/readyz")
        #expect(ready.status == 503)
        #expect(try await TestRelay.fetch(.HEAD, cluster.b.base + "/readyz").status == 503)

        _ = try await Self.postgresCluster("up \(directory)")
        #expect(await cluster.b.child.waitFor("Listening to other instances' events"))
        #expect(try await cluster.tap() == 200)
        var received: [WireEvent] = []
        while let event = try await socket.next() { received.append(event) }
        #expect(received.map(\.type) == ["tapped", "result"])
        #expect(try await TestRelay.fetch(.GET, cluster.b.base + "/readyz").status == 200)
    }
}
