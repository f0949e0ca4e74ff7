import Foundation
import Logging
import NevisAPI
import ProveSandbox
import Synchronization
import Testing

@testable import NevisSandbox

/// The relay's in-process client of its embedded Nevis sandbox.
@Suite(.timeLimit(.minutes(1))) struct SandboxNevisClientTests {
    /// Stands in for the HTTP client: counts the calls that reach it.
    final class OverHTTP: NevisClient {
        let calls = Mutex(0)

        func start(_ approval: NevisApproval, deadline: ContinuousClock.Instant) async throws -> NevisStarted {
            calls.withLock { $0 += 1 }
            return NevisStarted(handle: "over-http")
        }

        func status(_ handle: String, deadline: ContinuousClock.Instant) async throws -> NevisStatus {
            calls.withLock { $0 += 1 }
            return NevisStatus(progress: .pending, status: "pending")
        }
    }

    /// What the observer saw: "endpoint status" per call.
    final class Calls: Sendable {
        let seen = Mutex<[String]>([])
        var all: [String] { seen.withLock { $0 } }

        var observer: NevisCallObserver {
            { endpoint, status, _ in self.seen.withLock { $0.append("\(endpoint) \(status)") } }
        }
    }

    static let deadline = ContinuousClock.now + .seconds(60)

    static func client(_ sandbox: NevisSandbox, _ overHTTP: OverHTTP, _ calls: Calls) -> SandboxNevisClient {
        SandboxNevisClient(
            sandbox: sandbox, overHTTP: overHTTP, observer: calls.observer, logger: Logger(label: "test"))
    }

    @Test func answersInProcessLikeTheRoutes() async throws {
        let http = NevisTestClient()
        let overHTTP = OverHTTP()
        let calls = Calls()
        let client = Self.client(http.sandbox, overHTTP, calls)
        let started = try await client.start(
            NevisApproval(username: "alice", message: "Pay CHF 120.00"), deadline: Self.deadline)
        #expect(started.qrCode?.hasPrefix("data:image/png;base64,") == true)
        #expect(started.appLink?.hasPrefix("\(publicBase)/sandbox/nevis/open?dispatchTokenResponse=") == true)
        #expect(started.transactionId.flatMap(UUID.init(uuidString:)) != nil)
        #expect(started.dispatchFailure == nil)
        let progress = try await (1...3).asyncMap { _ in
            try await client.status(started.handle, deadline: Self.deadline).progress
        }
        #expect(progress == [.pending, .pending, .succeeded])
        // The routes see the same operations: the handle is the status token.
        let overTheRoute = try await http.authStatus(started.handle)
        #expect(overTheRoute.status == "succeeded" && overTheRoute.userId == alice.userId)
        #expect(calls.all == ["approval 200", "status 200", "status 200", "status 200"])
        #expect(overHTTP.calls.withLock { $0 } == 0)
        #expect(http.sandbox.callCount("approval") == 1 && http.sandbox.callCount("status") == 4)
    }

    @Test func aPushForDaveWaitsOnHisPage() async throws {
        let http = NevisTestClient()
        let client = Self.client(http.sandbox, OverHTTP(), Calls())
        let started = try await client.start(
            NevisApproval(username: "dave", message: "Sign in to the bank", channel: .push), deadline: Self.deadline)
        #expect(started.qrCode == nil && started.appLink == nil)
        let page = try await http.page("user=dave")
        #expect(page.text.contains("Sign in to the bank"))
        let token = try #require(http.sandbox.pendingOperations(of: dave).first?.token)
        #expect(try await http.answer(token: token, "approve", user: "dave").status == 200)
        let status = try await client.status(started.handle, deadline: Self.deadline)
        #expect(status.progress == .succeeded && status.username == "dave")
    }

    @Test func rejectionsAreThrownAsAnHTTPClientWould() async throws {
        let http = NevisTestClient()
        let calls = Calls()
        let client = Self.client(http.sandbox, OverHTTP(), calls)
        await #expect(
            throws: NevisClientError.rejected(status: 400, detail: "the user has no registered authenticator")
        ) {
            _ = try await client.start(NevisApproval(username: "carol"), deadline: Self.deadline)
        }
        await #expect(throws: NevisClientError.rejected(status: 404, detail: "no user with this username")) {
            _ = try await client.start(NevisApproval(username: "mallory"), deadline: Self.deadline)
        }
        await #expect(
            throws: NevisClientError.rejected(status: 400, detail: "username or userId is required for channel push")
        ) {
            _ = try await client.start(NevisApproval(channel: .push), deadline: Self.deadline)
        }
        #expect(calls.all == ["approval 400", "approval 404", "approval 400"])
        let unknown = try await client.status("never-issued", deadline: Self.deadline)
        #expect(unknown.progress == .unknown)
    }

    @Test func usernamelessReportsTheAccountOnceSucceeded() async throws {
        let http = NevisTestClient()
        let client = Self.client(http.sandbox, OverHTTP(), Calls())
        let started = try await client.start(NevisApproval(), deadline: Self.deadline)
        #expect(try await client.status(started.handle, deadline: Self.deadline).userId == nil)
        _ = try await http.answer(token: try token(in: try #require(started.appLink)), "approve")
        let status = try await client.status(started.handle, deadline: Self.deadline)
        #expect(status.progress == .succeeded && status.userId == erin.userId && status.username == "erin")
    }

    @Test func goesOverHTTPWhileAFaultIsSet() async throws {
        let http = NevisTestClient()
        let overHTTP = OverHTTP()
        let calls = Calls()
        let client = Self.client(http.sandbox, overHTTP, calls)
        try http.sandbox.setFault(.error(status: 503, times: 1), for: .dispatch)
        #expect(try await client.start(NevisApproval(username: "alice"), deadline: Self.deadline).handle == "over-http")
        #expect(try await client.status("over-http", deadline: Self.deadline).progress == .pending)
        #expect(overHTTP.calls.withLock { $0 } == 2)
        // The fault's own calls are the HTTP client's to report.
        #expect(calls.all.isEmpty)
        http.sandbox.clearFaults()
        #expect(try await client.start(NevisApproval(username: "alice"), deadline: Self.deadline).handle != "over-http")
    }

    @Test func aPassedDeadlineIsUnavailable() async throws {
        let client = Self.client(NevisTestClient().sandbox, OverHTTP(), Calls())
        await #expect(throws: NevisClientError.unavailable(reason: "deadline reached")) {
            _ = try await client.start(NevisApproval(username: "alice"), deadline: .now - .seconds(1))
        }
    }

    @Test func theApprovalItAsksFor() {
        let named = AuthCloudApprovalRequest(
            NevisApproval(userId: dave.userId, message: "Pay", channel: .push))
        #expect(named == AuthCloudApprovalRequest(channel: "push", userId: dave.userId, prompt: true, message: "Pay"))
        let usernameless = AuthCloudApprovalRequest(NevisApproval())
        #expect(usernameless == AuthCloudApprovalRequest(channel: "app"))
    }
}
