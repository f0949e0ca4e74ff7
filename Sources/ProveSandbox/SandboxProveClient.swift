import Logging
import ProveAPI

/// The relay's client of its embedded sandbox: calls go to the simulator in process, with no HTTP, JSON or
/// token in between, and get the answers `/sandbox/prove` would give. While any fault is set (see
/// ``SandboxFault``), calls go over HTTP through `overHTTP` instead, so that every fault reaches the relay
/// the way it would from Prove, retries and timeouts included. Each call is reported to `observer` as an
/// HTTP call would be.
public struct SandboxProveClient: ProveClient {
    let sandbox: ProveSandbox
    let overHTTP: any ProveClient
    let observer: (any ProveCallObserver)?
    let logger: Logger

    public init(
        sandbox: ProveSandbox, overHTTP: any ProveClient, observer: (any ProveCallObserver)?, logger: Logger
    ) {
        self.sandbox = sandbox
        self.overHTTP = overHTTP
        self.observer = observer
        self.logger = logger
    }

    public func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse {
        try await call(
            .unify, deadline, inProcess: { $0.unify(request) },
            overHTTP: { try await overHTTP.unify(request, deadline: deadline) })
    }

    public func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try await call(
            .unifyStatus, deadline, inProcess: { $0.unifyStatus(request) },
            overHTTP: { try await overHTTP.unifyStatus(request, deadline: deadline) })
    }

    public func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try await call(
            .unifyBind, deadline, inProcess: { $0.unifyBind(request) },
            overHTTP: { try await overHTTP.unifyBind(request, deadline: deadline) })
    }

    public func prefillStart(_ request: PrefillStartRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillStartResponse
    {
        try await call(
            .start, deadline, inProcess: { $0.prefillStart(request) },
            overHTTP: { try await overHTTP.prefillStart(request, deadline: deadline) })
    }

    public func prefillValidate(_ request: PrefillValidateRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillValidateResponse
    {
        try await call(
            .validate, deadline, inProcess: { $0.prefillValidate(request) },
            overHTTP: { try await overHTTP.prefillValidate(request, deadline: deadline) })
    }

    public func prefillChallenge(_ request: PrefillChallengeRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillChallengeResponse
    {
        try await call(
            .challenge, deadline, inProcess: { $0.prefillChallenge(request) },
            overHTTP: { try await overHTTP.prefillChallenge(request, deadline: deadline) })
    }

    public func prefillComplete(_ request: PrefillCompleteRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillCompleteResponse
    {
        try await call(
            .complete, deadline, inProcess: { $0.prefillComplete(request) },
            overHTTP: { try await overHTTP.prefillComplete(request, deadline: deadline) })
    }

    private func call<Body: Encodable & Sendable>(
        _ endpoint: ProveSandbox.APIEndpoint,
        _ deadline: ContinuousClock.Instant,
        inProcess answer: @Sendable (isolated ProveSandbox) -> SandboxAnswer<Body>,
        overHTTP: () async throws -> Body
    ) async throws -> Body {
        guard deadline > .now else { throw ProveClientError.unavailable(reason: "deadline reached") }
        let start = ContinuousClock.now
        guard let answer = await sandbox.inProcess(endpoint, answer) else { return try await overHTTP() }
        let endpoint = endpoint.rawValue
        switch answer {
        case .ok(let body):
            observer?.proveCall(endpoint: endpoint, status: "200", duration: .now - start)
            return body
        case .error(let status, let body):
            observer?.proveCall(endpoint: endpoint, status: String(status), duration: .now - start)
            logger.warning(
                "Prove rejected the request",
                metadata: [
                    "prove.endpoint": "\(endpoint)", "prove.status": "\(status)",
                    "prove.error_code": "\(body.code.map(String.init) ?? "none")",
                ])
            throw ProveClientError.rejected(status: status, body: body)
        }
    }
}
