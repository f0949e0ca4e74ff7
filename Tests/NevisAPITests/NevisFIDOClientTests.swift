import Foundation
import LinkRelayTestSupport
import NevisAPI
import ProveAPI
import Testing

/// `NevisFIDOClient` against a scripted nevisFIDO on a real socket.
@Suite(.timeLimit(.minutes(1))) struct NevisFIDOClientTests {
    static let dispatchPath = "/nevisfido/token/dispatch/authentication"

    @Test func theDispatchCarriesTheHeadersTheUsernameAndTheMessage() async throws {
        let server = ScriptedNevis()
        let drawer = QRDrawRecorder()
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http, drawQR: drawer.draw).start(
                    NevisApproval(username: "alice", message: Fixture.message, channel: .app),
                    deadline: patientDeadline())
            }
        }
        let request = try #require(await server.requests.first)
        #expect(request.path == Self.dispatchPath)
        #expect(request.headers["Accept"] == ["application/json"])
        #expect(request.headers["Content-Type"] == ["application/json;charset=UTF-8"])
        #expect(request.headers["Authorization"] == ["Bearer \(Fixture.fidoToken)"])

        let body = try request.decode(DispatchTokenRequest.self)
        #expect(body.dispatcher == "link-png-qr-code")
        #expect(body.dispatchTargetId == nil)
        #expect(body.getUafRequest.op == "Auth")
        let contextText = try #require(body.getUafRequest.context)
        let context = try JSONDecoder().decode(DispatchContext.self, from: Data(contextText.utf8))
        #expect(
            context
                == DispatchContext(
                    username: "alice",
                    transaction: [.init(contentType: "text/plain", content: Fixture.base64URL(Fixture.message))]))
        #expect(contextText.contains(#""username":"alice""#))
        #expect(contextText.contains(Fixture.base64URL(Fixture.message)))
        #expect(!contextText.contains("ACME"), "the message travels as base64url only")

        #expect(
            started == NevisStarted(handle: Fixture.sessionId, qrCode: QRDrawRecorder.drawn, appLink: Fixture.link))
        #expect(drawer.links.value == [Fixture.link])
    }

    @Test func withoutAFIDOTokenNoAuthorizationIsSent() async throws {
        let server = ScriptedNevis()
        _ = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http, fidoToken: nil).start(
                    NevisApproval(username: "alice"), deadline: patientDeadline())
            }
        }
        let request = try #require(await server.requests.first)
        #expect(request.headers["Authorization"].isEmpty)
    }

    @Test func usernamelessSendsAContextWithoutUsername() async throws {
        let server = ScriptedNevis()
        _ = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http, dispatcher: .link).start(
                    NevisApproval(channel: .app), deadline: patientDeadline())
            }
        }
        let body = try #require(try await server.requests.first?.decode(DispatchTokenRequest.self))
        #expect(body.dispatcher == "link")
        #expect(body.getUafRequest.context == "{}")
    }

    @Test func aPushGoesToFCMWithTheUserIdAsTarget() async throws {
        let server = ScriptedNevis([
            .respond(
                status: 200,
                body:
                    #"{"token":"t","sessionId":"\#(Fixture.sessionId)","dispatcherInformation":{"name":"firebase-cloud-messaging"},"dispatchResult":"dispatched"}"#
            )
        ])
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http).start(
                    NevisApproval(username: "alice", userId: "u-42", channel: .push), deadline: patientDeadline())
            }
        }
        let body = try #require(try await server.requests.first?.decode(DispatchTokenRequest.self))
        #expect(body.dispatcher == "firebase-cloud-messaging")
        #expect(body.dispatchTargetId == "u-42")
        #expect(started == NevisStarted(handle: Fixture.sessionId))
    }

    @Test func aFailedDispatchAnsweredWith200IsADispatchFailure() async throws {
        let server = ScriptedNevis([
            .respond(status: 200, body: #"{"dispatchResult":"userNotFound"}"#),
            .respond(status: 200, body: #"{"sessionId":"s-9","dispatchResult":"dispatchTargetNotFound"}"#),
        ])
        let observer = ObserverRecorder()
        let (first, second) = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try fidoClient(baseURL, http, observer: observer)
                let first = try await client.start(NevisApproval(username: "nobody"), deadline: patientDeadline())
                let second = try await client.start(
                    NevisApproval(userId: "u-1", channel: .push), deadline: patientDeadline())
                return (first, second)
            }
        }
        #expect(first == NevisStarted(handle: "", dispatchFailure: "userNotFound"))
        #expect(second == NevisStarted(handle: "s-9", dispatchFailure: "dispatchTargetNotFound"))
        #expect(observer.calls.value == ["dispatch 200", "dispatch 200"])
    }

    @Test func aDispatchedAnswerWithoutSessionIdIsUnavailable() async throws {
        let server = ScriptedNevis([.respond(status: 200, body: #"{"token":"t","dispatchResult":"dispatched"}"#)])
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try fidoClient(baseURL, http)
                await #expect(throws: NevisClientError.unavailable(reason: "dispatch answer without sessionId")) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
            }
        }
    }

    @Test func aDispatch500IsNotRetriedButA401IsRejected() async throws {
        let server = ScriptedNevis([
            .respond(status: 500),
            .respond(status: 401, body: #"{"error":"invalid SecToken"}"#),
        ])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = try fidoClient(baseURL, http, sleeper: sleeper)
                await #expect(throws: NevisClientError.unavailable(reason: "HTTP 500")) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
                await #expect(throws: NevisClientError.rejected(status: 401, detail: "invalid SecToken")) {
                    try await client.start(NevisApproval(username: "alice"), deadline: patientDeadline())
                }
            }
        }
        #expect(await server.requests.count == 2)
        #expect(sleeper.sleeps.value.isEmpty)
    }

    /// What `dispatcherInformation.response` holds, and what the desktop then gets.
    struct ResponseForm: Sendable, CustomTestStringConvertible {
        var name: String
        var response: String
        var qrCode: String?
        var appLink: String?
        var drawnFrom: [String] = []

        var testDescription: String { name }
    }

    static let responseForms: [ResponseForm] = [
        .init(
            name: "an https link", response: Fixture.link, qrCode: QRDrawRecorder.drawn, appLink: Fixture.link,
            drawnFrom: [Fixture.link]),
        .init(
            name: "a custom-scheme link", response: "nevisaccess://x?dispatchTokenResponse=abc",
            qrCode: QRDrawRecorder.drawn, appLink: "nevisaccess://x?dispatchTokenResponse=abc",
            drawnFrom: ["nevisaccess://x?dispatchTokenResponse=abc"]),
        .init(name: "a PNG data URI", response: Fixture.qrDataURI, qrCode: Fixture.qrDataURI),
        .init(name: "base64 of a PNG", response: Fixture.pngBytes.base64EncodedString(), qrCode: Fixture.qrDataURI),
        .init(
            name: "base64 of a PNG with line breaks",
            response: Fixture.pngBytes.base64EncodedString(options: .lineLength64Characters).replacingOccurrences(
                of: "AAAA", with: "AA\nAA"),
            qrCode: Fixture.qrDataURI),
        .init(
            name: "base64url of a PNG",
            response: Fixture.pngBytes.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: ""),
            qrCode: Fixture.qrDataURI),
        .init(
            name: "JSON with both", response: #"{"link":"\#(Fixture.link)","qrCode":"\#(Fixture.qrDataURI)"}"#,
            qrCode: Fixture.qrDataURI, appLink: Fixture.link),
        .init(
            name: "JSON with a link and a base64 QR code",
            response: #"{"link":"\#(Fixture.link)","qrCode":"\#(Fixture.pngBytes.base64EncodedString())"}"#,
            qrCode: Fixture.qrDataURI, appLink: Fixture.link),
        .init(
            name: "JSON with a link only", response: #"{"link":"\#(Fixture.link)"}"#, qrCode: QRDrawRecorder.drawn,
            appLink: Fixture.link, drawnFrom: [Fixture.link]),
        .init(name: "base64 of something else", response: Data("not a png".utf8).base64EncodedString()),
        .init(name: "plain text", response: "dispatched to the QR code"),
        .init(name: "empty", response: ""),
    ]

    @Test(arguments: responseForms)
    func theDispatcherResponseBecomesTheQRCodeAndTheLink(form: ResponseForm) async throws {
        let server = ScriptedNevis([.respond(status: 200, body: Fixture.dispatchBody(response: form.response))])
        let drawer = QRDrawRecorder()
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http, drawQR: drawer.draw).start(
                    NevisApproval(username: "alice"), deadline: patientDeadline())
            }
        }
        #expect(started == NevisStarted(handle: Fixture.sessionId, qrCode: form.qrCode, appLink: form.appLink))
        #expect(drawer.links.value == form.drawnFrom)
    }

    @Test func aLinkWithoutADrawerHasNoQRCode() async throws {
        let server = ScriptedNevis()
        let started = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http).start(NevisApproval(username: "alice"), deadline: patientDeadline())
            }
        }
        #expect(started == NevisStarted(handle: Fixture.sessionId, appLink: Fixture.link))
    }

    @Test func theStatusAsksBySessionId() async throws {
        let server = ScriptedNevis([
            .respond(status: 503),
            .respond(
                status: 200,
                body: #"{"status":"tokenCreated","tokenInformation":{"tokenResult":"tokenTimedOut"}}"#),
        ])
        let observer = ObserverRecorder()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await fidoClient(baseURL, http, observer: observer).status(
                    Fixture.sessionId, deadline: patientDeadline())
            }
        }
        let requests = await server.requests
        #expect(requests.map(\.path) == ["/nevisfido/status", "/nevisfido/status"])
        let request = try #require(requests.last)
        #expect(request.headers["Accept"] == ["application/json"])
        #expect(request.headers["Content-Type"] == ["application/json;charset=UTF-8"])
        #expect(request.headers["Authorization"].isEmpty, "the FIDO token is for the dispatch endpoint")
        #expect(try request.decode(FidoStatusRequest.self) == .init(sessionId: Fixture.sessionId))
        #expect(request.keys == ["sessionId"])
        #expect(status == NevisStatus(progress: .failed, status: "tokenCreated"))
        #expect(observer.calls.value == ["fido-status 503", "fido-status 200"])
    }
}
