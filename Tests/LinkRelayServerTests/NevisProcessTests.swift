import AsyncHTTPClient
import Foundation
import LinkRelayCore
import Testing

@testable import LinkRelayServer

/// Nevis sessions against `linkrelay sandbox` in a process of its own, as against a real Nevis: nevisFIDO
/// (whose status says when the app has the operation), and a relay restarted while a session waits.
@Suite("Nevis with a separate sandbox", .timeLimit(.minutes(2)))
struct NevisProcessTests {
    typealias Child = PersistenceTests.Child

    static func sandbox() async throws -> (Child, String) {
        let (child, port) = try await PersistenceTests.start(ready: "listening") { ["sandbox", "--port", String($0)] }
        return (child, "http://127.0.0.1:\(port)/sandbox")
    }

    /// A relay on `store` that asks the sandbox at `sandbox` for Prove and Nevis (`nevis`: `--nevis`'s value).
    static func relay(store: String, sandbox: String, nevis: String, extra: [String] = []) async throws
        -> (Child, String)
    {
        let (child, port) = try await PersistenceTests.start(
            ready: "LinkRelay listening",
            environment: [
                "PROVE_CLIENT_ID": "sandbox-client", "PROVE_CLIENT_SECRET": "sandbox-secret",
                "NEVIS_ACCESS_KEY": "sandbox-nevis-access-key",
            ]
        ) { port in
            [
                "serve", "--drain-delay", "0", "--port", String(port), "--store", store, "--api-key", TestRelay.apiKey,
                "--prove", sandbox + "/prove", "--nevis", nevis, "--limits", "off",
            ] + extra
        }
        return (child, "http://127.0.0.1:\(port)")
    }

    static func create(_ body: String, on base: String) async throws -> NevisCreated {
        let answer = try await TestRelay.fetch(
            .POST, base + "/v1/sessions",
            headers: [("Authorization", "Bearer \(TestRelay.apiKey)"), ("Content-Type", "application/json")],
            body: body)
        #expect(answer.status == 201, "create answered \(answer.status): \(answer.body)")
        return try answer.json(NevisCreated.self)
    }

    @Test(
        "nevisFIDO with the link dispatcher: the relay draws the QR code; the app redeeming the token is the tap",
        arguments: ["alice", "dave"])
    func fido(user: String) async throws {
        let (sandbox, sandboxBase) = try await Self.sandbox()
        defer { sandbox.stop() }
        let (relay, base) = try await Self.relay(
            store: "memory", sandbox: sandboxBase, nevis: "fido:" + sandboxBase + "/nevis",
            extra: ["--nevis-dispatcher", "link"])
        defer { relay.stop() }
        let created = try await Self.create(#"{"flow":"nevis","username":"\#(user)"}"#, on: base)
        let link = try #require(created.approval.appLink)
        #expect(created.approval.qrCode?.hasPrefix("data:image/png;base64,") == true)
        var events = ChannelClient.serverSentEvents(
            TestRelay.client, url: created.channel.events,
            headers: [("Authorization", "Bearer \(created.channel.token)")]
        ).makeAsyncIterator()
        #expect(try await events.next()?.event == "waiting")
        // alice's device takes the operation by itself; dave opens it in the app, which redeems its token.
        if user == "dave" { #expect(try await TestRelay.fetch(.GET, link).status == 200) }
        let tapped = try #require(try await events.next())
        #expect(tapped.event == "tapped" && tapped.data.contains(#""asc":true"#))
        if user == "dave" { #expect(try await NevisApp.answer(link: link, approve: true) == 200) }
        let result = try #require(try await events.next())
        #expect(result.event == "result" && result.data.contains(#""outcome":"verified""#))
    }

    @Test("SQLite: the relay is killed while a session waits; restarted, it asks again and delivers the result")
    func restartWhileWaiting() async throws {
        let (sandbox, sandboxBase) = try await Self.sandbox()
        defer { sandbox.stop() }
        let directory = FileManager.default.temporaryDirectory.appending(path: "nevis-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = "sqlite:" + directory.appending(path: "relay.sqlite").path

        let (first, firstBase) = try await Self.relay(store: store, sandbox: sandboxBase, nevis: sandboxBase + "/nevis")
        let created = try await Self.create(#"{"flow":"nevis","username":"dave"}"#, on: firstBase)
        await first.kill()

        // The customer approves while no relay runs; the restarted relay's first question learns it.
        #expect(try await NevisApp.answer(link: try #require(created.approval.appLink), approve: true) == 200)
        let (second, secondBase) = try await Self.relay(
            store: store, sandbox: sandboxBase, nevis: sandboxBase + "/nevis")
        defer { second.stop() }
        var channel = created.channel
        channel.poll = channel.poll.replacingOccurrences(of: firstBase, with: secondBase)
        let received = try await NevisApp.events(channel, .longPoll).value
        #expect(received.map(\.type) == ["waiting", "result"] && received.last?.outcome == "verified")
    }
}
