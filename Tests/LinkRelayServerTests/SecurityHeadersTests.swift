import Foundation
import Testing

/// Headers and absolute URLs: HSTS when the public URL is https, the landing headers on every page,
/// no third-party resources, and nothing taken from `Host`.
@Suite("Security headers", .timeLimit(.minutes(1)))
struct SecurityHeadersTests {
    static let https: [String: [String]] = ["public-url": ["https://relay.example"], "confirm-on-phone": ["on"]]

    @Test("With an https public URL every answer carries HSTS: pages, landings, errors and the API")
    func strictTransportSecurity() async throws {
        try await TestRelay.run(flags: Self.https) { relay in
            let created = try await relay.createSession()
            let landing = try #require(URLComponents(string: created.finalTargetUrl)).path
            let answers = [
                try await relay.request(.GET, landing + "?asc=true&authId=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"),
                try await relay.request(.GET, landing + "?asc=maybe"),
                try await relay.request(.GET, "/"),
                try await relay.request(.GET, "/healthz"),
                try await relay.api(.GET, "/v1/sessions/\(created.sessionId)"),
                try await relay.api(.GET, "/v1/sessions/ses_unknown"),
            ]
            for answer in answers {
                #expect(answer.header("Strict-Transport-Security") == "max-age=63072000; includeSubDomains")
                #expect(answer.header("X-Content-Type-Options") == "nosniff")
            }
        }
    }

    @Test("Without https there is no HSTS (a browser would pin it for the host)")
    func noHSTSOnHTTP() async throws {
        try await TestRelay.run { relay async throws in
            #expect(try await relay.request(.GET, "/healthz").header("Strict-Transport-Security") == nil)
        }
    }

    @Test("The confirm page has the landing headers and loads nothing from elsewhere")
    func confirmPageHeaders() async throws {
        try await TestRelay.run(flags: Self.https) { relay in
            let created = try await relay.createSession()
            let landing = try #require(URLComponents(string: created.finalTargetUrl)).path
            let page = try await relay.request(
                .GET, landing + "?asc=true&authId=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
            #expect(page.body.contains("Is this you?"))
            #expect(page.header("Content-Type") == "text/html; charset=utf-8")
            #expect(page.header("Cache-Control") == "no-store")
            #expect(page.header("Referrer-Policy") == "no-referrer")
            let policy = try #require(page.header("Content-Security-Policy"))
            for directive in ["default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"] {
                #expect(policy.contains(directive))
            }
            #expect(!page.body.contains("//"), "every URL on the page is relative to the relay")
        }
    }

    @Test("A spoofed Host header changes no URL the relay hands out")
    func hostIsNeverUsed() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.api(
                .POST, "/v1/sessions", body: "{\"phoneNumber\":\"2001004014\"}",
                headers: [("Host", "evil.example")])
            #expect(answer.status == 201)
            let created = try answer.json(Created.self)
            let publicURL = relay.relay.configuration.publicURL
            for url in [created.finalTargetUrl, created.channel.events, created.channel.poll] {
                #expect(url.hasPrefix(publicURL + "/"))
            }
            #expect(created.channel.websocket.hasPrefix("ws://127.0.0.1:"))
            #expect(try await relay.latestLink().hasPrefix(publicURL + "/"))
        }
    }
}
