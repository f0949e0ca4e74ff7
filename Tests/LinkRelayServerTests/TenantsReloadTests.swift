import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// Operators' keys (`--ops-key`, `"opsKeys"`) and SIGHUP's reload of the tenants file (API.md v1.3
/// "Operators"): what opens `/ops`, and what a reload changes for the next request and what it leaves.
@Suite("Tenants: ops keys and SIGHUP's reload", .timeLimit(.minutes(2)))
struct TenantsReloadTests {
    static let opsKey = "ops-key-of-the-operator-0123"
    static let acmeKey = "acme-key-0123456789abcdef"
    static let acmeKeyNew = "acme-key-rotated-0123456789"

    static func basic(_ password: String) -> HTTPHeaders {
        ["Authorization": "Basic " + Data("ops:\(password)".utf8).base64EncodedString()]
    }

    static func bearer(_ key: String) -> HTTPHeaders { ["Authorization": "Bearer \(key)"] }

    /// A tenants file in a directory of its own, removed after `body`.
    static func withFile(_ text: String, _ body: (URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-reload-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("tenants.json")
        try Data(text.utf8).write(to: file)
        try await body(file)
    }

    static func acme(_ key: String, origins: [String] = [], opsKeys: [String] = [], webhook: String? = nil) -> String {
        let originsJSON =
            origins.isEmpty ? "" : #","allowedOrigins":["# + origins.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        let webhookJSON = webhook.map { #","webhook":{"url":"\#($0)","secret":"\#(WebhookFixtures.secret)"}"# } ?? ""
        let ops = opsKeys.isEmpty ? "" : #","opsKeys":["# + opsKeys.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        return #"{"tenants":[{"name":"acme","apiKeys":["\#(key)"]\#(originsJSON)\#(webhookJSON)}]\#(ops)}"#
    }

    /// The status `GET /v1/sessions/{unknown}` answers `key`: 404 when the key is taken, 401 when not.
    static func status(_ relay: LinkRelay, key: String) async -> UInt? {
        await relay.respond(to: RelayRequest(.GET, "/v1/sessions/ses_unknown0123456789abcd", headers: bearer(key)))?
            .status.code
    }

    @Test(
        "An ops key opens /ops and nothing else; default's API keys no longer do, and the 401 page says which keys do")
    func opsKeys() async throws {
        let relay = try await TestRelay.unstarted(flags: ["ops-key": [Self.opsKey]])
        #expect(await relay.respond(to: RelayRequest(.GET, "/ops", headers: Self.basic(Self.opsKey)))?.status == .ok)
        let withAPIKey = try #require(
            await relay.respond(to: RelayRequest(.GET, "/ops", headers: Self.basic(TestRelay.apiKey))))
        #expect(withAPIKey.status == .unauthorized)
        #expect(String(buffer: withAPIKey.body).contains("ops keys"))
        #expect(await Self.status(relay, key: Self.opsKey) == 401, "an ops key reads no session")
        let create = RelayRequest(
            .POST, "/v1/sessions", headers: Self.bearer(Self.opsKey).adding("Content-Type", "application/json"),
            body: #"{"phoneNumber":"2001004014"}"#)
        #expect(await relay.respond(to: create)?.status == .unauthorized, "an ops key creates no session")
        // Without ops keys, default's API keys open it, as before, and the page says so.
        let plain = try await TestRelay.unstarted()
        let signIn = try #require(await plain.respond(to: RelayRequest(.GET, "/ops")))
        #expect(signIn.status == .unauthorized && String(buffer: signIn.body).contains("<code>default</code>"))
        #expect(
            await plain.respond(to: RelayRequest(.GET, "/ops", headers: Self.basic(TestRelay.apiKey)))?.status == .ok)
    }

