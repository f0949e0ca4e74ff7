import Foundation
import Logging
import NIOHTTP1
import ProveAPI

/// `NevisClient` for an on-premises nevisFIDO (`--nevis fido:https://HOST`).
///
/// - `start`: the Dispatch Token Service, `POST /nevisfido/token/dispatch/authentication`, with
///   `Accept: application/json`, `Content-Type: application/json;charset=UTF-8` and, when configured,
///   `NEVIS_FIDO_TOKEN` as Bearer. It creates a token and dispatches it (a push, for FCM), so it is retried
///   only when nevisFIDO cannot have processed it: 429, 503, or a failure to connect.
///   nevisFIDO answers 200 for any well-formed request: a `dispatchResult` other than `dispatched` comes back
///   as `NevisStarted.dispatchFailure`, not as an error.
/// - `status`: the Status Service, `POST /nevisfido/status` with `{"sessionId"}` (not a status token) and the
///   same `Accept` and `Content-Type`. The FIDO token is for the dispatch endpoint only and is not sent here.
///   A read: retried on timeouts, connection errors, 5xx and 429.
///
/// Logs name the endpoint, the HTTP status, the attempt and the dispatch result; never the FIDO token, the
/// session id, the dispatch token, the QR code, the link or the message.
public final class NevisFIDOClient: NevisClient {
    private let http: NevisHTTP
    private let dispatcher: NevisDispatcher
    private let fidoToken: String?
    private let drawQR: NevisQRDrawer?

    static let jsonContentType = "application/json;charset=UTF-8"
    /// The dispatcher for channel `push`.
    static let pushDispatcher = "firebase-cloud-messaging"

    /// - Parameters:
    ///   - baseURL: where nevisFIDO's `/nevisfido/…` paths are (`https://HOST`, or `http://` on a loopback
    ///     host for the simulator).
    ///   - dispatcher: the dispatcher for channel `app` (`--nevis-dispatcher`).
    ///   - fidoToken: `NEVIS_FIDO_TOKEN`, sent as Bearer to the dispatch endpoint; nil when nevisProxy does not
    ///     ask for one.
    ///   - observe: told of every attempt, with the endpoint "dispatch" or "fido-status".
    ///   - drawQR: draws the QR code of a link the dispatcher answers with (the `link` dispatcher, or a
    ///     `link-png-qr-code` answer that carries only the link).
    /// - Throws: `NevisConfigurationError` for a base URL the client cannot use.
    public init(
        baseURL: String,
        dispatcher: NevisDispatcher,
        fidoToken: String?,
        httpClient: ProviderHTTPClient,
        retry: RetryPolicy = .init(),
        observe: NevisCallObserver? = nil,
        logger: Logger,
        drawQR: NevisQRDrawer? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) throws {
        self.http = try NevisHTTP(
            baseURL: baseURL, backend: "fido", httpClient: httpClient, retry: retry, observe: observe,
            logger: logger, now: now)
        self.dispatcher = dispatcher
        self.fidoToken = fidoToken?.isEmpty == true ? nil : fidoToken
        self.drawQR = drawQR
    }

    /// The dispatch request for `approval`.
    ///
    /// Channel `push` uses the FCM dispatcher with the approval's `userId` as `dispatchTargetId`. This is the
    /// relay's assumption, not something the reference confirms: that the deployment registers each user's
    /// FCM dispatch target under the user's id. Channel `app` uses the configured QR or link dispatcher, with
    /// no dispatch target.
    ///
    /// The `context` is the JSON text of a `DispatchContext`: the username (none: usernameless) and the
    /// message as a `text/plain` transaction, base64url of its UTF-8.
    func dispatchRequest(_ approval: NevisApproval) throws -> DispatchTokenRequest {
        let transaction = approval.message.map {
            [DispatchContext.Transaction(contentType: "text/plain", content: NevisApprovalPresentation.base64URL($0))]
        }
        let context = DispatchContext(username: approval.username, transaction: transaction)
        let contextJSON: String
        do {
            contextJSON = String(decoding: try NevisHTTP.jsonEncoder.encode(context), as: UTF8.self)
        } catch {
            throw NevisClientError.unavailable(reason: "could not encode the dispatch context")
        }
        let getUafRequest = DispatchTokenRequest.GetUafRequest(op: "Auth", context: contextJSON)
        switch approval.channel {
        case .push:
            return DispatchTokenRequest(
                dispatcher: Self.pushDispatcher, dispatchTargetId: approval.userId, getUafRequest: getUafRequest)
        case .app:
            return DispatchTokenRequest(dispatcher: dispatcher.rawValue, getUafRequest: getUafRequest)
        }
    }

