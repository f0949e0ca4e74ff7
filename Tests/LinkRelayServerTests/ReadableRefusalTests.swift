import Foundation
import Testing

@testable import LinkRelayServer

/// A page of an allowed origin reads why its channel or finish call was refused (the browser client's
/// `onError`): browsers hide a cross-origin answer that lacks `Access-Control-Allow-Origin`.
@Suite("Refusals a page of an allowed origin can read", .timeLimit(.minutes(1)))
struct ReadableRefusalTests {
    static let page = "https://shop.example"
    static let flags = ["allowed-origin": [page]]

    @Test(
        "No token (401), a wrong token and an unknown session (404 alike) on a channel carry the page's CORS headers",
        arguments: ["poll", "events"])
    func channelRefusals(route: String) async throws {
        try await TestRelay.run(flags: Self.flags) { relay in
            let created = try await relay.createSession()
            func channel(_ session: String, token: String) async throws -> HTTPAnswer {
                let wait = route == "poll" ? "&timeout=0" : ""
                return try await relay.request(
                    .GET, "/v1/sessions/\(session)/\(route)?token=\(token)" + wait, headers: [("Origin", Self.page)])
            }
            let wrongToken = try await channel(created.sessionId, token: "wrong")
            let unknown = try await channel("ses_unknown", token: created.channel.token)
            let tokenless = try await relay.request(
                .GET, "/v1/sessions/\(created.sessionId)/\(route)", headers: [("Origin", Self.page)])
            #expect(try tokenless.problem().code == "channel_token_required")
            // A wrong token is answered as an unknown id: the same 404, headers and body.
            #expect(wrongToken.body == unknown.body)
            #expect(wrongToken.headers.map(\.0).sorted() == unknown.headers.map(\.0).sorted())
            for (answer, status) in [(wrongToken, 404), (unknown, 404), (tokenless, 401)] {
                #expect(answer.status == status)
                #expect(answer.header("Content-Type") == "application/problem+json")
                #expect(answer.header("Access-Control-Allow-Origin") == Self.page)
                #expect(answer.header("Vary") == "Origin")
            }
        }
    }

    @Test("The finish hook's 401 and 404 (a wrong token's too) carry the page's CORS headers")
    func finishRefusals() async throws {
        try await TestRelay.run(flags: Self.flags) { relay in
            let created = try await relay.createSession()
            let origin = ("Origin", Self.page)
            let missing = try await relay.request(.POST, "/v1/sessions/\(created.sessionId)/finish", headers: [origin])
            let wrong = try await relay.request(
                .POST, "/v1/sessions/\(created.sessionId)/finish", headers: [origin, ("Authorization", "Bearer wrong")])
            let unknown = try await relay.request(
                .POST, "/v1/sessions/ses_unknown/finish",
                headers: [origin, ("Authorization", "Bearer \(created.channel.token)")])
            for (answer, status) in [(missing, 401), (wrong, 404), (unknown, 404)] {
                #expect(answer.status == status)
                #expect(answer.header("Access-Control-Allow-Origin") == Self.page)
            }
            #expect(try await relay.session(created.sessionId).state == "waiting", "a refusal changes nothing")
        }
    }

    @Test("A refused origin reads its 403 (so the browser client stops), which tells nothing of the session")
    func foreignOrigin() async throws {
        try await TestRelay.run(flags: Self.flags) { relay in
            let created = try await relay.createSession()
            let token = created.channel.token
            let evil = ("Origin", "https://evil.example")
            for answer in [
                try await relay.request(
                    .GET, "/v1/sessions/\(created.sessionId)/poll?timeout=0&token=\(token)", headers: [evil]),
                try await relay.request(.GET, "/v1/sessions/ses_unknown/poll?timeout=0&token=wrong", headers: [evil]),
                try await relay.request(
                    .POST, "/v1/sessions/\(created.sessionId)/finish",
                    headers: [evil, ("Authorization", "Bearer \(token)")]),
            ] {
                #expect(answer.status == 403)
                #expect(answer.header("Access-Control-Allow-Origin") == "*")
                #expect(answer.header("Access-Control-Allow-Credentials") == nil)
                #expect(answer.body.contains("This origin may not open channels."))
                #expect(!answer.body.contains(created.sessionId) && !answer.body.contains("\"seq\""))
            }
            #expect(try await relay.session(created.sessionId).state == "waiting", "a refusal changes nothing")
        }
    }

    @Test("Another tenant's origin gets its 403 with exactly one Access-Control-Allow-Origin, so a browser reads it")
    func anotherTenantsOrigin() async throws {
        let acmePage = "https://acme.example"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lr-cors-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tenants = directory.appendingPathComponent("tenants.json")
        try Data(
            #"{"tenants":[{"name":"acme","apiKeys":["acme-key-0123456789abcdef"],"allowedOrigins":["\#(acmePage)"]}]}"#
                .utf8
        ).write(to: tenants)
        try await TestRelay.run(socket: true, flags: Self.flags.merging(["tenants": [tenants.path]]) { $1 }) { relay in
            // default's session, opened from acme's page.
            let created = try await relay.createSession()
            let token = created.channel.token
            for answer in [
                try await relay.request(
                    .GET, "/v1/sessions/\(created.sessionId)/poll?timeout=0&token=\(token)",
                    headers: [("Origin", acmePage)]),
                try await relay.request(
                    .GET, "/v1/sessions/\(created.sessionId)/events?token=\(token)", headers: [("Origin", acmePage)]),
                try await relay.request(
                    .POST, "/v1/sessions/\(created.sessionId)/finish",
                    headers: [("Origin", acmePage), ("Authorization", "Bearer \(token)")]),
            ] {
                #expect(answer.status == 403)
                let allowOrigin = answer.headers.filter { $0.0.lowercased() == "access-control-allow-origin" }
                #expect(allowOrigin.map(\.1) == ["*"], "\(answer.headers)")
                #expect(try answer.problem().code == "origin_not_allowed")
            }
        }
    }
}
