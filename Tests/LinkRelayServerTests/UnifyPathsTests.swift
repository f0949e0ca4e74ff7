import Foundation
import LinkRelayCore
import Testing

/// Every Unify path of issue 36 end to end on each store, and against a separate `linkrelay sandbox`:
/// a lost redirect and the finish hook, a resent link, and customer-supplied possession with its bind.
@Suite("Unify paths on every store", .timeLimit(.minutes(2)))
struct UnifyPathsTests {
    static let stores = ["sqlite"] + (TestPostgres.available ? ["postgres"] : [])

    /// Runs `body` with a relay on `kind`, against the embedded sandbox or, with `sandbox`, a separate one
    /// (whose base URL `body` gets for the outbox and the links' controls). `socket`: as `TestRelay.run`'s.
    static func run(
        _ kind: String, separateSandbox: Bool = false, socket: Bool = false,
        _ body: (TestRelay, String) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-paths-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store =
            kind == "postgres"
            ? try await TestPostgres.createDatabase() : "sqlite:" + directory.appendingPathComponent("r.sqlite").path
        guard separateSandbox else {
            return try await TestRelay.run(socket: socket, store: store) { relay in try await body(relay, relay.base) }
        }
        let (sandbox, port) = try await PersistenceTests.start(ready: "listening") {
            ["sandbox", "--port", String($0)]
        }
        defer { sandbox.stop() }
        let base = "http://127.0.0.1:\(port)"
        try await TestRelay.run(
            socket: socket, store: store, flags: ["prove": [base + "/sandbox/prove"]],
            environment: ["PROVE_CLIENT_ID": "sandbox-client", "PROVE_CLIENT_SECRET": "sandbox-secret"]
        ) { relay in try await body(relay, base) }
    }

    static func newestLink(_ relay: TestRelay, _ sandbox: String, _ phone: String = "2001004014") async throws -> String
    {
        struct Outbox: Decodable {
            struct Message: Decodable { var link: String }
            var messages: [Message]
        }
        let outbox = try await relay.request(.GET, sandbox + "/sandbox/outbox?phoneNumber=\(phone)")
        return try #require(try outbox.json(Outbox.self).messages.last?.link)
    }

    static func paths(_ relay: TestRelay, sandbox: String) async throws {
        // A lost redirect, then the finish hook.
        let lost = try await relay.createSession()
        #expect(try await relay.request(.GET, try await newestLink(relay, sandbox) + "?redirect=0").status == 200)
        let finish = try await relay.request(
            .POST, "/v1/sessions/\(lost.sessionId)/finish", headers: [("Authorization", "Bearer \(lost.channel.token)")]
        )
        #expect(finish.status == 202)
        #expect(try await relay.pollUntilDone(lost).map(\.type) == ["waiting", "result"])

        // A resent link lands on its session.
        let resent = try await relay.createSession()
        #expect(try await relay.request(.POST, sandbox + "/sandbox/resend?phoneNumber=2001004014").status == 204)
        let redirect = try #require(
            try await relay.request(.GET, try await newestLink(relay, sandbox)).header("Location"))
        #expect(try await relay.request(.GET, redirect).status == 200)
        #expect(try await relay.pollUntilDone(resent).map(\.type) == ["waiting", "tapped", "result"])

        // Customer-supplied possession, then the bind.
        let none = try await relay.api(
            .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#
        ).json(Created.self)
        #expect(try await relay.pollUntilDone(none).last?.outcome == "possession_required")
        let bound = try await relay.api(.POST, "/v1/sessions/\(none.sessionId)/bind")
        #expect(bound.status == 200)
        #expect(bound.body.contains(#""success":true"#))
        #expect(try await relay.api(.GET, "/v1/sessions/\(none.sessionId)").body.contains(#""binding""#))
    }

    @Test("Each path on each store, with the embedded sandbox", arguments: stores)
    func embedded(_ store: String) async throws {
        try await Self.run(store) { relay, sandbox in try await Self.paths(relay, sandbox: sandbox) }
    }

    @Test("Each path against a separate linkrelay sandbox", arguments: stores)
    func separate(_ store: String) async throws {
        try await Self.run(store, separateSandbox: true) { relay, sandbox in
            try await Self.paths(relay, sandbox: sandbox)
        }
    }
}
