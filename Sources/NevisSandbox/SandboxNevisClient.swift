import Logging
import NevisAPI

/// The relay's client of its embedded Nevis sandbox, with Authentication Cloud's semantics (the handle is
/// the `statusToken`): calls go to the simulator in process, with no HTTP or JSON in between, and get the
/// answers `/sandbox/nevis/api/v1/…` would give. While any fault is set (``NevisFault``), calls go over
/// HTTP through `overHTTP` instead, so that every fault reaches the relay as it would from Nevis, retries
/// and timeouts included. Each in-process call is reported to `observer` as an HTTP call would be.
public struct SandboxNevisClient: NevisClient {
    let sandbox: NevisSandbox
    let overHTTP: any NevisClient
    let observer: NevisCallObserver?
    let logger: Logger

    public init(sandbox: NevisSandbox, overHTTP: any NevisClient, observer: NevisCallObserver?, logger: Logger) {
        self.sandbox = sandbox
        self.overHTTP = overHTTP
        self.observer = observer
        self.logger = logger
    }

    public func start(_ approval: NevisApproval, deadline: ContinuousClock.Instant) async throws -> NevisStarted {
        guard deadline > .now else { throw NevisClientError.unavailable(reason: "deadline reached") }
        let began = ContinuousClock.now
        let request = AuthCloudApprovalRequest(approval)
        guard let answer = sandbox.inProcess(.approval, { $0.approval(request) }) else {
            return try await overHTTP.start(approval, deadline: deadline)
        }
        let body = try settle(answer, .approval, since: began)
        return NevisStarted(
            handle: body.statusToken, transactionId: body.transactionId, qrCode: body.qrCode?.dataUri,
            appLink: body.appLinkUri)
    }

    public func status(_ handle: String, deadline: ContinuousClock.Instant) async throws -> NevisStatus {
        guard deadline > .now else { throw NevisClientError.unavailable(reason: "deadline reached") }
        let began = ContinuousClock.now
        let request = AuthCloudStatusRequest(statusToken: handle)
        guard let answer = sandbox.inProcess(.status, { $0.authCloudStatus(request) }) else {
            return try await overHTTP.status(handle, deadline: deadline)
        }
        return NevisStatus(try settle(answer, .status, since: began))
    }

    /// The body of an answer, or the error an HTTP client would throw for it; reported either way.
    private func settle<Body: Encodable & Sendable>(
        _ answer: NevisAnswer<Body>, _ endpoint: NevisEndpoint, since began: ContinuousClock.Instant
    )
        throws(NevisClientError) -> Body
    {
        switch answer {
        case .ok(let body):
            observer?(endpoint.rawValue, "200", .now - began)
            return body
        case .error(let status, let message):
            observer?(endpoint.rawValue, String(status), .now - began)
            logger.warning(
                "Nevis rejected the request",
                metadata: ["nevis.endpoint": "\(endpoint.rawValue)", "nevis.status": "\(status)"])
            guard status < 500 else { throw .unavailable(reason: "Nevis answered \(status)") }
            throw .rejected(status: status, detail: message)
        }
    }
}

extension NevisSandbox {
    /// One of the relay's own calls, answered in process by ``SandboxNevisClient`` and counted as a request;
    /// nil while any fault is set, so that the call goes over HTTP, where faults act.
    func inProcess<Body: Encodable & Sendable>(_ endpoint: NevisEndpoint, _ answer: (NevisSandbox) -> NevisAnswer<Body>)
        -> NevisAnswer<Body>?
    {
        guard state.withLock({ $0.faults.faults.isEmpty }) else { return nil }
        count(endpoint.rawValue)
        return answer(self)
    }
}
