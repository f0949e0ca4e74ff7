import Logging
import NIOHTTP1
import ProveAPI

/// `NevisClient` for the Nevis Authentication Cloud (`https://{instance}.mauth.nevis.cloud`).
///
/// - `start`: `POST /api/v1/approval` with the access key as Bearer. It starts an operation (and may send a
///   push), so it is retried only when Nevis cannot have processed it: 429, 503, or a failure to connect.
/// - `status`: `POST /api/v1/status` with `{"statusToken"}` and no `Authorization` header: the status token
///   is the credential (nevis-oob.md §2a), and the access key stays off a call that does not need it. It is a
///   read, so it is retried on timeouts, connection errors, 5xx and 429.
///
/// Logs name the endpoint, the HTTP status and the attempt; never the access key, the status token, the QR
/// code, the link or the message.
public final class AuthCloudClient: NevisClient {
    private let http: NevisHTTP
    private let accessKey: String
    private let drawQR: NevisQRDrawer?

    /// - Parameters:
    ///   - baseURL: `https://{instance}.mauth.nevis.cloud`, or `http://` on a loopback host (the simulator,
    ///     e.g. `http://127.0.0.1:8090/sandbox/nevis`).
    ///   - accessKey: `NEVIS_ACCESS_KEY`.
    ///   - observe: told of every attempt, with the endpoint "approval" or "status".
    ///   - drawQR: draws a QR code from the app link when an answer has a link and no QR code.
    /// - Throws: `NevisConfigurationError` for a base URL the client cannot use or an empty access key.
    public init(
        baseURL: String,
        accessKey: String,
        httpClient: ProviderHTTPClient,
        retry: RetryPolicy = .init(),
        observe: NevisCallObserver? = nil,
        logger: Logger,
        drawQR: NevisQRDrawer? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) throws {
        guard !accessKey.isEmpty else {
            throw NevisConfigurationError("the Nevis Authentication Cloud needs an access key (NEVIS_ACCESS_KEY)")
        }
        self.http = try NevisHTTP(
            baseURL: baseURL, backend: "authcloud", httpClient: httpClient, retry: retry, observe: observe,
            logger: logger, now: now)
        self.accessKey = accessKey
        self.drawQR = drawQR
    }

    public func start(_ approval: NevisApproval, deadline: ContinuousClock.Instant) async throws -> NevisStarted {
        let endpoint = "approval"
        let body = try await http.post(
            endpoint: endpoint,
            path: "/api/v1/approval",
            body: try NevisHTTP.encode(AuthCloudApprovalRequest(approval)),
            headers: .nevisJSON(contentType: "application/json", bearer: accessKey),
            isIdempotent: false,
            deadline: deadline,
            secrets: [accessKey, approval.message ?? ""])
        let answer = try http.decode(AuthCloudApprovalResponse.self, from: body, endpoint: endpoint)
        guard !answer.statusToken.isEmpty else {
            http.logger.error(
                "Nevis answered the approval without a status token", metadata: ["nevis.endpoint": "\(endpoint)"])
            throw NevisClientError.unavailable(reason: "approval answer without statusToken")
        }
        let presentation = NevisApprovalPresentation.fromAuthCloud(
            qrCode: answer.qrCode?.dataUri, appLink: answer.appLinkUri, drawQR: drawQR)
        return NevisStarted(
            handle: answer.statusToken, transactionId: answer.transactionId, qrCode: presentation.qrCode,
            appLink: presentation.appLink)
    }

    public func status(_ handle: String, deadline: ContinuousClock.Instant) async throws -> NevisStatus {
        let endpoint = "status"
        let body = try await http.post(
            endpoint: endpoint,
            path: "/api/v1/status",
            body: try NevisHTTP.encode(AuthCloudStatusRequest(statusToken: handle)),
            headers: .nevisJSON(contentType: "application/json", bearer: nil),
            isIdempotent: true,
            deadline: deadline,
            secrets: [accessKey, handle])
        return NevisStatus(try http.decode(AuthCloudStatusResponse.self, from: body, endpoint: endpoint))
    }
}
