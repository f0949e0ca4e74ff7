import Foundation
import LinkRelayServer
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import NIOCore
import ProveAPI
import Testing

@testable import ProveSandbox

@Suite(.timeLimit(.minutes(1))) struct TokenEndpointTests {
    @Test func goodCredentialsGetABearerToken() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase, tokenLifetime: 1800)
        let client = SandboxClient(sandbox)
        do {
            let response = try await client.requestToken()
            #expect(response.status == .ok)
            let body = try decode(ProveTokenResponse.self, response)
            #expect(body.accessToken.hasPrefix("eyJ"))
            #expect(body.tokenType == "Bearer")
            #expect(body.expiresIn == 1800)
        }
        #expect(await sandbox.tokensIssued == 1)
    }

    @Test func badSecretIs401() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let response = try await client.requestToken(secret: "wrong")
            #expect(response.status == .unauthorized)
            #expect(try decode(ProveErrorBody.self, response) == ProveErrorBody(code: 8002, message: "not authorized"))
            let unknownClient = try await client.requestToken(id: "someone-else")
            #expect(unknownClient.status == .unauthorized)
        }
        #expect(await sandbox.tokensIssued == 0)
    }

    @Test func apiCallsNeedAValidToken() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let body = UnifyStatusRequest(correlationId: "x")
            let missing = try await client.post("unify-status", token: nil, body: body)
            #expect(missing.status == .unauthorized)
            #expect(try decode(ProveErrorBody.self, missing).code == 8002)
            let bogus = try await client.post("unify-status", token: "eyJbogus", body: body)
            #expect(bogus.status == .unauthorized)

            let token = try await client.accessToken()
            #expect(try await client.post("unify-status", token: token, body: body).status == .badRequest)
            await sandbox.revokeAllTokens()
            let revoked = try await client.post("unify-status", token: token, body: body)
            #expect(revoked.status == .unauthorized)
        }
    }

    @Test func expiredTokensAreRejected() async throws {
        let clock = TestDateClock()
        let sandbox = ProveSandbox(publicBaseURL: publicBase, tokenLifetime: 60, now: clock.now)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let body = UnifyStatusRequest(correlationId: "x")
            #expect(try await client.post("unify-status", token: token, body: body).status == .badRequest)
            clock.advance(by: 61)
            #expect(try await client.post("unify-status", token: token, body: body).status == .unauthorized)
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct UnifyDesktopTests {
    @Test func instantLinkFlowPassesAfterTheLinkIsOpened() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase + "/")
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let unifyResponse = try await client.unifyDesktop(token: token, phone: "2001004014")
            #expect(unifyResponse.status == .ok)
            let unify = try decode(UnifyResponse.self, unifyResponse)
            #expect(unify.success == "pending")
            #expect(isUUID(unify.correlationId))
            #expect(unify.authToken?.hasPrefix("eyJ") == true)

            #expect(try await client.status(token: token, unify.correlationId).success == "pending")

            let messages = try await client.outbox("2001004014")
            try #require(messages.count == 1)
            let message = messages[0]
            #expect(message.phoneNumber == "2001004014")
            #expect(message.link.hasPrefix(publicBase + "/sandbox/link/"))
            #expect(
                message.text
                    == "Complete your verification. If you did not make this request, do not click the link. "
                    + message.link
            )
            #expect(try await client.outbox("2001004018").isEmpty)

            let opened = try await client.open(message.link)
            #expect(opened.status == .found)
            let location = try #require(opened.headers[.location])
            let (base, query) = redirectParts(location)
            #expect(base == "https://relay.example/done")
            #expect(query["asc"] == "true")
            let authId = try #require(query["authId"])
            #expect(isUUID(authId))
            #expect(location == "https://relay.example/done?asc=true&authId=\(authId)")

            let status = try await client.status(token: token, unify.correlationId)
            #expect(status.success == "true")
            #expect(status.phoneNumber == "2001004014")
            #expect(status.clientRequestId == "req-1")
            #expect(status.deviceId == nil)
            #expect(status.clientHumanId != nil)
            let proveId = try #require(status.proveId)
            #expect(isUUID(proveId))
            #expect(status.evaluation?["authentication"]?.result == "pass")
            #expect(status.evaluation?["risk"]?.result == "pass")

            // The same authId when the link is opened again; the proveId is stable per test user.
            let again = try await client.open(message.link)
            #expect(again.headers[.location] == location)
            let second = try decode(
                UnifyResponse.self,
                try await client.unifyDesktop(token: token, phone: "2001004014")
            )
            let secondLink = try await client.outbox("2001004014")[1].link
            _ = try await client.open(secondLink)
            #expect(try await client.status(token: token, second.correlationId).proveId == proveId)
        }
        #expect(await sandbox.callCount("link") == 3)
    }

    @Test func finalTargetUrlWithAQueryGetsAnAmpersand() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            _ = try await client.unifyDesktop(token: token, phone: "2001004015", target: "https://relay.example/f?x=1")
            let link = try await client.outbox("2001004015")[0].link
            let location = try #require(try await client.open(link).headers[.location])
            #expect(location.hasPrefix("https://relay.example/f?x=1&asc=true&authId="))
        }
    }

    @Test func declinedLinkFailsTheFlow() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let unify = try decode(UnifyResponse.self, try await client.unifyDesktop(token: token, phone: "2001004014"))
            let link = try await client.outbox("2001004014")[0].link
            let declined = try await client.open(link, decline: true)
            #expect(declined.status == .found)
            let (_, query) = redirectParts(try #require(declined.headers[.location]))
            #expect(query["asc"] == "false")
            #expect(isUUID(query["authId"] ?? ""))

            let status = try await client.status(token: token, unify.correlationId)
            #expect(status.success == "false")
            #expect(status.proveId == nil)
            #expect(status.evaluation?["authentication"]?.result == "fail")
            #expect(status.evaluation?["authentication"]?.failureReasons == ["9100": "Phone possession incomplete."])

            // A later tap does not turn a declined flow into a pass.
            let (_, later) = redirectParts(try #require(try await client.open(link).headers[.location]))
            #expect(later["asc"] == "false")
            #expect(try await client.status(token: token, unify.correlationId).success == "false")
        }
    }

    @Test func shortTermUsersPassWithoutATap() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            for phone in ["2001004018", "+2001004029", "+12001004018"] {
                let unify = try decode(UnifyResponse.self, try await client.unifyDesktop(token: token, phone: phone))
                #expect(unify.success == "pending")
                let status = try await client.status(token: token, unify.correlationId)
                #expect(status.success == "true")
                #expect(status.phoneNumber == phone)
                #expect(status.proveId != nil)
            }
        }
        #expect(await sandbox.outbox(phoneNumber: nil).isEmpty)
    }

    @Test func internationalNumbersCanBeLookedUpInTheOutbox() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            #expect(try await client.unifyDesktop(token: token, phone: "+2001004025").status == .ok)
            #expect(try await client.outbox("%2B2001004025").count == 1)
            #expect(try await client.outbox("+2001004025").count == 1)
            #expect(try await client.outbox("2001004025").isEmpty)
            let all = try await client.execute(uri: "/sandbox/outbox", method: .get)
            #expect(try decode(SandboxOutbox.self, all).messages.count == 1)
        }
    }

    @Test func customSmsMessageReplacesTheDefaultText() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            _ = try await client.unifyDesktop(token: token, phone: "2001004014", smsMessage: "Tap #### to continue")
            let message = try await client.outbox("2001004014")[0]
            #expect(message.text == "Tap \(message.link) to continue")
        }
    }

    @Test func unknownNumberIsRejectedWith8007() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let response = try await client.unifyDesktop(token: token, phone: "5551234567")
            #expect(response.status == .badRequest)
            #expect(
                try decode(ProveErrorBody.self, response)
                    == ProveErrorBody(code: 8007, message: "no test user found matching the phone number")
            )
        }
        #expect(await sandbox.outbox(phoneNumber: nil).isEmpty)
    }

    @Test(arguments: [
        "https://relay.example/done?a=1&b=2",  // '&' is not allowed
        "https://relay.example/done#frag",
        "https://relay.example/" + String(repeating: "a", count: 110),  // > 128 characters
        "",
    ])
    func badFinalTargetUrlIs8001(_ target: String) async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let response = try await client.unifyDesktop(token: token, phone: "2001004014", target: target)
            #expect(response.status == .badRequest)
            let error = try decode(ProveErrorBody.self, response)
            #expect(error.code == 8001)
            #expect(error.message.contains("finalTargetUrl"))
        }
    }

    @Test func malformedRequestsAre8001NamingTheParameter() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            func error(_ json: String) async throws -> ProveErrorBody {
                let response = try await client.post("unify", token: token, json: json)
                #expect(response.status == .badRequest)
                return try decode(ProveErrorBody.self, response)
            }
            let noRequestId = try await error(#"{"possessionType":"desktop","phoneNumber":"2001004014"}"#)
            #expect(noRequestId.code == 8001)
            #expect(noRequestId.message.contains("clientRequestId"))
            let noTarget = try await error(
                #"{"possessionType":"desktop","phoneNumber":"2001004014","clientRequestId":"r"}"#
            )
            #expect(noTarget.message.contains("finalTargetUrl"))
            let badPhone = try await error(
                #"{"possessionType":"desktop","phoneNumber":"200-100-4014","clientRequestId":"r","#
                    + #""finalTargetUrl":"https://a.b"}"#
            )
            #expect(badPhone.message.contains("phoneNumber"))
            let badType = try await error(#"{"possessionType":"carrier-pigeon","clientRequestId":"r"}"#)
            #expect(badType.message.contains("possessionType"))
            #expect(try await error("{not json").code == 8001)
            let huge =
                #"{"possessionType":"none","clientRequestId":"r","phoneNumber":"2001004014","clientCustomerId":""#
                + String(repeating: "x", count: 4096) + #""}"#
            #expect(try await error(huge).code == 8001)
        }
    }

    @Test func sessionsExpireAfterFifteenMinutes() async throws {
        let clock = TestDateClock()
        let sandbox = ProveSandbox(publicBaseURL: publicBase, tokenLifetime: 7200, now: clock.now)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let unify = try decode(UnifyResponse.self, try await client.unifyDesktop(token: token, phone: "2001004014"))
            let link = try await client.outbox("2001004014")[0].link
            clock.advance(by: 15 * 60 + 1)
            let response = try await client.post(
                "unify-status",
                token: token,
                body: UnifyStatusRequest(correlationId: unify.correlationId)
            )
            #expect(response.status == .badRequest)
            #expect(try decode(ProveErrorBody.self, response).code == 8008)
            #expect(try await client.open(link).status == .notFound)
        }
    }

    @Test func unknownCorrelationIdAndLinkAreRejected() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let response = try await client.post(
                "unify-status",
                token: token,
                body: UnifyStatusRequest(correlationId: UUID().uuidString)
            )
            #expect(response.status == .badRequest)
            #expect(try decode(ProveErrorBody.self, response).code == 8008)
            let page = try await client.execute(uri: "/sandbox/link/nope", method: .get)
            #expect(page.status == .notFound)
            #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
        }
    }
}

