import AsyncHTTPClient
import Foundation
import LinkRelayTestSupport
import Logging
import ProveAPI
import ProveSandbox
import Testing

/// Pre-Fill's models with Prove's documented bodies (prove-api.md §4, §5).
@Suite(.timeLimit(.minutes(1))) struct PrefillModelTests {
    func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ json: String) throws -> T {
        let decoded = try JSONDecoder().decode(T.self, from: Data(json.utf8))
        #expect(try JSONDecoder().decode(T.self, from: JSONEncoder().encode(decoded)) == decoded)
        return decoded
    }

    @Test func startResponseOfTheReference() throws {
        let start = try roundTrip(
            PrefillStartResponse.self,
            #"{"next":{"v3-validate":"/v3/validate"},"authToken":"eyJhbGciOi...","correlationId":"713189b8-5555-4b08-83ba-75d08780aebd"}"#
        )
        #expect(start.next == ["v3-validate": "/v3/validate"])
        #expect(start.authToken == "eyJhbGciOi...")
        #expect(start.correlationId == "713189b8-5555-4b08-83ba-75d08780aebd")
    }

    @Test func startRequestOmitsNilFieldsAndKeepsTheSeedsFields() throws {
        // The Go sample of the Pre-Fill guide: desktop, finalTargetUrl, phone number and the SSN's last 4.
        let request = PrefillStartRequest(
            flowType: "desktop", finalTargetUrl: "https://prove.com", phoneNumber: "2001001686", ssn: "8370")
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as? [String: Any]
        #expect(Set(object?.keys.map { $0 } ?? []) == ["flowType", "finalTargetUrl", "phoneNumber", "ssn"])
        let full = PrefillStartRequest(
            flowType: "desktop", finalTargetUrl: "https://www.example.com", phoneNumber: "2001001695",
            dob: "1981-01", ssn: "847350596", emailAddress: "a@b.c", ipAddress: "10.0.0.1", smsMessage: "#### hi",
            allowOTPRetry: true)
        #expect(try JSONDecoder().decode(PrefillStartRequest.self, from: JSONEncoder().encode(full)) == full)
        // Prove's start model has no client ids: the relay never sends them to /v3/start.
        let keys = try JSONSerialization.jsonObject(with: JSONEncoder().encode(full)) as? [String: Any]
        #expect(keys?["clientRequestId"] == nil && keys?["clientCustomerId"] == nil)
    }

    @Test func validateResponseOfTheReference() throws {
        let validate = try roundTrip(
            PrefillValidateResponse.self,
            #"{"next":{"v3-challenge":"/v3/challenge"},"phoneNumber":"2001001686","success":true,"challengeMissing":true}"#
        )
        #expect(validate.success)
        #expect(validate.challengeMissing)
        #expect(validate.next == ["v3-challenge": "/v3/challenge"])
        #expect(validate.phoneNumber == "2001001686")
    }

    @Test func validateResponseWithoutChallengeMissingIsFalse() throws {
        // Prove leaves empty values out of its answers.
        let validate = try roundTrip(PrefillValidateResponse.self, #"{"success":false,"next":{"done":"done"}}"#)
        #expect(!validate.success)
        #expect(!validate.challengeMissing)
    }

    @Test func completeRequestOfTheReference() throws {
        let complete = try roundTrip(
            PrefillCompleteRequest.self,
            #"{"correlationId":"c","individual":{"firstName":"Tod","lastName":"Weedall","addresses":[{"address":"39 South Trail","city":"San Antonio","extendedAddress":"Apt 23","postalCode":"78285","region":"TX"}],"emailAddresses":["jdoe@example.com"],"dob":"1981-01-17","ssn":"265228370"}}"#
        )
        #expect(
            complete.individual
                == ProveIndividual(
                    firstName: "Tod", lastName: "Weedall", dob: "1981-01-17", ssn: "265228370",
                    emailAddresses: ["jdoe@example.com"],
                    addresses: [
                        ProveAddress(
                            address: "39 South Trail", extendedAddress: "Apt 23", city: "San Antonio", region: "TX",
                            postalCode: "78285")
                    ]))
    }

    @Test func completeResponseOfTheReferenceKeepsTheEvaluation() throws {
        let complete = try roundTrip(
            PrefillCompleteResponse.self,
            #"{"success":false,"next":{"done":"done"},"evaluation":{"authentication":{"result":"fail","failureReasons":{"9161":"Very short tenure association between phone number and identity.","9171":"Potential injection attack due to 2 identities both with short tenure association to the phone number.","9180":"No phone ownership confirmed using 4 elements."}},"identification":{"result":"fail","failureReasons":{"9001":"Identification isn't confirmed using 4 elements."}}}}"#
        )
        #expect(!complete.success)
        #expect(complete.next == ["done": "done"])
        #expect(complete.evaluation?["identification"]?.failureReasons?["9001"] != nil)
        #expect(complete.evaluation?["authentication"]?.failureReasons?.count == 3)
    }

    @Test func completeResponseIgnoresTheKYCObjects() throws {
        let complete = try JSONDecoder().decode(
            PrefillCompleteResponse.self,
            from: Data(
                #"{"success":true,"next":{"done":"done"},"idv":{"multiCIPConfidence":"high"},"kyc":{"totalHits":0}}"#
                    .utf8))
        #expect(complete.success)
    }

    @Test func challengeResponseWithAnIndividual() throws {
        let challenge = try roundTrip(
            PrefillChallengeResponse.self,
            #"{"success":true,"next":{"v3-complete":"/v3/complete"},"individual":{"firstName":"Milo","lastName":"Pinson","dob":"1981-01-17T00:00:00Z","ssn":"847350596","emailAddresses":["mpinsonm@dyndns.org"],"addresses":[{"address":"6377 Birchwood Hill","city":"Littleton","region":"CO","postalCode":"80161-2001"}]}}"#
        )
        #expect(challenge.individual?.dob == "1981-01-17T00:00:00Z")
        #expect(challenge.individual?.addresses?.first?.postalCode == "80161-2001")
        #expect(challenge.next == ["v3-complete": "/v3/complete"])
        let request = try roundTrip(PrefillChallengeRequest.self, #"{"correlationId":"c","dob":"01-17"}"#)
        #expect(request == PrefillChallengeRequest(correlationId: "c", dob: "01-17"))
        #expect(try roundTrip(PrefillValidateRequest.self, #"{"correlationId":"c"}"#).correlationId == "c")
    }
}

