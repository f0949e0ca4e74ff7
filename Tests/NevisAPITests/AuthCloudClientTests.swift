import Foundation
import LinkRelayTestSupport
import NevisAPI
import ProveAPI
import Testing

/// `AuthCloudClient` against a scripted Authentication Cloud on a real socket.
@Suite(.timeLimit(.minutes(1))) struct AuthCloudClientTests {
    @Test func theApprovalCarriesTheAccessKeyAndTheApprovalsFields() async throws {
        let server = ScriptedNevis()
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http).start(
                    NevisApproval(username: "alice", message: Fixture.message, channel: .app),
                    deadline: patientDeadline())
            }
        }
        let requests = await server.requests
        #expect(requests.map(\.path) == ["/api/v1/approval"])
        let request = try #require(requests.first)
        #expect(request.headers["Authorization"] == ["Bearer \(Fixture.accessKey)"])
        #expect(request.headers.first(name: "Content-Type") == "application/json")
        #expect(request.headers.first(name: "Accept") == "application/json")
        let body = try request.decode(AuthCloudApprovalRequest.self)
        #expect(body.channel == "app")
        #expect(body.username == "alice")
        #expect(body.prompt == true)
        // Plain text, as the customer typed it: not escaped, not wrapped in <html>.
        #expect(body.message == Fixture.message)
        #expect(!request.body.contains("&lt;") && !request.body.contains("\\u003c"))
        #expect(request.keys == ["channel", "username", "prompt", "message"])

        #expect(
            started
                == NevisStarted(
                    handle: Fixture.statusToken, transactionId: "tx-1", qrCode: Fixture.qrDataURI,
                    appLink: Fixture.appLinkUri))
    }

    @Test func usernamelessSendsNoUserAndNoAuthenticator() async throws {
        let server = ScriptedNevis()
        _ = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http).start(
                    NevisApproval(channel: .app), deadline: patientDeadline())
            }
        }
        let request = try #require(await server.requests.first)
        #expect(request.keys == ["channel"])
        #expect(try request.decode(AuthCloudApprovalRequest.self).channel == "app")
    }

    @Test func aPushByUserIdWithoutMessageAsksNoPrompt() async throws {
        let server = ScriptedNevis()
        _ = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http).start(
                    NevisApproval(userId: "6f1c-uuid", channel: .push), deadline: patientDeadline())
            }
        }
        let request = try #require(await server.requests.first)
        #expect(request.keys == ["channel", "userId"])
        let body = try request.decode(AuthCloudApprovalRequest.self)
        #expect(body.channel == "push")
        #expect(body.userId == "6f1c-uuid")
    }

    @Test func anAnswerWithALinkAndNoQRCodeGetsItsQRCodeDrawn() async throws {
        let body = #"{"transactionId":"tx-2","statusToken":"st-2","appLinkUri":"\#(Fixture.appLinkUri)"}"#
        let server = ScriptedNevis([.respond(status: 200, body: body)])
        let drawer = QRDrawRecorder()
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http, drawQR: drawer.draw).start(
                    NevisApproval(channel: .app), deadline: patientDeadline())
            }
        }
        #expect(
            started
                == NevisStarted(
                    handle: "st-2", transactionId: "tx-2", qrCode: QRDrawRecorder.drawn, appLink: Fixture.appLinkUri))
        #expect(drawer.links.value == [Fixture.appLinkUri])
    }

    @Test func theStatusSendsTheStatusTokenAndNoAuthorization() async throws {
        let server = ScriptedNevis()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http).status(Fixture.statusToken, deadline: patientDeadline())
            }
        }
        let request = try #require(await server.requests.first)
        #expect(request.path == "/api/v1/status")
        #expect(request.headers["Authorization"].isEmpty)
        #expect(request.headers.first(name: "Content-Type") == "application/json")
        #expect(try request.decode(AuthCloudStatusRequest.self) == .init(statusToken: Fixture.statusToken))
        #expect(request.keys == ["statusToken"])
        #expect(status == NevisStatus(progress: .pending, status: "pending", transactionId: "tx-1"))
    }

    @Test func aStatus500IsRetriedAndThenSucceeds() async throws {
        let server = ScriptedNevis([
            .respond(status: 500, body: #"{"message":"oops"}"#),
            .respond(
                status: 200, body: #"{"transactionId":"tx-1","status":"succeeded","userId":"u-1","username":"alice"}"#),
        ])
        let sleeper = SleepRecorder()
        let observer = ObserverRecorder()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http, sleeper: sleeper, observer: observer)
                    .status(Fixture.statusToken, deadline: patientDeadline())
            }
        }
        #expect(
            status
                == NevisStatus(
                    progress: .succeeded, status: "succeeded", transactionId: "tx-1", userId: "u-1", username: "alice"))
        #expect(await server.requests.count == 2)
        #expect(sleeper.sleeps.value.count == 1)
        #expect(observer.calls.value == ["status 500", "status 200"])
    }

    @Test func anApproval500IsNotRetried() async throws {
        // Nevis may have started the operation (and sent a push): a second approval would be a second one.
        let server = ScriptedNevis([.respond(status: 500, body: #"{"message":"oops"}"#)])
        let sleeper = SleepRecorder()
        let observer = ObserverRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try authCloudClient(baseURL, http, sleeper: sleeper, observer: observer)
                await #expect(throws: NevisClientError.unavailable(reason: "HTTP 500")) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
            }
        }
        #expect(await server.requests.count == 1)
        #expect(sleeper.sleeps.value.isEmpty)
        #expect(observer.calls.value == ["approval 500"])
    }

    @Test func a400IsRejectedWithItsDetailAndNeverEchoesTheToken() async throws {
        let server = ScriptedNevis([
            .respond(status: 400, body: #"{"error":"Bad Request","message":"unsupported tag <p> in message"}"#),
            .respond(status: 400, body: #"{"message":"statusToken \#(Fixture.statusToken) is malformed"}"#),
            .respond(status: 404, body: "<html>not here</html>"),
        ])
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try authCloudClient(baseURL, http)
                await #expect(
                    throws: NevisClientError.rejected(status: 400, detail: "unsupported tag <p> in message")
                ) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
                await #expect(
                    throws: NevisClientError.rejected(status: 400, detail: "statusToken [redacted] is malformed")
                ) {
                    try await client.status(Fixture.statusToken, deadline: patientDeadline())
                }
                await #expect(throws: NevisClientError.rejected(status: 404, detail: nil)) {
                    try await client.status(Fixture.statusToken, deadline: patientDeadline())
                }
            }
        }
        #expect(await server.requests.count == 3, "no 4xx is retried")
    }

    @Test func aLongDetailIsCutTo200Characters() async throws {
        let long = String(repeating: "too long ", count: 60)
        let server = ScriptedNevis([.respond(status: 422, body: #"{"title":"\#(long)"}"#)])
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try authCloudClient(baseURL, http)
                do {
                    _ = try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                    Issue.record("expected a rejection")
                } catch NevisClientError.rejected(let status, let detail) {
                    #expect(status == 422)
                    let detail = try #require(detail)
                    #expect(detail.count <= 200)
                    #expect(detail.hasPrefix("too long too long"))
                }
            }
        }
    }

    @Test func a429HonoursRetryAfterEvenForTheApproval() async throws {
        // A 429 was not processed: the approval is retried, no sooner than Nevis asked.
        let server = ScriptedNevis([.respond(status: 429, retryAfter: "1", body: #"{"message":"slow down"}"#)])
        let sleeper = SleepRecorder()
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await authCloudClient(baseURL, http, sleeper: sleeper)
                    .start(NevisApproval(username: "alice"), deadline: patientDeadline())
            }
        }
        #expect(started.handle == Fixture.statusToken)
        #expect(await server.requests.map(\.path) == ["/api/v1/approval", "/api/v1/approval"])
        let sleeps = sleeper.sleeps.value
        #expect(sleeps.count == 1)
        #expect(sleeps.allSatisfy { $0 >= .seconds(1) })
    }

    @Test func anUndecodableAnswerIsUnavailable() async throws {
        let server = ScriptedNevis([
            .respond(status: 200, body: "<html>maintenance</html>"),
            .respond(status: 200, body: #"{"transactionId":"tx-1"}"#),
            .respond(status: 200, body: #"{"statusToken":""}"#),
        ])
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try authCloudClient(baseURL, http)
                await #expect(throws: NevisClientError.unavailable(reason: "undecodable status response")) {
                    try await client.status(Fixture.statusToken, deadline: patientDeadline())
                }
                await #expect(throws: NevisClientError.unavailable(reason: "undecodable approval response")) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
                await #expect(throws: NevisClientError.unavailable(reason: "approval answer without statusToken")) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
            }
        }
    }

    @Test func anOversizedAnswerIsUnavailable() async throws {
        let huge =
            #"{"status":"pending","pad":""# + String(repeating: "x", count: ProviderTransport.maxResponseBytes)
            + #""}"#
        let server = ScriptedNevis(Array(repeating: .respond(status: 200, body: huge), count: 4))
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try authCloudClient(baseURL, http)
                await #expect {
                    try await client.status(Fixture.statusToken, deadline: patientDeadline())
                } throws: { error in
                    guard case NevisClientError.unavailable = error else { return false }
                    return true
                }
            }
        }
    }

    @Test func theBaseURLMustBeHTTPSOrLoopback() async throws {
        try await withProviderHTTPClient { http in
            for good in [
                "https://acme.mauth.nevis.cloud", "https://acme.mauth.nevis.cloud/",
                "http://127.0.0.1:8090/sandbox/nevis",
                "http://localhost:8090", "http://[::1]:8090/sandbox/nevis",
            ] {
                #expect(throws: Never.self, "\(good)") {
                    _ = try AuthCloudClient(baseURL: good, accessKey: "k", httpClient: http, logger: quietLogger())
                }
            }
            for bad in [
                "http://acme.mauth.nevis.cloud", "ftp://acme.mauth.nevis.cloud", "acme.mauth.nevis.cloud",
                "https://user:pw@acme.mauth.nevis.cloud", "https://acme.mauth.nevis.cloud?x=1", "",
            ] {
                #expect(throws: NevisConfigurationError.self, "\(bad)") {
                    _ = try AuthCloudClient(baseURL: bad, accessKey: "k", httpClient: http, logger: quietLogger())
                }
            }
            #expect(throws: NevisConfigurationError.self) {
                _ = try makeNevisClient(
                    backend: .authCloud(baseURL: "https://acme.mauth.nevis.cloud"), accessKey: nil, fidoToken: nil,
                    httpClient: http, logger: quietLogger())
            }
            let authCloud = try makeNevisClient(
                backend: .authCloud(baseURL: "https://acme.mauth.nevis.cloud"), accessKey: "k", fidoToken: nil,
                httpClient: http, logger: quietLogger())
            #expect(authCloud is AuthCloudClient)
            let fido = try makeNevisClient(
                backend: .fido(baseURL: "https://fido.example", dispatcher: .link), accessKey: nil, fidoToken: nil,
                httpClient: http, logger: quietLogger())
            #expect(fido is NevisFIDOClient)
        }
    }
}