    @Test("A relay configured with --tenants alone opens /ops with the file's ops key")
    func tenantsAlone() async throws {
        try await Self.withFile(Self.acme(Self.acmeKey, opsKeys: [Self.opsKey])) { file in
            let relay = try await TestRelay.unstarted(flags: ["api-key": [], "tenants": [file.path]])
            #expect(relay.configuration.tenants.map(\.name) == ["acme"])
            #expect(
                await relay.respond(to: RelayRequest(.GET, "/ops", headers: Self.basic(Self.opsKey)))?.status == .ok)
            #expect(
                await relay.respond(to: RelayRequest(.GET, "/ops", headers: Self.basic(Self.acmeKey)))?.status
                    == .unauthorized)
        }
    }

    @Test("A reload applies keys, ops keys and origins to the next request, and names what changed")
    func reloadApplies() async throws {
        try await Self.withFile(Self.acme(Self.acmeKey)) { file in
            let logs = LogCapture()
            let relay = try await TestRelay.unstarted(flags: ["tenants": [file.path]], logs: logs)
            #expect(await Self.status(relay, key: Self.acmeKey) == 404)
            #expect(await Self.status(relay, key: Self.acmeKeyNew) == 401)
            let page = "https://shop.acme.example"
            let preflight = RelayRequest(
                .OPTIONS, "/v1/sessions/ses_x/poll", headers: ["Origin": page, "Access-Control-Request-Method": "GET"])
            #expect(await relay.respond(to: preflight)?.status == .forbidden)

            try Data(
                (#"{"tenants":[{"name":"acme","apiKeys":["\#(Self.acmeKeyNew)"],"allowedOrigins":["\#(page)"]},"#
                    + #"{"name":"bank-b","apiKeys":["bank-b-key-0123456789abcdef"]}],"opsKeys":["\#(Self.opsKey)"]}"#)
                    .utf8
            ).write(to: file)
            #expect(
                relay.tenantsReload.reload() == .applied(.init(added: ["bank-b"], removed: [], changed: ["acme"])))
            #expect(await Self.status(relay, key: Self.acmeKey) == 401, "the old key is gone")
            #expect(await Self.status(relay, key: Self.acmeKeyNew) == 404)
            #expect(await Self.status(relay, key: "bank-b-key-0123456789abcdef") == 404)
            #expect(await Self.status(relay, key: TestRelay.apiKey) == 404, "the flags' keys stay")
            #expect(await relay.respond(to: preflight)?.status == .noContent)
            #expect(
                await relay.respond(to: RelayRequest(.GET, "/ops", headers: Self.basic(Self.opsKey)))?.status == .ok)
            let line = try #require(logs.all.first { $0.contains("tenants reloaded") })
            #expect(line.contains("bank-b") && line.contains("acme"))
            for key in [Self.acmeKeyNew, Self.opsKey, "bank-b-key"] { #expect(!logs.all.joined().contains(key)) }
        }
    }

    @Test(
        "A file that does not parse or validate changes nothing and is named in one line",
        arguments: [
            (
                #"{"tenants":[{"name":"acme","apiKeys":["acme-key-rotated-0123456789"]},]}"#,
                "a trailing comma at line 1"
            ),
            (#"{"tenants":[{"name":"acme","apiKeys":["                    "]}]}"#, "a key holds a space"),
            (
                #"{"tenants":[{"name":"acme","apiKeys":["acme-key-rotated-0123456789"],"webhook":{}}]}"#,
                "webhook must be"
            ),
        ])
    func refusedReload(_ text: String, _ says: String) async throws {
        try await Self.withFile(Self.acme(Self.acmeKey)) { file in
            let logs = LogCapture()
            let relay = try await TestRelay.unstarted(flags: ["tenants": [file.path]], logs: logs)
            try Data(text.utf8).write(to: file)
            guard case .refused(let fault) = relay.tenantsReload.reload() else {
                Issue.record("applied: \(text)")
                return
            }
            #expect(fault.contains(says), "\(fault)")
            #expect(await Self.status(relay, key: Self.acmeKey) == 404, "the tenants in force stay")
            #expect(await Self.status(relay, key: Self.acmeKeyNew) == 401)
            #expect(logs.all.filter { $0.contains("not applied") }.count == 1)
            #expect(!logs.all.joined().contains(Self.acmeKeyNew))
        }
    }

    @Test("Without --tenants a reload reads nothing and changes nothing")
    func noFile() async throws {
        let logs = LogCapture()
        let relay = try await TestRelay.unstarted(logs: logs)
        #expect(relay.tenantsReload.reload() == .noFile)
        #expect(await Self.status(relay, key: TestRelay.apiKey) == 404)
        #expect(logs.all.contains { $0.contains("SIGHUP ignored") })
    }

    @Test("A reload moves a tenant's webhook: the next messages go to the new receiver, signed with the new secret")
    func reloadMovesWebhook() async throws {
        let first = WebhookReceiver()
        let second = WebhookReceiver()
        try await first.serve { firstURL in
            try await second.serve { secondURL in
                try await Self.withFile(Self.acme(Self.acmeKey)) { file in
                    try await TestRelay.run(flags: ["tenants": [file.path]]) { relay in
                        let acme = [("Authorization", "Bearer \(Self.acmeKey)")]
                        // A session of acme's, cancelled: the change a message reports.
                        func cancelled() async throws -> String {
                            let create = try await relay.request(
                                .POST, "/v1/sessions", headers: acme + [("Content-Type", "application/json")],
                                body: #"{"phoneNumber":"2001004014"}"#)
                            let id = try create.json(Created.self).sessionId
                            let cancel = try await relay.request(.POST, "/v1/sessions/\(id)/cancel", headers: acme)
                            #expect(cancel.status == 200)
                            return id
                        }
                        // No webhook at start: a reload adds the first one.
                        try Data(Self.acme(Self.acmeKey, webhook: firstURL).utf8).write(to: file)
                        #expect(relay.relay.tenantsReload.reload() == .applied(.init(changed: ["acme"])))
                        let one = try await cancelled()
                        await first.waitFor(1)
                        let message = try await first.received[0].json()
                        #expect(message["type"] as? String == "session.cancelled")
                        #expect((message["data"] as? [String: Any])?["sessionId"] as? String == one)

                        try Data(Self.acme(Self.acmeKey, webhook: secondURL).utf8).write(to: file)
                        #expect(relay.relay.tenantsReload.reload() == .applied(.init(changed: ["acme"])))
                        let two = try await cancelled()
                        await second.waitFor(1)
                        let data = try await second.received[0].json()["data"] as? [String: Any]
                        #expect(data?["sessionId"] as? String == two)
                        #expect(await first.received.count == 1, "nothing more to the old receiver")
                    }
                }
            }
        }
    }
}

extension HTTPHeaders {
    fileprivate func adding(_ name: String, _ value: String) -> HTTPHeaders {
        var headers = self
        headers.add(name: name, value: value)
        return headers
    }
}

/// `kill -HUP` on a real `linkrelay` process: it never ends the relay.
@Suite("Tenants: SIGHUP on a running relay", .timeLimit(.minutes(2)))
struct ReloadSignalTests {
    @Test(
        "SIGHUP rotates a tenant's key in a running relay: the new key works, the old one is refused, the relay runs on"
    )
    func rotate() async throws {
        try await TenantsReloadTests.withFile(TenantsReloadTests.acme(TenantsReloadTests.acmeKey)) { file in
            let (relay, port) = try await PersistenceTests.start(
                ready: "LinkRelay listening", "SIGHUP reads the tenants file again"
            ) {
                ["serve", "--drain-delay", "0", "--port", String($0), "--store", "memory", "--tenants", file.path]
            }
            defer { relay.stop() }
            let path = "http://127.0.0.1:\(port)/v1/sessions/ses_unknown0123456789abcd"
            func status(_ key: String) async throws -> Int {
                try await TestRelay.fetch(.GET, path, headers: [("Authorization", "Bearer \(key)")]).status
            }
            #expect(try await status(TenantsReloadTests.acmeKey) == 404)
            // The operator adds the new key, reloads, moves the backend, removes the old key, reloads.
            try Data(
                #"{"tenants":[{"name":"acme","apiKeys":["\#(TenantsReloadTests.acmeKey)","\#(TenantsReloadTests.acmeKeyNew)"]}]}"#
                    .utf8
            ).write(to: file)
            kill(relay.process.processIdentifier, SIGHUP)
            #expect(await relay.waitFor("tenants reloaded"))
            #expect(try await status(TenantsReloadTests.acmeKeyNew) == 404)
            #expect(try await status(TenantsReloadTests.acmeKey) == 404)
            try Data(TenantsReloadTests.acme(TenantsReloadTests.acmeKeyNew).utf8).write(to: file)
            kill(relay.process.processIdentifier, SIGHUP)
            #expect(await relay.waitFor("tenants reloaded"))
            #expect(try await status(TenantsReloadTests.acmeKey) == 401)
            #expect(try await status(TenantsReloadTests.acmeKeyNew) == 404)
            // A broken file: one line, and the keys in force stay.
            try Data("{".utf8).write(to: file)
            kill(relay.process.processIdentifier, SIGHUP)
            #expect(await relay.waitFor("the tenants file is not applied"))
            #expect(try await status(TenantsReloadTests.acmeKeyNew) == 404)
            await relay.kill()
        }
    }

    @Test("Without --tenants, SIGHUP is logged and ignored: the relay answers on")
    func withoutTenants() async throws {
        let (relay, port) = try await PersistenceTests.start(
            ready: "LinkRelay listening", "SIGHUP handled", environment: ["LOG_LEVEL": "debug"]
        ) {
            ["serve", "--drain-delay", "0", "--port", String($0), "--store", "memory", "--api-key", TestRelay.apiKey]
        }
        defer { relay.stop() }
        kill(relay.process.processIdentifier, SIGHUP)
        #expect(await relay.waitFor("SIGHUP ignored"))
        #expect(try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/healthz").status == 200)
        await relay.kill()
    }
}