/// Prove refuses a request body of 4 KB or more with its own error shape (prove-api.md §2 and its error
/// codes: 400, code 8001), and a client replaying Prove's answers expects it: so does the sandbox.
@Suite(.timeLimit(.minutes(1))) struct BodySizeTests {
    /// A valid `/v3/unify` body, then spaces (valid JSON still) up to `size` bytes.
    static func unifyBody(size: Int) -> String {
        let json =
            #"{"possessionType":"desktop","clientRequestId":"req-1","phoneNumber":"2001004014","#
            + #""finalTargetUrl":"https://relay.example/done"}"#
        return json + String(repeating: " ", count: size - json.utf8.count)
    }

    /// The token request's form, padded with a field Prove ignores up to `size` bytes.
    static func tokenForm(size: Int) -> String {
        let form =
            "client_id=\(ProveSandbox.clientID)&client_secret=\(ProveSandbox.clientSecret)&grant_type=client_credentials"
        return form + "&pad=" + String(repeating: "x", count: size - form.utf8.count - 5)
    }

    static func expect8001(_ response: TestResponse, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(response.status == .badRequest, sourceLocation: sourceLocation)
        #expect(response.headers[.contentType]?.hasPrefix("application/json") == true, sourceLocation: sourceLocation)
        #expect(try decode(ProveErrorBody.self, response).code == 8001, sourceLocation: sourceLocation)
    }

    /// Under 4 KB is taken; 4 KB and more is 8001, on the API and on the token endpoint.
    static func check(_ client: some SandboxTestClient) async throws {
        let token = try await client.accessToken()
        #expect(try await client.post("unify", token: token, json: unifyBody(size: 4095)).status == .ok)
        for size in [4096, 5000, 60_000] {
            try expect8001(try await client.post("unify", token: token, json: unifyBody(size: size)))
            try expect8001(
                try await client.execute(
                    uri: "/token", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                    body: ByteBuffer(string: tokenForm(size: size))))
        }
        #expect(
            try await client.execute(
                uri: "/token", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(string: tokenForm(size: 4095))
            ).status == .ok)
    }

    @Test func bodiesOf4KBOrMoreGetProvesError() async throws {
        try await Self.check(SandboxClient(ProveSandbox(publicBaseURL: publicBase)))
    }

    @Test func overASocketTheFrontDoorLetsTheSandboxAnswer() async throws {
        let server = SandboxServer(
            sandbox: ProveSandbox(publicBaseURL: publicBase), host: "127.0.0.1", port: 0,
            logger: StandaloneSandboxTests.quietLogger)
        try await server.serving { port in
            let client = LiveSandboxClient(port: port)
            try await Self.check(client)
            // Past what the front door reads for the sandbox, it refuses the body itself.
            let huge = try await client.post(
                "unify", token: try await client.accessToken(),
                json: Self.unifyBody(size: ProveSandbox.maxReadBytes + 1))
            #expect(huge.status == .payloadTooLarge)
        }
    }
}