/// Identity data never shows in a description, a debug description or a dump.
@Suite(.timeLimit(.minutes(1))) struct PrefillRedactionTests {
    static let milo = ProveIndividual(
        firstName: "Milo", lastName: "Pinson", dob: "1981-01-17", ssn: "847350596",
        emailAddresses: ["mpinsonm@dyndns.org"],
        addresses: [ProveAddress(address: "6377 Birchwood Hill", city: "Littleton", region: "CO", postalCode: "80161")])
    static let secrets = [
        "Milo", "Pinson", "1981", "847350596", "0596", "mpinsonm", "Birchwood", "Littleton", "80161", "2001001695",
    ]

    func rendered(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return ["\(value)", String(reflecting: value), String(describing: value), dumped]
    }

    func expectRedacted(_ value: Any) {
        for text in rendered(value) {
            for secret in Self.secrets { #expect(!text.contains(secret), "\(secret) in \(text)") }
        }
    }

    @Test func everyModelWithIdentityDataIsRedacted() {
        expectRedacted(Self.milo)
        expectRedacted(Self.milo.addresses![0])
        expectRedacted(
            PrefillStartRequest(
                flowType: "desktop", finalTargetUrl: "https://a.example", phoneNumber: "2001001695", dob: "1981-01-17",
                ssn: "847350596", emailAddress: "mpinsonm@dyndns.org"))
        expectRedacted(PrefillChallengeRequest(correlationId: "c", dob: "1981-01-17", ssn: "0596"))
        expectRedacted(PrefillChallengeResponse(success: true, next: [:], individual: Self.milo))
        expectRedacted(PrefillCompleteRequest(correlationId: "c", individual: Self.milo))
        expectRedacted(
            PrefillValidateResponse(success: true, challengeMissing: false, next: [:], phoneNumber: "2001001695"))
    }

    @Test func descriptionsSayWhatIsGivenButNotWhat() {
        #expect("\(Self.milo)".contains("firstName, lastName, dob, ssn: <redacted>"))
        #expect("\(Self.milo)".contains("addresses: 1"))
        #expect("\(ProveIndividual())".contains("empty"))
        #expect("\(PrefillChallengeRequest(correlationId: "c-9", dob: "01-17"))".contains("ssn: nil"))
        #expect("\(PrefillChallengeRequest(correlationId: "c-9", dob: "01-17"))".contains("c-9"))
        #expect(ProveRedaction.redact("847350596") == "<redacted>")
        #expect(ProveRedaction.redact(nil) == "nil")
    }
}

/// `HTTPProveClient`'s Pre-Fill calls: retries by the SMS rule, against a scripted Prove.
@Suite(.timeLimit(.minutes(1))) struct PrefillRetryTests {
    /// The fault tests' client: their retry policy, with recorded sleeps.
    let faults = HTTPProveClientFaultTests()

    @Test func startIsRetriedOnlyWhenTheRequestWasNotProcessed() async throws {
        let server = ScriptedProve([HTTPProveClientFaultTests.status503, .respond(status: 500)])
        let sleeper = SleepRecorder()
        let observer = ObserverRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = faults.makeClient(baseURL, http, sleeper: sleeper, observer: observer)
                await #expect {
                    try await client.prefillStart(
                        .init(flowType: "desktop", finalTargetUrl: "https://a.example", phoneNumber: "2001001695"),
                        deadline: deadline())
                } throws: { error in
                    guard case ProveClientError.unavailable = error else { return false }
                    return true
                }
            }
        }
        // 503 is retried (not processed); the 500 may have sent the SMS, so it is not.
        #expect(await server.apiRequests == 2)
        #expect(sleeper.sleeps.value.count == 1)
        #expect(observer.calls.value == ["token 200", "start 503", "start 500"])
    }

    @Test func startSucceedsAfterA429() async throws {
        let server = ScriptedProve([.respond(status: 429, body: "")])
        let start = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await faults.makeClient(baseURL, http, sleeper: SleepRecorder(), observer: ObserverRecorder())
                    .prefillStart(.init(flowType: "mobile", phoneNumber: "2001001695"), deadline: deadline())
            }
        }
        #expect(start.correlationId == "c-1")
        #expect(await server.apiRequests == 2)
    }

    @Test func stepsWithoutAnSMSAreRetriedOn5xx() async throws {
        func ok(_ path: String) -> ScriptedProve.Step {
            .respond(status: 200, body: ScriptedProve.okPrefillBodies[path]!)
        }
        let server = ScriptedProve([
            HTTPProveClientFaultTests.status503, .respond(status: 500), ok("/v3/validate"),
            HTTPProveClientFaultTests.status503, .respond(status: 502), ok("/v3/challenge"),
            .respond(status: 500),
        ])
        let observer = ObserverRecorder()
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = faults.makeClient(baseURL, http, sleeper: sleeper, observer: observer)
                let validate = try await client.prefillValidate(.init(correlationId: "c-1"), deadline: deadline())
                #expect(validate.success && validate.challengeMissing)
                let challenge = try await client.prefillChallenge(
                    .init(correlationId: "c-1", dob: "1981-01-17"), deadline: deadline())
                #expect(challenge.individual?.firstName == "A")
                let complete = try await client.prefillComplete(
                    .init(correlationId: "c-1", individual: .init(firstName: "A")), deadline: deadline())
                #expect(complete.next == ["done": "done"])
            }
        }
        #expect(
            observer.calls.value == [
                "token 200", "validate 503", "validate 500", "validate 200", "challenge 503", "challenge 502",
                "challenge 200", "complete 500", "complete 200",
            ])
        #expect(sleeper.sleeps.value.count == 5)
    }

    @Test func aStepOutOfOrderIsRejectedWithProvesCode() async throws {
        let server = ScriptedProve([
            .respond(status: 403, body: #"{"code":8003,"message":"step called out of order"}"#)
        ])
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = faults.makeClient(baseURL, http, sleeper: SleepRecorder(), observer: ObserverRecorder())
                await #expect(
                    throws: ProveClientError.rejected(
                        status: 403, body: .init(code: 8003, message: "step called out of order"))
                ) {
                    try await client.prefillComplete(
                        .init(correlationId: "c-1", individual: .init(firstName: "A")), deadline: deadline())
                }
            }
        }
        #expect(await server.apiRequests == 1)
    }
}

