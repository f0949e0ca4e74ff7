import Logging
import ProveAPI

/// The client for the configured backend (`--nevis`).
///
/// - Parameters:
///   - accessKey: `NEVIS_ACCESS_KEY`, required for the Authentication Cloud (ignored for nevisFIDO).
///   - fidoToken: `NEVIS_FIDO_TOKEN`, the Bearer for nevisFIDO's dispatch endpoint, if it asks for one
///     (ignored for the Authentication Cloud).
///   - observe: told of every attempt ("approval", "status", "dispatch", "fido-status").
///   - drawQR: draws the QR code of a link when the backend answers with a link alone.
/// - Throws: `NevisConfigurationError` (a base URL the client cannot use, a missing access key), with a
///   message fit for one start-up line.
public func makeNevisClient(
    backend: NevisBackend,
    accessKey: String?,
    fidoToken: String?,
    httpClient: ProviderHTTPClient,
    retry: RetryPolicy = .init(),
    observe: NevisCallObserver? = nil,
    logger: Logger,
    drawQR: NevisQRDrawer? = nil
) throws -> any NevisClient {
    switch backend {
    case .authCloud(let baseURL):
        return try AuthCloudClient(
            baseURL: baseURL, accessKey: accessKey ?? "", httpClient: httpClient, retry: retry, observe: observe,
            logger: logger, drawQR: drawQR)
    case .fido(let baseURL, let dispatcher):
        return try NevisFIDOClient(
            baseURL: baseURL, dispatcher: dispatcher, fidoToken: fidoToken, httpClient: httpClient, retry: retry,
            observe: observe, logger: logger, drawQR: drawQR)
    }
}
