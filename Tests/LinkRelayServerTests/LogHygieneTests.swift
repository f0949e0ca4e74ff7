import Foundation
import Testing

@testable import LinkRelayServer

/// Logs are read by more people than the API: no key, token, authId or full phone number may reach them.
@Suite("Log hygiene", .timeLimit(.minutes(1)))
struct LogHygieneTests {
    @Test("A whole session at trace level logs no API key, channel token, authToken, authId or phone number")
    func noSecretsInLogs() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession(extra: #","clientRequestId":"req-1""#)
            let socket = ChannelClient.webSocket(created.channel.websocket + "?token=\(created.channel.token)")
            var iterator = socket.makeAsyncIterator()
            _ = try await iterator.next()
            let (_, landingURL) = try await relay.tap()
            while try await iterator.next() != nil {}
            _ = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)")
            _ = try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001009999"}"#)
            _ = try await relay.request(.GET, "/v1/sessions/\(created.sessionId)/poll?token=wrong-token-value")

            let authId = try #require(landingURL.split(separator: "authId=").last.map(String.init))
            let logs = relay.logs.all.joined(separator: "\n")
            #expect(!logs.isEmpty)
            let secrets = [
                ("API key", TestRelay.apiKey), ("channel token", created.channel.token),
                ("authToken", created.authToken ?? "-"), ("authId", authId), ("phone number", "2001004014"),
                ("phone number", "2001009999"), ("link key", String(created.finalTargetUrl.suffix(32))),
            ]
            for (name, secret) in secrets {
                #expect(!logs.contains(secret), "the logs contain the \(name)")
            }
        }
    }

    @Test("The finish hook, a resend and a bind at trace level log no token, authId or phone number")
    func newPathsLogNoSecrets() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let redirect = try #require(try await relay.request(.GET, try await relay.latestLink()).header("Location"))
            _ = try await relay.request(
                .POST, "/v1/sessions/\(created.sessionId)/finish",
                headers: [("Authorization", "Bearer \(created.channel.token)"), ("Content-Type", "application/json")],
                body: #"{"redirectUrl":"\#(redirect)"}"#)
            _ = try await relay.pollUntilDone(created)
            _ = try await relay.request(.POST, "/sandbox/resend?phoneNumber=2001004014")
            let none = try await relay.api(
                .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004015","possessionType":"none"}"#
            ).json(Created.self)
            _ = try await relay.pollUntilDone(none)
            _ = try await relay.api(.POST, "/v1/sessions/\(none.sessionId)/bind")

            let authId = try #require(redirect.split(separator: "authId=").last.map(String.init))
            let logs = relay.logs.all.joined(separator: "\n")
            for (name, secret) in [
                ("channel token", created.channel.token), ("authId", authId), ("phone number", "2001004014"),
                ("phone number", "2001004015"), ("API key", TestRelay.apiKey),
            ] {
                #expect(!logs.contains(secret), "the logs contain the \(name)")
            }
        }
    }

    @Test(
        "A whole Pre-Fill flow at trace level, with webhooks and the erasure, logs no identity: no name, date of birth, SSN, address or phone"
    )
    func prefillLogsNoIdentity() async throws {
        // Webhooks to a port nothing listens on: every attempt fails, and the breaker's lines are logged too.
        let flags = [
            "identity-retention": ["0"], "webhook-url": ["http://127.0.0.1:9/hook"],
            "webhook-secret": [WebhookFixtures.secret],
        ]
        try await TestRelay.run(flags: flags) { relay in
            let phone = PrefillSessionTests.marcia
            let created = try await PrefillSessionTests.create(relay, #","dob":"1982-07-19""#)
            _ = try await relay.tap(phone: phone)
            _ = try await relay.pollUntilDone(created)
            let challenge = try await PrefillSessionTests.step(
                relay, created.sessionId, "challenge", #"{"ssn":"470806227"}"#)
            let person = try #require(try challenge.json(PrefillSessionTests.Step.self).individual)
            let confirmed = String(decoding: try JSONEncoder().encode(["individual": person]), as: UTF8.self)
            #expect(try await PrefillSessionTests.step(relay, created.sessionId, "complete", confirmed).status == 200)
            let erased = try await relay.api(.GET, "/v1/sessions/\(created.sessionId)").body
            #expect(erased.contains("individualErasedAt"), "--identity-retention 0: erased at the complete step")
            // Refusals too: a bad body, and a step out of order.
            _ = try await PrefillSessionTests.step(relay, created.sessionId, "challenge", #"{"ssn":"470806227x"}"#)
            _ = try await PrefillSessionTests.step(relay, created.sessionId, "challenge", #"{"ssn":"470806227"}"#)

            let logs = relay.logs.all.joined(separator: "\n")
            #expect(logs.contains("Pre-Fill step taken"), "the flow was logged, at trace level")
            for secret in PrefillSessionTests.identity + ["mallard", "70165"] {
                #expect(!logs.localizedCaseInsensitiveContains(secret), "the logs contain \(secret)")
            }
        }
    }
}