    /// The `dispatchResult` values nevisFIDO documents; any other is logged as "other".
    private static let knownDispatchResults: Set<String> = [
        "dispatched", "dispatchError", "dispatchTargetExpired", "dispatchTargetNotFound", "dispatcherNotFound",
        "userNotFound", "internalError",
    ]

    public func start(_ approval: NevisApproval, deadline: ContinuousClock.Instant) async throws -> NevisStarted {
        let endpoint = "dispatch"
        let request = try dispatchRequest(approval)
        let message = approval.message ?? ""
        let body = try await http.post(
            endpoint: endpoint,
            path: "/nevisfido/token/dispatch/authentication",
            body: try NevisHTTP.encode(request),
            headers: .nevisJSON(contentType: Self.jsonContentType, bearer: fidoToken),
            isIdempotent: false,
            deadline: deadline,
            secrets: [fidoToken ?? "", message, message.isEmpty ? "" : NevisApprovalPresentation.base64URL(message)])
        let answer = try http.decode(DispatchTokenResponse.self, from: body, endpoint: endpoint)
        let result = Self.knownDispatchResults.contains(answer.dispatchResult) ? answer.dispatchResult : "other"
        guard answer.dispatchResult == "dispatched" else {
            http.logger.warning(
                "nevisFIDO did not dispatch the token",
                metadata: ["nevis.endpoint": "\(endpoint)", "nevis.dispatch_result": "\(result)"])
            return NevisStarted(handle: answer.sessionId ?? "", dispatchFailure: answer.dispatchResult)
        }
        guard let sessionId = answer.sessionId, !sessionId.isEmpty else {
            http.logger.error(
                "nevisFIDO dispatched the token but answered without a session id",
                metadata: ["nevis.endpoint": "\(endpoint)"])
            throw NevisClientError.unavailable(reason: "dispatch answer without sessionId")
        }
        guard approval.channel == .app else { return NevisStarted(handle: sessionId) }
        let presentation = NevisApprovalPresentation.fromDispatcherResponse(
            answer.dispatcherInformation?.response, drawQR: drawQR)
        // A raw-payload QR code (`png-qr-code`) comes without a link; the other dispatchers give both.
        if presentation.qrCode == nil || (dispatcher != .qrCode && presentation.appLink == nil) {
            // Which form it had is told; never the content.
            http.logger.notice(
                "nevisFIDO's dispatcher answer gave no QR code or no link",
                metadata: [
                    "nevis.endpoint": "\(endpoint)", "nevis.dispatcher": "\(dispatcher.rawValue)",
                    "nevis.qr_code": "\(presentation.qrCode != nil)",
                    "nevis.app_link": "\(presentation.appLink != nil)",
                ])
        }
        return NevisStarted(handle: sessionId, qrCode: presentation.qrCode, appLink: presentation.appLink)
    }

    public func status(_ handle: String, deadline: ContinuousClock.Instant) async throws -> NevisStatus {
        let endpoint = "fido-status"
        let body = try await http.post(
            endpoint: endpoint,
            path: "/nevisfido/status",
            body: try NevisHTTP.encode(FidoStatusRequest(sessionId: handle)),
            headers: .nevisJSON(contentType: Self.jsonContentType, bearer: nil),
            isIdempotent: true,
            deadline: deadline,
            secrets: [fidoToken ?? "", handle])
        return NevisStatus(try http.decode(FidoStatusResponse.self, from: body, endpoint: endpoint))
    }
}
