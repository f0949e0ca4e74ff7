import Foundation
import LinkRelayTestSupport
import Logging
import NIOHTTP1
import ProveAPI
import Testing

@testable import ProveSandbox

/// One Pre-Fill test user of prove-api.md §8, as `/v3/challenge` must return it.
struct PrefillUserCase: Sendable, CustomStringConvertible {
    var phone: String
    var individual: ProveIndividual
    var description: String { phone }

    static let milo = PrefillUserCase(
        phone: "2001001695",
        individual: .init(
            firstName: "Milo", lastName: "Pinson", dob: "1981-01-17", ssn: "847350596",
            emailAddresses: ["mpinsonm@dyndns.org"],
            addresses: [
                .init(address: "6377 Birchwood Hill", city: "Littleton", region: "CO", postalCode: "80161-2001")
            ]))
    static let marcia = PrefillUserCase(
        phone: "2001001693",
        individual: .init(
            firstName: "Marcia", lastName: "Longo", dob: "1982-07-19", ssn: "470806227",
            addresses: [.init(address: "00 Mallard Park", city: "New Orleans", region: "LA", postalCode: "70165")]))
    static let nevin = PrefillUserCase(
        phone: "2001001688",
        individual: .init(
            firstName: "Nevin", lastName: "Chattey", dob: "1980-03-20", ssn: "542742985",
            addresses: [.init(address: "9398 Scott Plaza", city: "Austin", region: "TX", postalCode: "78744")]))
    static let agretha = PrefillUserCase(
        phone: "2001001687",
        individual: .init(
            firstName: "Agretha", lastName: "Chene", dob: "1994-12-29", ssn: "369956933",
            addresses: [.init(address: "4861 Jay Junction", city: "Boston", region: "MS", postalCode: "02208")]))
    static let all = [milo, marcia, nevin, agretha]
    /// The users who need the Instant Link's tap (the client SDK's stand-in) before validate passes.
    static let tapUsers = [marcia, nevin, agretha]
}

extension SandboxTestClient {
    func prefillStart(
        token: String, phone: String, flowType: String = "desktop", dob: String? = nil, ssn: String? = nil,
        target: String? = "https://relay.example/prefill/done"
    ) async throws -> PrefillStartResponse {
        let response = try await post(
            "start", token: token,
            body: PrefillStartRequest(
                flowType: flowType, finalTargetUrl: target, phoneNumber: phone, dob: dob, ssn: ssn))
        #expect(response.status == .ok)
        return try decode(PrefillStartResponse.self, response)
    }

    func prefillValidate(token: String, _ id: String) async throws -> TestResponse {
        try await post("validate", token: token, body: PrefillValidateRequest(correlationId: id))
    }

    func prefillChallenge(token: String, _ id: String, dob: String? = nil, ssn: String? = nil) async throws
        -> TestResponse
    {
        try await post("challenge", token: token, body: PrefillChallengeRequest(correlationId: id, dob: dob, ssn: ssn))
    }

    func prefillComplete(token: String, _ id: String, _ individual: ProveIndividual) async throws -> TestResponse {
        try await post(
            "complete", token: token, body: PrefillCompleteRequest(correlationId: id, individual: individual))
    }
}

func expectError(_ response: TestResponse, _ status: HTTPResponseStatus, _ code: Int) throws {
    #expect(response.status == status)
    #expect(try decode(ProveErrorBody.self, response).code == code)
}

let outOfOrder = ProveErrorBody(code: 8003, message: "step called out of order")

