import Foundation
import Testing

@testable import LinkRelayServer

/// Logs are read by more people than the API: no key, token, authId or full phone number may reach them.
@Suite("Log hygiene", .timeLimit(.minutes(1)))
struct LogHygieneTests {
    @Test("A whole session at trace level logs no API key, channel token, authToken, authId or phone number")
    func noSecretsInLogs() async throws {
        try await TestRelay.run { relay in
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
}
