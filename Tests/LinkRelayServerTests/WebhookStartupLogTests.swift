import Foundation
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// Start-up says whether webhook messages go out and where, per tenant, by scheme and host only: never
/// what a URL may carry as a credential (its user, password, path and query) or the signing secret.
@Suite("Webhooks at start-up", .timeLimit(.minutes(1)))
struct WebhookStartupLogTests {
    @Test("One info line per tenant with a webhook: scheme, host and port; never the path, query, userinfo or secret")
    func webhooksOn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-hooks-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let acmeSecret = "whsec_" + Data(repeating: 9, count: 32).base64EncodedString()
        let tenants = directory.appendingPathComponent("tenants.json")
        try Data(
            #"""
            {"tenants":[{"name":"acme","apiKeys":["acme-key-0123456789abcdef"],
              "webhook":{"url":"http://[::1]:9100/acme/hooks?sig=query-secret","secret":"\#(acmeSecret)"}},
             {"name":"quiet","apiKeys":["quiet-key-0123456789abcdef"]}]}
            """#.utf8
        ).write(to: tenants)
        // Run, not only built: the webhook sender's client is shut down when the relay stops.
        var captured: LogCapture?
        try await TestRelay.run(flags: [
            "tenants": [tenants.path],
            "webhook-url": ["https://hook-user:hook-password@hooks.example/in/linkrelay?token=query-token#part"],
            "webhook-secret": [WebhookFixtures.secret],
        ]) { relay in captured = relay.logs }
        let logs = try #require(captured)
        let lines = logs.all.filter { $0.contains("Webhooks") }
        #expect(lines.count == 2, "\(lines)")
        let byTenant = Dictionary(
            grouping: lines, by: { line in line.firstMatch(of: /"tenant": (\w+)/).map { String($0.output.1) } ?? "" })
        let primary = try #require(byTenant["default"]?.first)
        #expect(primary.hasPrefix("info Webhooks on"))
        #expect(primary.contains("https://hooks.example"), "\(primary)")
        let acme = try #require(byTenant["acme"]?.first)
        #expect(acme.hasPrefix("info Webhooks on") && acme.contains("http://[::1]:9100"), "\(acme)")
        #expect(byTenant["quiet"] == nil, "a tenant without a webhook has no line")
        for secret in [
            "hook-user", "hook-password", "query-token", "query-secret", "#part", WebhookFixtures.secret, acmeSecret,
            String(WebhookFixtures.secret.dropFirst(6)), "/in/linkrelay", "/acme/hooks", ":443",
        ] {
            #expect(!logs.all.joined().contains(secret), "\(secret) reached a log")
        }
    }

    @Test("Without a webhook anywhere, start-up says webhooks are off")
    func webhooksOff() async throws {
        var logs: LogCapture?
        try await TestRelay.run { relay in logs = relay.logs }
        let lines = try #require(logs).all.filter { $0.contains("Webhooks") }
        #expect(lines.count == 1 && lines[0].hasPrefix("info Webhooks off"), "\(lines)")
    }
}
