import AsyncHTTPClient
import Foundation
import LinkRelaySupport
import LinkRelayTestSupport
import ProveAPI
import Testing

/// Retries, timeouts and error mapping of `HTTPProveClient` against a scripted faulty server.
@Suite(.timeLimit(.minutes(1))) struct HTTPProveClientFaultTests {
    static let status503 = ScriptedProve.Step.respond(status: 503, body: #"{"code":8000,"message":"busy"}"#)

    func makeClient(
        _ baseURL: String,
        _ http: ProviderHTTPClient,
        sleeper: SleepRecorder,
        observer: ObserverRecorder? = nil,
        random: Double = 0.5,
        attemptTimeout: Duration = .seconds(patientSeconds)
    ) -> HTTPProveClient {
        HTTPProveClient(
            baseURL: baseURL,
            credentials: .init(clientID: "id", clientSecret: "secret"),
            httpClient: http,
            retry: RetryPolicy(attemptTimeout: attemptTimeout, sleep: sleeper.sleep, random: { random }),
            observer: observer,
            logger: quietLogger()
        )
    }

    @Test func aStalledAttemptIsCutAtTheAttemptTimeoutAndRetried() async throws {
        // The first attempt never gets an answer; the deadline is far away, so only the attempt
        // timeout can end it, and the retry then succeeds well before the deadline.
        let server = ScriptedProve([.hang])
        let sleeper = SleepRecorder()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await makeClient(baseURL, http, sleeper: sleeper, attemptTimeout: .seconds(3))
                    .unifyStatus(.init(correlationId: "c-1"), deadline: deadline(600))
            }
        }
        #expect(status.success == "true")
        #expect(await server.apiRequests >= 2, "the stalled attempt was given up and retried")
    }

    @Test func anAttemptWhoseBodyStallsIsCutAtTheAttemptTimeoutAndRetried() async throws {
        // The head arrives at once, so the HTTP client's own deadline is met; the attempt timeout
        // still ends the attempt while its body is unfinished.
        let server = ScriptedProve([.hangInBody])
        let observer = ObserverRecorder()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await makeClient(
                    baseURL, http, sleeper: SleepRecorder(), observer: observer, attemptTimeout: .seconds(3)
                )
                .unifyStatus(.init(correlationId: "c-1"), deadline: deadline(600))
            }
        }
        #expect(status.success == "true")
        #expect(await server.apiRequests == 2)
        // Only unify-status stalls. The token's attempt has the same 3 s and may run out too on a
        // loaded machine (under ThreadSanitizer, with the other suites), and is then retried as well.
        let calls = observer.calls.value
        #expect(calls.last(where: { $0.hasPrefix("token") }) == "token 200")
        #expect(calls.filter { $0.hasPrefix("unify-status") } == ["unify-status timeout", "unify-status 200"])
    }

    @Test func a429HonoursRetryAfter() async throws {
        let server = ScriptedProve([
            .respond(status: 429, retryAfter: "1", body: #"{"code":8000,"message":"slow down"}"#)
        ])
        let sleeper = SleepRecorder()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await makeClient(baseURL, http, sleeper: sleeper)
                    .unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
            }
        }
        #expect(status.success == "true")
        #expect(await server.apiRequests == 2)
        let sleeps = sleeper.sleeps.value
        #expect(sleeps.count == 1)
        #expect(sleeps.allSatisfy { $0 >= .seconds(1) })
    }

    @Test func retryAfterBeyondTheDeadlineGivesUpWithoutSleeping() async throws {
        // The deadline is far enough away that a loaded machine still makes the first attempt, and
        // Retry-After is further still.
        let server = ScriptedProve([.respond(status: 429, retryAfter: "3600", body: "")])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect {
                    try await client.unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
                } throws: { error in
                    guard case ProveClientError.unavailable = error else { return false }
                    return true
                }
            }
        }
        #expect(sleeper.sleeps.value.isEmpty)
        #expect(await server.apiRequests == 1)
    }

    @Test func a5xxBurstWithinMaxAttemptsSucceeds() async throws {
        let server = ScriptedProve([Self.status503, .respond(status: 500), .respond(status: 502)])
        let sleeper = SleepRecorder()
        let observer = ObserverRecorder()
        let status = try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                try await makeClient(baseURL, http, sleeper: sleeper, observer: observer, random: 0.999)
                    .unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
            }
        }
        #expect(status.success == "true")
        #expect(await server.apiRequests == 4)
        let policy = RetryPolicy()
        let sleeps = sleeper.sleeps.value
        #expect(sleeps.count == 3)
        for (index, sleep) in sleeps.enumerated() {
            #expect(sleep <= policy.backoffCap(retry: index + 1))
            #expect(sleep > .zero)
        }
        #expect(
            observer.calls.value == [
                "token 200", "unify-status 503", "unify-status 500", "unify-status 502", "unify-status 200",
            ]
        )
    }

    @Test func aLongerBurstIsUnavailable() async throws {
        let server = ScriptedProve(Array(repeating: Self.status503, count: 6))
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect {
                    try await client.unifyStatus(.init(correlationId: "c-1"), deadline: deadline())
                } throws: { error in
                    guard case ProveClientError.unavailable = error else { return false }
                    return true
                }
            }
        }
        #expect(await server.apiRequests == 4)
        #expect(sleeper.sleeps.value.count == 3)
    }

    @Test func a400IsNotRetried() async throws {
        let server = ScriptedProve([
            .respond(status: 400, body: #"{"code":8001,"message":"correlationId is required"}"#)
        ])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect(
                    throws: ProveClientError.rejected(
                        status: 400,
                        body: .init(code: 8001, message: "correlationId is required")
                    )
                ) {
                    try await client.unifyStatus(.init(correlationId: ""), deadline: deadline())
                }
            }
        }
        #expect(await server.apiRequests == 1)
        #expect(sleeper.sleeps.value.isEmpty)
    }

    @Test func aNonJSONErrorBodyDecodesToNil() async throws {
        let server = ScriptedProve([.respond(status: 404, body: "<html>not found</html>")])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect(throws: ProveClientError.rejected(status: 404, body: nil)) {
                    try await client.unifyBind(
                        .init(correlationId: "c", phoneNumber: "2001004014"),
                        deadline: deadline()
                    )
                }
            }
        }
        #expect(await server.apiRequests == 1)
    }

    @Test func a403IsNotRetriedNorRefreshed() async throws {
        let server = ScriptedProve([.respond(status: 403, body: #"{"code":8003,"message":"forbidden"}"#)])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect(
                    throws: ProveClientError.rejected(status: 403, body: .init(code: 8003, message: "forbidden"))
                ) {
                    try await client.unifyStatus(.init(correlationId: "c"), deadline: deadline())
                }
            }
        }
        #expect(await server.apiRequests == 1)
        #expect(await server.tokenRequests == 1)
    }

    @Test func aRepeated401RefreshesOnlyOnce() async throws {
        let unauthorized = ScriptedProve.Step.respond(status: 401, body: #"{"code":8002,"message":"not authorized"}"#)
        let server = ScriptedProve([unauthorized, unauthorized, unauthorized])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect(
                    throws: ProveClientError.rejected(status: 401, body: .init(code: 8002, message: "not authorized"))
                ) {
                    try await client.unifyStatus(.init(correlationId: "c"), deadline: deadline())
                }
            }
        }
        #expect(await server.apiRequests == 2)
        #expect(await server.tokenRequests == 2)
    }

    @Test func unifyIsRetriedOnlyWhenTheRequestWasNotProcessed() async throws {
        let server = ScriptedProve([Self.status503, .respond(status: 500)])
        let sleeper = SleepRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper)
                await #expect {
                    try await client.unify(
                        UnifyRequest(possessionType: "desktop", clientRequestId: "r", phoneNumber: "2001004014"),
                        deadline: deadline()
                    )
                } throws: { error in
                    guard case ProveClientError.unavailable = error else { return false }
                    return true
                }
            }
        }
        // 503 is retried (not processed); the 500 that follows is not, so no SMS can be sent twice.
        #expect(await server.apiRequests == 2)
        #expect(sleeper.sleeps.value.count == 1)
    }

    @Test func aServerThatNeverAnswersEndsUnavailableByTheDeadline() async throws {
        let server = ScriptedProve(Array(repeating: .hang, count: 8))
        let sleeper = SleepRecorder()
        let observer = ObserverRecorder()
        try await server.serve { baseURL in
            try await withProviderHTTPClient { http in
                let client = makeClient(baseURL, http, sleeper: sleeper, observer: observer)
                await #expect {
                    try await client.unifyStatus(.init(correlationId: "c-1"), deadline: .now + .milliseconds(300))
                } throws: { error in
                    guard case ProveClientError.unavailable = error else { return false }
                    return true
                }
            }
        }
    }

    @Test func aRefusedConnectionIsUnavailable() async throws {
        let sleeper = SleepRecorder()
        try await withProviderHTTPClient { http in
            // Port 1 on loopback: nothing listens there.
            let client = makeClient("http://127.0.0.1:1", http, sleeper: sleeper)
            await #expect {
                try await client.unifyStatus(.init(correlationId: "c-1"), deadline: deadline(1))
            } throws: { error in
                guard case ProveClientError.unavailable = error else { return false }
                return true
            }
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct RetryPolicyTests {
    @Test func backoffIsExponentialAndCapped() {
        let policy = RetryPolicy()
        #expect(policy.backoffCap(retry: 1) == .milliseconds(100))
        #expect(policy.backoffCap(retry: 2) == .milliseconds(200))
        #expect(policy.backoffCap(retry: 3) == .milliseconds(400))
        #expect(policy.backoffCap(retry: 5) == .milliseconds(1600))
        #expect(policy.backoffCap(retry: 6) == .seconds(2))
        #expect(policy.backoffCap(retry: 60) == .seconds(2))
    }

    @Test func jitterIsFullAndRandomized() {
        let values = Locked<[Double]>([0, 0.25, 0.999])
        let policy = RetryPolicy(random: { values.withLock { $0.removeFirst() } })
        #expect(policy.jitteredDelay(retry: 3) == .zero)
        #expect(policy.jitteredDelay(retry: 3) == .milliseconds(100))
        #expect(policy.jitteredDelay(retry: 3) <= .milliseconds(400))

        let real = RetryPolicy()
        let samples = Set((0..<50).map { _ in real.jitteredDelay(retry: 4) })
        #expect(samples.count > 1)
        #expect(samples.allSatisfy { $0 >= .zero && $0 <= .milliseconds(800) })
    }
}

@Suite(.timeLimit(.minutes(1))) struct ProveEnvironmentTests {
    @Test func mapsNamesAndURLs() {
        #expect(ProveEnvironment.baseURL(for: "uat") == "https://platform.uat.proveapis.com")
        #expect(ProveEnvironment.baseURL(for: "prod") == "https://platform.proveapis.com")
        // The names Prove's SDKs use.
        #expect(ProveEnvironment.baseURL(for: "uat-us") == "https://platform.uat.proveapis.com")
        #expect(ProveEnvironment.baseURL(for: "prod-us") == "https://platform.proveapis.com")
        #expect(
            ProveEnvironment.baseURL(for: "http://127.0.0.1:9000/sandbox/prove/")
                == "http://127.0.0.1:9000/sandbox/prove"
        )
        #expect(ProveEnvironment.baseURL(for: "https://proxy.example") == "https://proxy.example")
        #expect(ProveEnvironment.baseURL(for: "sandbox") == nil)
        #expect(ProveEnvironment.baseURL(for: "ftp://x.example") == nil)
        #expect(ProveEnvironment.baseURL(for: "") == nil)
    }
}

