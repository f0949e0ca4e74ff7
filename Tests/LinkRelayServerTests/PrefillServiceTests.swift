import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import ProveAPI
import ProveSandbox
import Testing

@testable import LinkRelayServer

/// `SessionService` on Pre-Fill sessions, without sockets: the memory store, a manual clock, and the
/// sandbox in process. Milo Pinson (2001001695), the short-term user, passes each step, tapped or not.
@Suite("SessionService: Pre-Fill", .timeLimit(.minutes(1)))
struct PrefillServiceTests {
    static let milo = "2001001695"
    static let authId = SessionServiceTests.authId

    let clock = ManualClock()
    let store = SessionServiceTests.FailingStore()
    let parts: SessionParts
    var service: SessionService { parts.service }

    init() {
        let sandbox = ProveSandbox(publicBaseURL: "https://relay.example")
        parts = SessionParts(
            store: store, bus: SessionServiceTests.RecordingBus(),
            prove: SandboxProveClient(
                sandbox: sandbox, overHTTP: ScriptedProve(), observer: nil, logger: quietLogger()),
            clock: clock, metrics: RelayMetrics(), logger: quietLogger(), publicURL: "https://relay.example",
            defaultHold: 180)
    }

    static func request(ssn: String = "0596") -> CreateSessionRequest {
        var request = CreateSessionRequest(phoneNumber: milo)
        request.flow = .prefill
        request.ssn = ssn
        return request
    }

    /// Creates Milo's session and lands on it; the verifier's `/v3/validate` makes it verified.
    func verified() async throws -> Session {
        let session = try await service.create(Self.request(), idempotencyKey: nil)
        _ = try await service.land(
            linkKey: session.linkKey, parameters: LandingParameters(asc: true, authId: Self.authId))
        await parts.verifier.verify(sessionID: session.id)
        return try #require(try await store.session(id: session.id))
    }

    @Test("A Pre-Fill create keeps a digest of its request, never the dob or SSN; a repeat is still recognised")
    func fingerprintIsADigest() async throws {
        let session = try await service.create(Self.request(), idempotencyKey: "order-7")
        #expect(session.flow == .prefill)
        let stored = try #require(try await store.session(id: session.id))
        #expect(stored.requestFingerprint.hasPrefix("sha256:"))
        #expect(!stored.requestFingerprint.contains("0596"))
        #expect(try await service.create(Self.request(), idempotencyKey: "order-7").id == session.id)
        await #expect(throws: SessionError.idempotencyKeyReused) {
            try await service.create(Self.request(ssn: "1234"), idempotencyKey: "order-7")
        }
    }

    @Test("A landing's /v3/validate decides the result and keeps Prove's next; the steps then follow it")
    func validateThenSteps() async throws {
        let session = try await verified()
        #expect(session.state == .verified)
        #expect(session.result?.success == true)
        #expect(session.result?.proveSuccess == "true")
        #expect(session.prefill?.offeredSteps == [.challenge])
        let found = try await service.challenge(sessionID: session.id, tenant: Tenant.defaultName, .init())
        #expect(found.individual?.lastName == "Pinson")
        let stored = try #require(try await store.session(id: session.id))
        #expect(stored.prefill?.individual?.dob == "1981-01-17")
        #expect(stored.prefill?.offeredSteps == [.complete])
        let done = try await service.complete(
            sessionID: session.id, tenant: Tenant.defaultName, try #require(stored.prefill?.individual))
        #expect(done.success)
        #expect(try await store.session(id: session.id)?.prefill?.completed == true)
    }

    @Test("A step after Prove's 15-minute flow is refused before Prove is asked")
    func flowLifetime() async throws {
        let session = try await verified()
        clock.advance(by: SessionService.proveFlowLifetime)
        await #expect(throws: SessionError.self) {
            _ = try await service.challenge(sessionID: session.id, tenant: Tenant.defaultName, .init())
        }
        #expect(try await store.session(id: session.id)?.prefill?.offeredSteps == [.challenge])
    }

    @Test("/v3/validate is asked once: when storing its answer fails, the answer is kept and stored later")
    func validateAnsweredOnce() async throws {
        let session = try await service.create(Self.request(), idempotencyKey: nil)
        _ = try await service.land(
            linkKey: session.linkKey, parameters: LandingParameters(asc: true, authId: Self.authId))
        store.failUpdates.withLock { $0 = true }
        async let verifying: Void = parts.verifier.verify(sessionID: session.id)
        await clock.waitForSleepers(1)
        store.failUpdates.withLock { $0 = false }
        clock.advance(by: 2)
        await verifying
        // A second /v3/validate would have been refused (403 8003, step out of order): failed.
        let stored = try #require(try await store.session(id: session.id))
        #expect(stored.state == .verified)
        #expect(stored.prefill?.offeredSteps == [.challenge])
    }
}