/// `linkrelay sandbox`: the same routes, served over TCP by the relay's front door.
@Suite(.timeLimit(.minutes(1))) struct StandaloneSandboxTests {
    static let quietLogger = LinkRelayTestSupport.quietLogger("sandbox")

    @Test func standaloneServerServesTheSameRoutes() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let server = SandboxServer(sandbox: sandbox, host: "127.0.0.1", port: 0, logger: Self.quietLogger)
        try await server.serving { port in
            let client = LiveSandboxClient(port: port)
            let token = try await client.accessToken()
            #expect(try await client.unifyDesktop(token: token, phone: "2001004014").status == .ok)
            #expect(try await client.outbox("2001004014").count == 1)
            // Only the sandbox's routes: any other path is a 404.
            #expect(try await client.execute(uri: "/v1/sessions", method: .post).status == .notFound)
        }
        // Without --public-url, links are built on the listen address.
        #expect(ProveSandbox.localBaseURL(host: "127.0.0.1", port: 8090) == "http://127.0.0.1:8090")
        #expect(ProveSandbox.localBaseURL(host: "::1", port: 8090) == "http://[::1]:8090")
        let standalone = SandboxServer(
            sandbox: ProveSandbox(publicBaseURL: ProveSandbox.localBaseURL(host: "127.0.0.1", port: 0)),
            host: "127.0.0.1", port: 0, logger: Self.quietLogger)
        try await standalone.serving { port in
            let response = try await LiveSandboxClient(port: port).requestToken()
            #expect(response.status == .ok)
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct CustomerSuppliedPossessionTests {
    @Test func possessionRequiredUntilBind() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let request = UnifyRequest(possessionType: "none", clientRequestId: "r-9", phoneNumber: "2001004014")
            let unify = try decode(UnifyResponse.self, try await client.post("unify", token: token, body: request))
            #expect(try await client.status(token: token, unify.correlationId).success == "possession_required")

            let wrong = try await client.post(
                "unify-bind",
                token: token,
                body: UnifyBindRequest(correlationId: unify.correlationId, phoneNumber: "2001004015")
            )
            #expect(try decode(UnifyStatusResponse.self, wrong).success == "false")
            #expect(try await client.status(token: token, unify.correlationId).success == "possession_required")

            let bound = try await client.post(
                "unify-bind",
                token: token,
                body: UnifyBindRequest(correlationId: unify.correlationId, phoneNumber: "2001004014")
            )
            let bind = try decode(UnifyStatusResponse.self, bound)
            #expect(bind.success == "true")
            #expect(bind.proveId != nil)
            #expect(bind.clientRequestId == "r-9")
            #expect(try await client.status(token: token, unify.correlationId).success == "true")
        }
    }
}