@Suite(.timeLimit(.minutes(1))) struct ModelTests {
    @Test func unifyRequestOmitsNilFields() throws {
        let request = UnifyRequest(
            possessionType: "desktop",
            clientRequestId: "r",
            phoneNumber: "2001004014",
            finalTargetUrl: "https://a.b"
        )
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as? [String: Any]
        #expect(
            Set(object?.keys.map { $0 } ?? []) == [
                "possessionType", "clientRequestId", "phoneNumber", "finalTargetUrl",
            ]
        )
    }

    @Test func statusResponseKeepsUnknownSuccessValues() throws {
        let json = #"{"success":"something_new","evaluation":{"risk":{"result":"fail","failureReasons":{"9132":"x"}}}}"#
        let decoded = try JSONDecoder().decode(UnifyStatusResponse.self, from: Data(json.utf8))
        #expect(decoded.success == "something_new")
        #expect(decoded.evaluation?["risk"]?.failureReasons == ["9132": "x"])
    }

    @Test(
        "An evaluation of an unexpected shape never fails the answer that carries it",
        arguments: [
            (#"{"key":"{}"}"#, ["key": EvaluationCategory(result: "{}")]),  // the SDKs' placeholder
            (
                #"{"risk":{"result":"pass","failureReasons":{"9175":7,"9176":true},"extra":[1]}}"#,
                ["risk": EvaluationCategory(result: "pass", failureReasons: ["9175": "7", "9176": "true"])]
            ),
            (#"{"risk":{"score":3}}"#, ["risk": EvaluationCategory(result: "unknown")]),
            (#"[1,2]"#, nil),
            (#""not a map""#, nil),
        ] as [(String, [String: EvaluationCategory]?)])
    func evaluationIsAnOpenMap(_ evaluation: String, _ expected: [String: EvaluationCategory]?) throws {
        let status = try JSONDecoder().decode(
            UnifyStatusResponse.self, from: Data(#"{"success":"true","evaluation":\#(evaluation)}"#.utf8))
        #expect(status.success == "true")
        #expect(status.evaluation == expected)
        let validate = try JSONDecoder().decode(
            PrefillValidateResponse.self,
            from: Data(#"{"success":true,"next":{"v3-challenge":"/v3/challenge"},"evaluation":\#(evaluation)}"#.utf8))
        #expect(validate.success && validate.evaluation == expected)
        let challenge = try JSONDecoder().decode(
            PrefillChallengeResponse.self,
            from: Data(#"{"success":true,"next":{"v3-complete":"/v3/complete"},"evaluation":\#(evaluation)}"#.utf8))
        #expect(challenge.success && challenge.evaluation == expected)
        let complete = try JSONDecoder().decode(
            PrefillCompleteResponse.self,
            from: Data(#"{"success":true,"next":{"done":"done"},"evaluation":\#(evaluation)}"#.utf8))
        #expect(complete.success && complete.evaluation == expected)
    }

    @Test func credentialsDescriptionHidesTheSecret() {
        let credentials = ProveCredentials(clientID: "id", clientSecret: "top-secret")
        #expect(!"\(credentials)".contains("top-secret"))
        #expect(ProveRedaction.maskPhone("2001004014") == "******4014")
    }
}
