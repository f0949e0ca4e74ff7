import Foundation
import LinkRelayTestSupport
import NevisAPI
import Testing

/// What the clients log at trace level: the endpoints and the statuses, and no secret or customer text.
@Suite(.timeLimit(.minutes(1))) struct NevisClientLogTests {
    static let secrets = [
        Fixture.accessKey, Fixture.fidoToken, Fixture.statusToken, Fixture.sessionId, Fixture.dispatchToken,
        Fixture.link, Fixture.appLinkUri, Fixture.qrDataURI, Fixture.message, Fixture.base64URL(Fixture.message),
        "LINK-SECRET", "APPLINK-SECRET", "ACME",
    ]

    @Test func noLogLineCarriesASecret() async throws {
        let capture = LogCapture()
        let logger = capture.logger(level: .trace)
        let approval = NevisApproval(username: "alice", message: Fixture.message, channel: .app)
        let server = ScriptedNevis([
            // Auth Cloud: a refusal that echoes the token, a retried status, then the happy path.
            .respond(status: 400, body: #"{"message":"bad statusToken \#(Fixture.statusToken)"}"#),
            .respond(status: 502),
        ])
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let authCloud = try authCloudClient(baseURL, http, logger: logger, drawQR: QRDrawRecorder().draw)
                do {
                    _ = try await authCloud.status(Fixture.statusToken, deadline: patientDeadline())
                    Issue.record("expected a rejection")
                } catch let error as NevisClientError {
                    #expect(!"\(error)".contains(Fixture.statusToken))
                }
                _ = try await authCloud.status(Fixture.statusToken, deadline: patientDeadline())
                _ = try await authCloud.start(approval, deadline: patientDeadline())
                _ = try await authCloud.status(Fixture.statusToken, deadline: patientDeadline())

                let fido = try fidoClient(baseURL, http, logger: logger, drawQR: QRDrawRecorder().draw)
                _ = try await fido.start(approval, deadline: patientDeadline())
                _ = try await fido.status(Fixture.sessionId, deadline: patientDeadline())
            }
        }
        let lines = capture.all
        #expect(lines.count >= 6)
        for endpoint in ["approval", "status", "dispatch", "fido-status"] {
            #expect(lines.contains { $0.contains("nevis.endpoint") && $0.contains(endpoint) }, "\(endpoint)")
        }
        #expect(lines.contains { $0.contains("nevis.status") && $0.contains("400") })
        #expect(lines.contains { $0.contains("provider.attempt") })
        for line in lines {
            for secret in Self.secrets {
                #expect(!line.contains(secret), "a log line carries \(secret.prefix(12))…: \(line)")
            }
        }
    }
}