@Suite(.timeLimit(.minutes(1))) struct PrefillUserTests {
    @Test(arguments: PrefillUserCase.all)
    func eachUserPassesEveryStepAfterTheTap(_ user: PrefillUserCase) async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: user.phone)
            #expect(start.next == ["v3-validate": "/v3/validate"])
            #expect(start.authToken.hasPrefix("eyJ"))
            #expect(isUUID(start.correlationId))

            let message = try #require(try await client.outbox(user.phone).first)
            #expect(message.text.hasPrefix("Complete your verification."))
            #expect(message.text.hasSuffix(message.link))
            let tap = try await client.open(message.link)
            #expect(tap.status == .found)
            let (base, query) = redirectParts(try #require(tap.headers[.location]))
            #expect(base == "https://relay.example/prefill/done")
            #expect(query["asc"] == "true")
            #expect(isUUID(query["authId"] ?? ""))

            let validate = try decode(
                PrefillValidateResponse.self, try await client.prefillValidate(token: token, start.correlationId))
            #expect(
                validate
                    == .init(
                        success: true, challengeMissing: true, next: ["v3-challenge": "/v3/challenge"],
                        phoneNumber: user.phone))

            let last4 = String(user.individual.ssn!.suffix(4))
            let challenge = try decode(
                PrefillChallengeResponse.self,
                try await client.prefillChallenge(token: token, start.correlationId, ssn: last4))
            #expect(
                challenge == .init(success: true, next: ["v3-complete": "/v3/complete"], individual: user.individual))

            let complete = try decode(
                PrefillCompleteResponse.self,
                try await client.prefillComplete(token: token, start.correlationId, user.individual))
            #expect(complete == .init(success: true, next: ["done": "done"]))
        }
    }

    @Test(arguments: PrefillUserCase.tapUsers)
    func validateBeforeTheTapFailsAndEndsTheFlow(_ user: PrefillUserCase) async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: user.phone, dob: user.individual.dob)
            let validate = try decode(
                PrefillValidateResponse.self, try await client.prefillValidate(token: token, start.correlationId))
            #expect(
                validate
                    == .init(success: false, challengeMissing: false, next: ["done": "done"], phoneNumber: user.phone))
            // The flow is over: a tap now changes nothing, and no step is allowed.
            let link = try #require(try await client.outbox(user.phone).first?.link)
            #expect(redirectParts(try await client.open(link).headers[.location] ?? "").query["asc"] == "false")
            try expectError(
                try await client.prefillChallenge(token: token, start.correlationId, dob: user.individual.dob),
                .forbidden, 8003)
            try expectError(try await client.prefillValidate(token: token, start.correlationId), .forbidden, 8003)
        }
    }

    @Test func theShortTermUserPassesWithoutATap() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: "+12001001695", dob: "1981-01-17")
            let validate = try decode(
                PrefillValidateResponse.self, try await client.prefillValidate(token: token, start.correlationId))
            #expect(validate.success)
            #expect(!validate.challengeMissing, "the dob came with start")
            // The challenge of start stands when the challenge call gives none.
            let challenge = try decode(
                PrefillChallengeResponse.self, try await client.prefillChallenge(token: token, start.correlationId))
            #expect(challenge.individual == PrefillUserCase.milo.individual)
            let complete = try decode(
                PrefillCompleteResponse.self,
                try await client.prefillComplete(
                    token: token, start.correlationId, .init(firstName: "MILO", lastName: "pinson", dob: "1981-01-17")))
            #expect(complete.success)
        }
    }

    @Test("Prove Identity's credentials: validate offers complete at once, and the typed details complete it")
    func identityGoesFromValidateToComplete() async throws {
        let client = SandboxClient(ProveSandbox(publicBaseURL: publicBase))
        let project = ProveSandbox.Project.identity
        let token = try decode(
            ProveTokenResponse.self, try await client.requestToken(id: project.clientID, secret: project.clientSecret)
        ).accessToken
        let start = try await client.prefillStart(token: token, phone: "2001001695")
        let validate = try decode(
            PrefillValidateResponse.self, try await client.prefillValidate(token: token, start.correlationId))
        #expect(validate.success && !validate.challengeMissing)
        #expect(validate.next == ["v3-complete": "/v3/complete"])
        try expectError(
            try await client.prefillChallenge(token: token, start.correlationId, dob: "1981-01-17"), .forbidden, 8009)
        let complete = try decode(
            PrefillCompleteResponse.self,
            try await client.prefillComplete(
                token: token, start.correlationId, .init(firstName: "Milo", lastName: "Pinson", dob: "1981-01-17")))
        #expect(complete.success && complete.next == ["done": "done"])
    }

    @Test("Each product's test users need that product's credentials: 8009 across, 8007 for no test user at all")
    func credentialsPerProduct() async throws {
        let client = SandboxClient(ProveSandbox(publicBaseURL: publicBase))
        func token(_ project: ProveSandbox.Project) async throws -> String {
            try decode(
                ProveTokenResponse.self,
                try await client.requestToken(id: project.clientID, secret: project.clientSecret)
            ).accessToken
        }
        let unify = try await token(.unify)
        let prefill = try await token(.prefill)
        let start = PrefillStartRequest(
            flowType: "desktop", finalTargetUrl: "https://a.example/l", phoneNumber: "2001001695")
        try expectError(try await client.post("start", token: unify, body: start), .forbidden, 8009)
        let unifyRequest = UnifyRequest(
            possessionType: "desktop", clientRequestId: "r", phoneNumber: "2001004014",
            finalTargetUrl: "https://a.example/l")
        try expectError(try await client.post("unify", token: prefill, body: unifyRequest), .forbidden, 8009)
        // The credentials for every product: a Pre-Fill user on Unify is still another product's user.
        let all = try await client.accessToken()
        var prefillUserOnUnify = unifyRequest
        prefillUserOnUnify.phoneNumber = "2001001695"
        try expectError(try await client.post("unify", token: all, body: prefillUserOnUnify), .forbidden, 8009)
        prefillUserOnUnify.phoneNumber = "2001009999"
        try expectError(try await client.post("unify", token: all, body: prefillUserOnUnify), .badRequest, 8007)
        #expect(try await client.post("start", token: prefill, body: start).status == .ok)
        #expect(try await client.post("unify", token: unify, body: unifyRequest).status == .ok)
        // Another project's secret is no secret.
        #expect(
            try await client.requestToken(id: ProveSandbox.Project.unify.clientID, secret: "sandbox-prefill-secret")
                .status == .unauthorized)
    }

    @Test func aDeclinedTapFailsValidate() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: "2001001688")
            let link = try #require(try await client.outbox("2001001688").first?.link)
            let declined = try await client.open(link, decline: true)
            #expect(redirectParts(declined.headers[.location] ?? "").query["asc"] == "false")
            let validate = try decode(
                PrefillValidateResponse.self, try await client.prefillValidate(token: token, start.correlationId))
            #expect(!validate.success)
            #expect(validate.next == ["done": "done"])
        }
    }

    @Test func aMobileFlowSendsNoLinkAndNeedsTheClientSDK() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(
                token: token, phone: "2001001687", flowType: "mobile", target: nil)
            #expect(try await client.outbox("2001001687").isEmpty)
            let validate = try decode(
                PrefillValidateResponse.self, try await client.prefillValidate(token: token, start.correlationId))
            #expect(!validate.success)
        }
    }

    @Test(arguments: [
        ("dob", "1982-07-19"), ("dob", "1982-07"), ("dob", "07-19"), ("ssn", "470806227"), ("ssn", "6227"),
    ])
    func everyChallengeFormMatches(_ field: String, _ value: String) async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: "2001001693")
            _ = try await client.open(try #require(try await client.outbox("2001001693").first?.link))
            #expect(try await client.prefillValidate(token: token, start.correlationId).status == .ok)
            let response = try await client.prefillChallenge(
                token: token, start.correlationId, dob: field == "dob" ? value : nil, ssn: field == "ssn" ? value : nil)
            #expect(try decode(PrefillChallengeResponse.self, response).success)
        }
    }

    @Test func aWrongChallengeFailsAndEndsTheFlow() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: "2001001695")
            #expect(try await client.prefillValidate(token: token, start.correlationId).status == .ok)
            let challenge = try decode(
                PrefillChallengeResponse.self,
                try await client.prefillChallenge(token: token, start.correlationId, dob: "1990-01-01"))
            #expect(challenge == .init(success: false, next: ["done": "done"]))
            try expectError(
                try await client.prefillComplete(token: token, start.correlationId, PrefillUserCase.milo.individual),
                .forbidden, 8003)
        }
    }

    @Test func completeWithAnotherPersonIsNotVerified() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let start = try await client.prefillStart(token: token, phone: "2001001695", ssn: "0596")
            #expect(try await client.prefillValidate(token: token, start.correlationId).status == .ok)
            #expect(try await client.prefillChallenge(token: token, start.correlationId).status == .ok)
            var other = PrefillUserCase.milo.individual
            other.ssn = "123456789"
            let complete = try decode(
                PrefillCompleteResponse.self, try await client.prefillComplete(token: token, start.correlationId, other)
            )
            #expect(!complete.success)
            #expect(complete.next == ["done": "done"])
            #expect(complete.evaluation?["identification"]?.result == "fail")
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct PrefillOrderAndInputTests {
    @Test func stepsOutOfOrderAndRepeatsAnswer8003() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let milo = PrefillUserCase.milo.individual
            let id = try await client.prefillStart(token: token, phone: "2001001695").correlationId
            let challengeFirst = try await client.prefillChallenge(token: token, id, dob: "1981-01-17")
            #expect(challengeFirst.status == .forbidden)
            #expect(try decode(ProveErrorBody.self, challengeFirst) == outOfOrder)
            try expectError(try await client.prefillComplete(token: token, id, milo), .forbidden, 8003)

            #expect(try await client.prefillValidate(token: token, id).status == .ok)
            try expectError(try await client.prefillValidate(token: token, id), .forbidden, 8003)
            try expectError(try await client.prefillComplete(token: token, id, milo), .forbidden, 8003)

            #expect(try await client.prefillChallenge(token: token, id, dob: "1981-01-17").status == .ok)
            try expectError(try await client.prefillChallenge(token: token, id, dob: "1981-01-17"), .forbidden, 8003)
            try expectError(try await client.prefillValidate(token: token, id), .forbidden, 8003)

            #expect(try await client.prefillComplete(token: token, id, milo).status == .ok)
            try expectError(try await client.prefillComplete(token: token, id, milo), .forbidden, 8003)
            try expectError(try await client.prefillValidate(token: token, id), .forbidden, 8003)
        }
    }

    @Test func challengeMissingAndAChallengeWithoutDobOrSSN() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let id = try await client.prefillStart(token: token, phone: "2001001695").correlationId
            #expect(
                try decode(PrefillValidateResponse.self, try await client.prefillValidate(token: token, id))
                    .challengeMissing)
            try expectError(try await client.prefillChallenge(token: token, id), .badRequest, 8001)
            // The refused call took no step: the challenge is still next.
            #expect(try await client.prefillChallenge(token: token, id, ssn: "0596").status == .ok)
        }
    }

    @Test(arguments: [
        #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example","dob":"1981-13-01"}"#,
        #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example","dob":"17-01-1981"}"#,
        #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example","dob":"01/17"}"#,
        #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example","ssn":"12345"}"#,
        #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example","ssn":"84735-0596"}"#,
        #"{"flowType":"desktop","phoneNumber":"2001001695"}"#,
        #"{"flowType":"tablet","phoneNumber":"2001001695"}"#,
        #"{"flowType":"mobile"}"#,
        #"{"phoneNumber":"2001001695"}"#,
        #"{"flowType":"desktop","phoneNumber":"2001001695","finalTargetUrl":"https://a.example/\#(String(repeating: "x", count: 120))"}"#,
        #"{"flowType":"mobile","phoneNumber":"2001001695","emailAddress":"a b@c.d"}"#,
    ])
    func malformedStartIs8001AndSendsNothing(_ json: String) async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            try expectError(try await client.post("start", token: token, json: json), .badRequest, 8001)
            #expect(try await client.outbox("2001001695").isEmpty)
        }
    }

    @Test func malformedChallengeAndCompleteAre8001AndTakeNoStep() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let id = try await client.prefillStart(token: token, phone: "2001001695").correlationId
            #expect(try await client.prefillValidate(token: token, id).status == .ok)
            try expectError(try await client.prefillChallenge(token: token, id, dob: "1981-1-17"), .badRequest, 8001)
            try expectError(try await client.prefillChallenge(token: token, id, ssn: "abcd"), .badRequest, 8001)
            #expect(try await client.prefillChallenge(token: token, id, ssn: "847350596").status == .ok)
            var bad = PrefillUserCase.milo.individual
            bad.dob = "yesterday"
            try expectError(try await client.prefillComplete(token: token, id, bad), .badRequest, 8001)
            try expectError(
                try await client.post("complete", token: token, json: #"{"correlationId":"\#(id)"}"#), .badRequest, 8001
            )
            #expect(try await client.prefillComplete(token: token, id, PrefillUserCase.milo.individual).status == .ok)
        }
    }

    @Test func unknownUsersCorrelationIdsAndTokens() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let unknown = try await client.post(
                "start", token: token, body: PrefillStartRequest(flowType: "mobile", phoneNumber: "2001009999"))
            try expectError(unknown, .badRequest, 8007)
            try expectError(try await client.prefillValidate(token: token, "no-such-flow"), .badRequest, 8008)
            // A Unify flow's correlation ID names no Pre-Fill flow.
            let unify = try decode(UnifyResponse.self, try await client.unifyDesktop(token: token, phone: "2001004014"))
            try expectError(try await client.prefillValidate(token: token, unify.correlationId), .badRequest, 8008)
            try expectError(
                try await client.post("validate", token: nil, json: #"{"correlationId":"x"}"#), .unauthorized, 8002)
        }
    }

    @Test func theFlowExpiresFifteenMinutesAfterStart() async throws {
        let clock = TestDateClock()
        let sandbox = ProveSandbox(publicBaseURL: publicBase, tokenLifetime: 7200, now: clock.now)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let live = try await client.prefillStart(token: token, phone: "2001001693").correlationId
            let expiring = try await client.prefillStart(token: token, phone: "2001001693").correlationId
            let links = try await client.outbox("2001001693").map(\.link)
            #expect(links.count == 2)
            clock.advance(by: 14 * 60 + 59)
            #expect(try await client.open(links[0]).status == .found)
            #expect(try await client.prefillValidate(token: token, live).status == .ok)
            clock.advance(by: 1)
            try expectError(try await client.prefillValidate(token: token, expiring), .badRequest, 8008)
            try expectError(try await client.prefillChallenge(token: token, live, dob: "1982-07-19"), .badRequest, 8008)
            #expect(try await client.open(links[1]).status == .notFound)
        }
    }

    @Test func theLinkCarriesTheSMSTextAndAnyQueryOfTheTarget() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            _ = try decode(
                PrefillStartResponse.self,
                try await client.post(
                    "start", token: token,
                    body: PrefillStartRequest(
                        flowType: "desktop", finalTargetUrl: "https://relay.example/l?s=1", phoneNumber: "2001001688",
                        smsMessage: "Tap #### to continue")))
            let message = try #require(try await client.outbox("2001001688").first)
            #expect(message.text == "Tap \(message.link) to continue")
            let location = try await client.open(message.link).headers[.location] ?? ""
            #expect(location.hasPrefix("https://relay.example/l?s=1&asc=true&authId="))
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct PrefillFaultAndClientTests {
    @Test(arguments: ["start", "validate", "challenge", "complete"])
    func aFaultAnswersInsteadAndTakesNoStep(_ endpoint: String) async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxClient(sandbox)
        do {
            let token = try await client.accessToken()
            let id = try await client.prefillStart(token: token, phone: "2001001695").correlationId
            let steps: [(String, () async throws -> TestResponse)] = [
                (
                    "start",
                    {
                        try await client.post(
                            "start", token: token,
                            body: PrefillStartRequest(flowType: "mobile", phoneNumber: "2001001695"))
                    }
                ),
                ("validate", { try await client.prefillValidate(token: token, id) }),
                ("challenge", { try await client.prefillChallenge(token: token, id, dob: "1981-01-17") }),
                ("complete", { try await client.prefillComplete(token: token, id, PrefillUserCase.milo.individual) }),
            ]
            for (name, call) in steps {
                if name == endpoint {
                    try await sandbox.setFault(
                        try ProveSandbox.parseFault("\(endpoint):error=1,status=502").fault, for: endpoint)
                    #expect(try await call().status == .badGateway, "\(name)")
                    await sandbox.clearFaults()
                }
                #expect(try await call().status == .ok, "\(name)")
            }
            #expect(try await client.outbox("2001001695").count == 1, "a faulted start sends no SMS")
        }
    }

    @Test func theInProcessClientRunsTheFlowLikeHTTP() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let calls = SandboxProveClientTests.Calls()
        let overHTTP = SandboxProveClientTests.OverHTTP()
        let capture = LogCapture()
        let client = SandboxProveClient(
            sandbox: sandbox, overHTTP: overHTTP, observer: calls, logger: capture.logger(level: .trace))
        let deadline = ContinuousClock.now + .seconds(60)
        let start = try await client.prefillStart(
            .init(flowType: "desktop", finalTargetUrl: "https://relay.example/p", phoneNumber: "2001001687"),
            deadline: deadline)
        let link = try #require(await sandbox.outbox(phoneNumber: "2001001687").first?.link)
        let reply = await sandbox.openLink(id: String(link.split(separator: "/").last!), decline: false)
        #expect(reply.status == 302)
        let validate = try await client.prefillValidate(.init(correlationId: start.correlationId), deadline: deadline)
        #expect(validate.success && validate.challengeMissing)
        let challenge = try await client.prefillChallenge(
            .init(correlationId: start.correlationId, dob: "12-29"), deadline: deadline)
        #expect(challenge.individual == PrefillUserCase.agretha.individual)
        let complete = try await client.prefillComplete(
            .init(correlationId: start.correlationId, individual: challenge.individual!), deadline: deadline)
        #expect(complete.success)
        await #expect(throws: ProveClientError.rejected(status: 403, body: outOfOrder)) {
            try await client.prefillValidate(.init(correlationId: start.correlationId), deadline: deadline)
        }
        #expect(calls.all == ["start 200", "validate 200", "challenge 200", "complete 200", "validate 403"])
        #expect(overHTTP.calls == 0)

        // While a fault is set, Pre-Fill goes over HTTP too, where faults act.
        try await sandbox.setFault(.latency(.milliseconds(1)), for: .start)
        #expect(
            try await client.prefillStart(.init(flowType: "mobile", phoneNumber: "2001001695"), deadline: deadline)
                .correlationId == "over-http")
        #expect(overHTTP.calls == 1)

        // The rejection is logged, and no identity data with it.
        let log = capture.all.joined(separator: "\n")
        #expect(log.contains("prove.error_code=8003") || log.contains("8003"))
        for secret in [
            "Agretha", "Chene", "1994", "369956933", "6933", "Jay Junction", "Boston", "02208", "2001001687",
        ] {
            #expect(!log.contains(secret), "\(secret) in the log")
        }
    }
}