/// The Prove Key as Prove's Unify guide describes it: a bind puts the number on the device's key; the
/// key then passes that number without a possession check, holds one number only, and answers 9101
/// for another (customer-supplied possession: a bind rebinds; on a phone: `rebind` forces the check).
@Suite(.timeLimit(.minutes(1))) struct ProveKeyTests {
    func unify(
        _ client: some SandboxTestClient, _ token: String, _ type: String, _ phone: String, device: String?,
        rebind: Bool? = nil
    ) async throws -> String {
        let request = UnifyRequest(
            possessionType: type, clientRequestId: "r-1", phoneNumber: phone,
            finalTargetUrl: type == "mobile" ? "https://relay.example/l/k" : nil, deviceId: device, rebind: rebind)
        return try decode(UnifyResponse.self, try await client.post("unify", token: token, body: request)).correlationId
    }

    func bind(_ client: some SandboxTestClient, _ token: String, _ id: String, _ phone: String) async throws
        -> UnifyStatusResponse
    {
        let response = try await client.post(
            "unify-bind", token: token, body: UnifyBindRequest(correlationId: id, phoneNumber: phone))
        return try decode(UnifyStatusResponse.self, response)
    }

    @Test func aBoundKeyPassesItsNumberHoldsOneAndRebinds() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let first = try await unify(client, token, "none", "2001004014", device: nil)
            let device = try #require(try await bind(client, token, first, "2001004014").deviceId)
            // The key now holds the number: the next flow passes at once.
            let again = try await unify(client, token, "none", "2001004014", device: device)
            let passed = try await client.status(token: token, again)
            #expect(passed.success == "true")
            #expect(passed.deviceId == device)
            // Another number on the same key: 9101, and a bind rebinds the key to it.
            let other = try await unify(client, token, "none", "2001004015", device: device)
            let mismatch = try await client.status(token: token, other)
            #expect(mismatch.success == "possession_required")
            #expect(mismatch.evaluation?["authentication"]?.failureReasons?["9101"] != nil)
            #expect(try await bind(client, token, other, "2001004015").deviceId == device)
            // One number per key: the first one needs possession again.
            let back = try await unify(client, token, "none", "2001004014", device: device)
            #expect(try await client.status(token: token, back).success == "possession_required")
        }
    }

    @Test func onAPhoneAnotherNumberFailsWith9101UnlessRebind() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let first = try await unify(client, token, "none", "2001004014", device: nil)
            let device = try #require(try await bind(client, token, first, "2001004014").deviceId)
            let refused = try await unify(client, token, "mobile", "2001004015", device: device)
            let failed = try await client.status(token: token, refused)
            #expect(failed.success == "false")
            #expect(failed.evaluation?["authentication"]?.failureReasons?["9101"] != nil)
            // rebind: the full possession check (the Instant Link), then the key holds the new number.
            let rebound = try await unify(client, token, "mobile", "2001004015", device: device, rebind: true)
            let link = try #require(try await client.outbox("2001004015").last?.link)
            #expect(try await client.open(link).status == .found)
            #expect(try await client.status(token: token, rebound).success == "true")
            let now = try await unify(client, token, "none", "2001004015", device: device)
            #expect(try await client.status(token: token, now).success == "true")
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct PrefillTests {
    @Test func shortTermUserPassesEveryStep() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try decode(
                PrefillStartResponse.self,
                try await client.post(
                    "start",
                    token: token,
                    json: #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example/x"}"#
                )
            )
            #expect(start.next == ["v3-validate": "/v3/validate"])
            let id = start.correlationId
            let validate = try decode(
                PrefillValidateResponse.self,
                try await client.post("validate", token: token, json: #"{"correlationId":"\#(id)"}"#)
            )
            #expect(validate.success)
            #expect(validate.challengeMissing)
            #expect(validate.next == ["v3-challenge": "/v3/challenge"])
            let challenge = try decode(
                PrefillChallengeResponse.self,
                try await client.post(
                    "challenge",
                    token: token,
                    json: #"{"correlationId":"\#(id)","dob":"1981-01-17"}"#
                )
            )
            #expect(challenge.success)
            #expect(challenge.individual?.firstName == "Milo")
            #expect(challenge.individual?.addresses?.first?.postalCode == "80161-2001")
            #expect(challenge.next == ["v3-complete": "/v3/complete"])
            let complete = try decode(
                PrefillCompleteResponse.self,
                try await client.post(
                    "complete",
                    token: token,
                    json: #"{"correlationId":"\#(id)","individual":{"firstName":"Milo","lastName":"Pinson"}}"#
                )
            )
            #expect(complete.success)
            #expect(complete.next == ["done": "done"])
        }
    }

    @Test func stepOutOfOrderIs403() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try decode(
                PrefillStartResponse.self,
                try await client.post("start", token: token, json: #"{"flowType":"mobile","phoneNumber":"2001001695"}"#)
            )
            let id = start.correlationId
            let early = try await client.post(
                "complete",
                token: token,
                json: #"{"correlationId":"\#(id)","individual":{"firstName":"Milo"}}"#
            )
            #expect(early.status == .forbidden)
            #expect(
                try decode(ProveErrorBody.self, early)
                    == ProveErrorBody(code: 8003, message: "step called out of order")
            )
            #expect(try await client.post("validate", token: token, json: #"{"correlationId":"\#(id)"}"#).status == .ok)
            let twice = try await client.post("validate", token: token, json: #"{"correlationId":"\#(id)"}"#)
            #expect(twice.status == .forbidden)
        }
    }
}

/// A settable clock for the sandbox.
final class TestDateClock: Sendable {
    private let offset = Locked<TimeInterval>(0)
    private let base = Date()

    var now: @Sendable () -> Date {
        { [base, offset] in base.addingTimeInterval(offset.value) }
    }

    func advance(by seconds: TimeInterval) {
        offset.withLock { $0 += seconds }
    }
}
