import Foundation
import Logging
import ProveAPI
import Testing

@testable import ProveSandbox

/// The relay's in-process client of its embedded sandbox.
@Suite(.timeLimit(.minutes(1))) struct SandboxProveClientTests {
    /// Stands in for the HTTP client: counts the calls that reach it and answers `pending`.
    final class OverHTTP: ProveClient, @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        var calls: Int { lock.withLock { count } }

        private func called() { lock.withLock { count += 1 } }

        func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse {
            called()
            return UnifyResponse(success: "pending", correlationId: "over-http")
        }

        func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
            -> UnifyStatusResponse
        {
            called()
            return UnifyStatusResponse(success: "pending")
        }

        func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
            -> UnifyStatusResponse
        {
            called()
            return UnifyStatusResponse(success: "pending")
        }

        func prefillStart(_ request: PrefillStartRequest, deadline: ContinuousClock.Instant) async throws
            -> PrefillStartResponse
        {
            called()
            return PrefillStartResponse(
                next: ["v3-validate": "/v3/validate"], authToken: "eyJ", correlationId: "over-http")
        }

        // The tests fault only Unify and `start`: the other steps never go over HTTP here.
        func prefillValidate(_ request: PrefillValidateRequest, deadline: ContinuousClock.Instant) async throws
            -> PrefillValidateResponse
        { throw ProveClientError.rejected(status: 400, body: nil) }

        func prefillChallenge(_ request: PrefillChallengeRequest, deadline: ContinuousClock.Instant) async throws
            -> PrefillChallengeResponse
        { throw ProveClientError.rejected(status: 400, body: nil) }

        func prefillComplete(_ request: PrefillCompleteRequest, deadline: ContinuousClock.Instant) async throws
            -> PrefillCompleteResponse
        { throw ProveClientError.rejected(status: 400, body: nil) }
    }

    final class Calls: ProveCallObserver, @unchecked Sendable {
        private let lock = NSLock()
        private var seen: [String] = []
        var all: [String] { lock.withLock { seen } }

        func proveCall(endpoint: String, status: String, duration: Duration) {
            lock.withLock { seen.append("\(endpoint) \(status)") }
        }
    }

    static let deadline = ContinuousClock.now + .seconds(60)
    static let desktop = UnifyRequest(
        possessionType: "desktop", clientRequestId: "r1", phoneNumber: "2001004014",
        finalTargetUrl: "https://relay.example/l/abc")

    @Test func answersInProcessLikeTheHTTPSandbox() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let overHTTP = OverHTTP()
        let calls = Calls()
        let client = SandboxProveClient(
            sandbox: sandbox, overHTTP: overHTTP, observer: calls, logger: Logger(label: "test"))

        let started = try await client.unify(Self.desktop, deadline: Self.deadline)
        #expect(started.success == "pending")
        let status = UnifyStatusRequest(correlationId: started.correlationId, clientRequestId: "r1")
        #expect(try await client.unifyStatus(status, deadline: Self.deadline).success == "pending")

        // The phone opens the Instant Link: Prove's answer turns to true.
        let link = try #require(await sandbox.outbox(phoneNumber: "2001004014").last?.link)
        _ = await sandbox.openLink(id: String(link.split(separator: "/").last!), decline: false)
        let passed = try await client.unifyStatus(status, deadline: Self.deadline)
        #expect(passed.success == "true")
        #expect(passed.phoneNumber == "2001004014")

        // Prove's 400s arrive as rejections with Prove's code, as over HTTP.
        var unknown = Self.desktop
        unknown.phoneNumber = "2005550100"
        await #expect(
            throws: ProveClientError.rejected(
                status: 400, body: ProveErrorBody(code: 8007, message: "no test user found matching the phone number"))
        ) {
            try await client.unify(unknown, deadline: Self.deadline)
        }

        #expect(overHTTP.calls == 0)
        #expect(await sandbox.tokensIssued == 0, "no HTTP, so no token")
        #expect(await sandbox.callCount("unify") == 2)
        #expect(await sandbox.callCount("unify-status") == 2)
        #expect(calls.all == ["unify 200", "unify-status 200", "unify-status 200", "unify 400"])
    }

    @Test func whileAFaultIsSetCallsGoOverHTTP() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let overHTTP = OverHTTP()
        let client = SandboxProveClient(
            sandbox: sandbox, overHTTP: overHTTP, observer: nil, logger: Logger(label: "test"))
        try await sandbox.setFault(.latency(.milliseconds(1)), for: .token)
        #expect(try await client.unify(Self.desktop, deadline: Self.deadline).correlationId == "over-http")
        #expect(overHTTP.calls == 1)
        #expect(await sandbox.callCount("unify") == 0)

        await sandbox.clearFaults()
        #expect(try await client.unify(Self.desktop, deadline: Self.deadline).correlationId != "over-http")
        #expect(overHTTP.calls == 1)
    }

    @Test func aPassedDeadlineIsUnavailable() async throws {
        let sandbox = ProveSandbox(publicBaseURL: publicBase)
        let client = SandboxProveClient(
            sandbox: sandbox, overHTTP: OverHTTP(), observer: nil, logger: Logger(label: "test"))
        await #expect(throws: ProveClientError.unavailable(reason: "deadline reached")) {
            try await client.unify(Self.desktop, deadline: .now - .seconds(1))
        }
        #expect(await sandbox.callCount("unify") == 0)
    }
}
