import AsyncHTTPClient
import Foundation
import LinkRelayTestSupport
import Logging
import ProveAPI
import ProveSandbox
import Testing

/// Happy paths of `HTTPProveClient` against the sandbox served live.
@Suite(.timeLimit(.minutes(1))) struct HTTPProveClientSandboxTests {
    @Test func desktopInstantLinkFlowEndToEnd() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http)
                let unify = try await client.unify(
                    UnifyRequest(
                        possessionType: "desktop",
                        clientRequestId: "req-42",
                        phoneNumber: "2001004014",
                        finalTargetUrl: "https://relay.test/instant-link/done"
                    ),
                    deadline: deadline()
                )
                #expect(unify.success == "pending")
                #expect(unify.authToken != nil)
                let pending = try await client.unifyStatus(
                    .init(correlationId: unify.correlationId),
                    deadline: deadline()
                )
                #expect(pending.success == "pending")

                let link = try #require(await sandbox.outbox(phoneNumber: "2001004014").first?.link)
                let linkPath = String(link.dropFirst("http://relay.test".count))
                var open = HTTPClientRequest(
                    url: baseURL.replacingOccurrences(of: "/sandbox/prove", with: "") + linkPath
                )
                open.method = .GET
                let redirect = try await HTTPClient(
                    eventLoopGroupProvider: .singleton,
                    configuration: .init(redirectConfiguration: .disallow)
                ).executeThenShutdown(open)
                #expect(redirect.status == 302)
                #expect(redirect.location?.hasPrefix("https://relay.test/instant-link/done?asc=true&authId=") == true)

                let passed = try await client.unifyStatus(
                    .init(correlationId: unify.correlationId, clientRequestId: "req-42"),
                    deadline: deadline()
                )
                #expect(passed.success == "true")
                #expect(passed.proveId != nil)
                #expect(passed.phoneNumber == "2001004014")
                #expect(passed.evaluation?["authentication"] == EvaluationCategory(result: "pass"))
            }
        }
    }

    @Test("Pointed at the sandbox's root, as Prove's server SDKs are, the client gets its token and flows")
    func sandboxAtTheRoot() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let root = baseURL.replacingOccurrences(of: "/sandbox/prove", with: "")
                let client = sandboxClient(root, http)
                let unify = try await client.unify(
                    UnifyRequest(
                        possessionType: "desktop", clientRequestId: "r", phoneNumber: "2001004014",
                        finalTargetUrl: "https://relay.test/done"),
                    deadline: deadline())
                #expect(unify.success == "pending")
                let start = try await client.prefillStart(
                    PrefillStartRequest(
                        flowType: "desktop", finalTargetUrl: "https://relay.test/done", phoneNumber: "2001001695"),
                    deadline: deadline())
                #expect(start.next == ["v3-validate": "/v3/validate"])
            }
        }
    }

    @Test("With a project per product, Unify's calls use Unify's token and Pre-Fill's their own")
    func credentialsPerProduct() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                func credentials(_ project: ProveSandbox.Project) -> ProveCredentials {
                    ProveCredentials(clientID: project.clientID, clientSecret: project.clientSecret)
                }
                let unifyRequest = UnifyRequest(
                    possessionType: "desktop", clientRequestId: "r", phoneNumber: "2001004014",
                    finalTargetUrl: "https://relay.test/done")
                let startRequest = PrefillStartRequest(
                    flowType: "desktop", finalTargetUrl: "https://relay.test/done", phoneNumber: "2001001695")
                let unifyOnly = sandboxClient(baseURL, http, credentials: credentials(.unify))
                await #expect(throws: ProveClientError.self) {
                    try await unifyOnly.prefillStart(startRequest, deadline: deadline())
                }
                let both = HTTPProveClient(
                    baseURL: baseURL, credentials: credentials(.unify), prefillCredentials: credentials(.prefill),
                    httpClient: http, logger: quietLogger())
                #expect(try await both.unify(unifyRequest, deadline: deadline()).success == "pending")
                #expect(try await both.prefillStart(startRequest, deadline: deadline()).next["v3-validate"] != nil)
                _ = try await both.unify(unifyRequest, deadline: deadline())
                _ = try await both.prefillStart(startRequest, deadline: deadline())
                #expect(await sandbox.tokensIssued == 3, "one token per project, each kept for the next call")
            }
        }
    }

    @Test func tokenIsCachedAcrossCalls() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http)
                let unify = try await client.unify(
                    UnifyRequest(
                        possessionType: "desktop",
                        clientRequestId: "r",
                        phoneNumber: "2001004018",
                        finalTargetUrl: "https://relay.test/done"
                    ),
                    deadline: deadline()
                )
                let status = try await client.unifyStatus(
                    .init(correlationId: unify.correlationId),
                    deadline: deadline()
                )
                #expect(status.success == "true")
            }
        }
        #expect(await sandbox.tokensIssued == 1)
        #expect(await sandbox.callCount("token") == 1)
    }

    @Test func concurrentCallersShareOneTokenFetch() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for i in 0..<8 {
                        group.addTask {
                            let response = try await client.unify(
                                UnifyRequest(
                                    possessionType: "none",
                                    clientRequestId: "r\(i)",
                                    phoneNumber: "2001004018"
                                ),
                                deadline: deadline()
                            )
                            #expect(response.success == "pending")
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        #expect(await sandbox.tokensIssued == 1)
    }

    @Test func tokenIsRefreshedSixtySecondsBeforeItExpires() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test", tokenLifetime: 3600)
        let clock = OffsetClock()
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http, now: clock.now)
                let request = UnifyRequest(possessionType: "none", clientRequestId: "r", phoneNumber: "2001004014")
                _ = try await client.unify(request, deadline: deadline(now: clock.now()))
                // 30 s either side of the refresh point, so the time the calls take cannot matter.
                clock.offset.withLock { $0 = .seconds(3600 - 90) }
                _ = try await client.unify(request, deadline: deadline(now: clock.now()))
                #expect(await sandbox.tokensIssued == 1)
                clock.offset.withLock { $0 = .seconds(3600 - 30) }
                _ = try await client.unify(request, deadline: deadline(now: clock.now()))
                #expect(await sandbox.tokensIssued == 2)
                _ = try await client.unify(request, deadline: deadline(now: clock.now()))
                #expect(await sandbox.tokensIssued == 2)
            }
        }
    }

    @Test func a401RefreshesTheTokenAndRetriesOnce() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http)
                let unify = try await client.unify(
                    UnifyRequest(possessionType: "none", clientRequestId: "r", phoneNumber: "2001004014"),
                    deadline: deadline()
                )
                await sandbox.revokeAllTokens()
                let status = try await client.unifyStatus(
                    .init(correlationId: unify.correlationId),
                    deadline: deadline()
                )
                #expect(status.success == "possession_required")
                #expect(await sandbox.tokensIssued == 2)
                #expect(await sandbox.callCount("unify-status") == 2)

                let bound = try await client.unifyBind(
                    .init(correlationId: unify.correlationId, phoneNumber: "2001004014"),
                    deadline: deadline()
                )
                #expect(bound.success == "true")
                #expect(await sandbox.tokensIssued == 2)
            }
        }
    }

    @Test func wrongCredentialsAreRejectedWithoutRetry() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(
                    baseURL, http, credentials: .init(clientID: "sandbox-client", clientSecret: "nope"))
                await #expect(
                    throws: ProveClientError.rejected(status: 401, body: .init(code: 8002, message: "not authorized"))
                ) {
                    try await client.unifyStatus(.init(correlationId: "c"), deadline: deadline())
                }
            }
        }
        #expect(await sandbox.callCount("token") == 1)
        #expect(await sandbox.callCount("unify-status") == 0)
    }

    @Test func sandboxErrorsAreDecoded() async throws {
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http)
                let expected = ProveClientError.rejected(
                    status: 400,
                    body: .init(code: 8007, message: "no test user found matching the phone number")
                )
                await #expect(throws: expected) {
                    try await client.unify(
                        UnifyRequest(
                            possessionType: "desktop",
                            clientRequestId: "r",
                            phoneNumber: "5550001111",
                            finalTargetUrl: "https://relay.test/done"
                        ),
                        deadline: deadline()
                    )
                }
            }
        }
        #expect(await sandbox.callCount("unify") == 1)
    }

    @Test func logsNeverContainSecrets() async throws {
        let capture = LogCapture()
        let logger = capture.logger(label: "capture")
        let sandbox = ProveSandbox(publicBaseURL: "http://relay.test")
        let authToken = try await withLiveSandbox(sandbox) { baseURL in
            try await withProviderHTTPClient { http in
                let client = sandboxClient(baseURL, http, logger: logger)
                let unify = try await client.unify(
                    UnifyRequest(
                        possessionType: "desktop",
                        clientRequestId: "r",
                        phoneNumber: "2001004014",
                        finalTargetUrl: "https://relay.test/done"
                    ),
                    deadline: deadline()
                )
                await sandbox.revokeAllTokens()
                _ = try await client.unifyStatus(.init(correlationId: unify.correlationId), deadline: deadline())
                _ = try? await client.unify(
                    UnifyRequest(possessionType: "desktop", clientRequestId: "r", phoneNumber: "2001009999"),
                    deadline: deadline()
                )
                return unify.authToken ?? ""
            }
        }
        let all = capture.all.joined(separator: "\n")
        #expect(!capture.all.isEmpty)
        #expect(!all.contains(ProveSandbox.clientSecret))
        #expect(!all.contains("eyJ"))
        #expect(!all.contains(authToken))
        #expect(!all.contains("2001004014"))
        #expect(!all.contains("2001009999"))
    }
}

extension HTTPClient {
    fileprivate func executeThenShutdown(_ request: HTTPClientRequest) async throws -> (status: Int, location: String?)
    {
        do {
            let response = try await execute(request, timeout: .seconds(5))
            let result = (Int(response.status.code), response.headers.first(name: "Location"))
            try await shutdown()
            return result
        } catch {
            try? await shutdown()
            throw error
        }
    }
}