/// `HTTPProveClient` through a whole desktop Pre-Fill flow against the sandbox served live.
@Suite(.timeLimit(.minutes(1))) struct PrefillSandboxClientTests {
    @Test func desktopFlowEndToEndWithATraceLogFreeOfIdentityData() async throws {
        let capture = LogCapture()
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        let observer = ObserverRecorder()
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = HTTPProveClient(
                    baseURL: baseURL, credentials: sandboxCredentials, httpClient: http,
                    retry: RetryPolicy(attemptTimeout: .seconds(patientSeconds)), observer: observer,
                    logger: capture.logger(label: "capture", level: .trace))
                let start = try await client.prefillStart(
                    .init(
                        flowType: "desktop", finalTargetUrl: "https://relay.test/prefill/done",
                        phoneNumber: "2001001693"),
                    deadline: deadline())
                #expect(start.next == ["v3-validate": "/v3/validate"])

                // The phone taps the Instant Link: Prove's page redirects to finalTargetUrl like Unify's.
                let link = try #require(await sandbox.outbox(phoneNumber: "2001001693").first?.link)
                var open = HTTPClientRequest(
                    url: baseURL.replacingOccurrences(of: "/sandbox/prove", with: "")
                        + link.dropFirst("http://relay.test".count))
                open.method = .GET
                let noRedirects = HTTPClient(
                    eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
                let tapped = try await noRedirects.execute(open, timeout: .seconds(Int64(patientSeconds)))
                try await noRedirects.shutdown()
                #expect(tapped.status == .found)
                let location = try #require(tapped.headers.first(name: "Location"))
                #expect(location.hasPrefix("https://relay.test/prefill/done?asc=true&authId="))

                let validate = try await client.prefillValidate(
                    .init(correlationId: start.correlationId), deadline: deadline())
                #expect(validate.success && validate.challengeMissing)
                #expect(validate.phoneNumber == "2001001693")
                let challenge = try await client.prefillChallenge(
                    .init(correlationId: start.correlationId, ssn: "6227"), deadline: deadline())
                let individual = try #require(challenge.individual)
                #expect(individual.lastName == "Longo")
                let complete = try await client.prefillComplete(
                    .init(correlationId: start.correlationId, individual: individual), deadline: deadline())
                #expect(complete.success && complete.next == ["done": "done"])

                // A repeat of the finished step: Prove's 403 8003, not retried.
                await #expect(
                    throws: ProveClientError.rejected(
                        status: 403, body: .init(code: 8003, message: "step called out of order"))
                ) {
                    try await client.prefillComplete(
                        .init(correlationId: start.correlationId, individual: individual), deadline: deadline())
                }
                // A bad challenge: Prove's 400 8001, which names the field and not its value.
                await #expect(throws: ProveClientError.self) {
                    try await client.prefillStart(
                        .init(flowType: "mobile", phoneNumber: "2001001693", dob: "1982-19-07"), deadline: deadline())
                }
            }
        }
        #expect(
            observer.calls.value == [
                "token 200", "start 200", "validate 200", "challenge 200", "complete 200", "complete 403", "start 400",
            ])
        let all = capture.all.joined(separator: "\n")
        #expect(capture.all.count >= 3, "the token fetch and both rejections are logged")
        for secret in [
            "Marcia", "Longo", "1982", "470806227", "6227", "Mallard", "New Orleans", "70165", "2001001693",
        ] {
            #expect(!all.contains(secret), "\(secret) in the log")
        }
    }
}
