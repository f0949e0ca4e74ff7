import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// `ProveClient` over HTTP: OAuth2 token caching, one token refresh on 401, and the retries and timeouts of
/// `ProviderTransport`.
///
/// Retries (R3.3): `unify-status`, `unify-bind` and `token` are reads or idempotent, so they are retried on
/// timeouts, connection errors, 5xx and 429. `unify` creates a session and sends an SMS, so it is retried only
/// when the request cannot have been processed: 429, 503, or a failure to connect.
/// Pre-Fill follows the same rule: `start` sends an SMS like `unify`, so it is retried only as `unify` is;
/// `validate`, `challenge` and `complete` send none, so they are retried as `unify-status` is (a repeat of a
/// step Prove already took answers 403 8003, step out of order, never a second SMS or a second flow).
/// Other 4xx are never retried (a 401 from an API call triggers one token refresh and one more call).
///
/// `now` is the client's clock: the token cache and the time left before a deadline are computed with it.
public final class HTTPProveClient: ProveClient {
    private let baseURL: String
    private let credentials: ProveCredentials
    /// Pre-Fill's own credentials, when its project is not Unify's: at Prove each product has its project,
    /// and a product's calls need that project's token (8009 otherwise).
    private let prefillCredentials: ProveCredentials?
    private let transport: ProviderTransport
    private let logger: Logger
    private let now: @Sendable () -> ContinuousClock.Instant
    private let tokens = TokenCache()
    private let prefillTokens = TokenCache()

    /// Tokens are refreshed this long before Prove says they expire.
    static let tokenRefreshMargin: Duration = .seconds(60)

    public init(
        baseURL: String,
        credentials: ProveCredentials,
        prefillCredentials: ProveCredentials? = nil,
        httpClient: ProviderHTTPClient,
        retry: RetryPolicy = .init(),
        observer: (any ProveCallObserver)? = nil,
        logger: Logger,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.credentials = credentials
        self.prefillCredentials = prefillCredentials
        var observe: (@Sendable (String, String, Duration) -> Void)?
        if let observer { observe = { observer.proveCall(endpoint: $0, status: $1, duration: $2) } }
        self.transport = ProviderTransport(
            provider: "Prove", httpClient: httpClient, retry: retry, observe: observe, now: now)
        self.logger = logger
        self.now = now
    }

    // MARK: ProveClient

    public func unify(_ request: UnifyRequest, deadline: ContinuousClock.Instant) async throws -> UnifyResponse {
        try await apiCall(endpoint: .unify, body: request, deadline: deadline)
    }

    public func unifyStatus(_ request: UnifyStatusRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try await apiCall(endpoint: .unifyStatus, body: request, deadline: deadline)
    }

    public func unifyBind(_ request: UnifyBindRequest, deadline: ContinuousClock.Instant) async throws
        -> UnifyStatusResponse
    {
        try await apiCall(endpoint: .unifyBind, body: request, deadline: deadline)
    }

    public func prefillStart(_ request: PrefillStartRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillStartResponse
    {
        try await apiCall(endpoint: .start, body: request, deadline: deadline)
    }

    public func prefillValidate(_ request: PrefillValidateRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillValidateResponse
    {
        try await apiCall(endpoint: .validate, body: request, deadline: deadline)
    }

    public func prefillChallenge(_ request: PrefillChallengeRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillChallengeResponse
    {
        try await apiCall(endpoint: .challenge, body: request, deadline: deadline)
    }

    public func prefillComplete(_ request: PrefillCompleteRequest, deadline: ContinuousClock.Instant) async throws
        -> PrefillCompleteResponse
    {
        try await apiCall(endpoint: .complete, body: request, deadline: deadline)
    }

    // MARK: Endpoints

    enum Endpoint: String, Sendable {
        case token
        case unify
        case unifyStatus = "unify-status"
        case unifyBind = "unify-bind"
        case start
        case validate
        case challenge
        case complete

        var path: String {
            switch self {
            case .token: "/token"
            default: "/v3/\(rawValue)"
            }
        }

        var isPrefill: Bool { [.start, .validate, .challenge, .complete].contains(self) }

        /// Whether repeating the request is harmless even if the first one was processed: every call but the
        /// two that send an SMS.
        var isIdempotent: Bool { self != .unify && self != .start }
    }

    // MARK: API calls

    private func apiCall<Body: Encodable, Result: Decodable>(
        endpoint: Endpoint,
        body: Body,
        deadline: ContinuousClock.Instant
    ) async throws -> Result {
        let payload: ByteBuffer
        do {
            payload = ByteBuffer(bytes: try JSONEncoder().encode(body))
        } catch {
            throw ProveClientError.unavailable(reason: "could not encode the \(endpoint.rawValue) request")
        }
        var logger = self.logger
        logger[metadataKey: "prove.endpoint"] = "\(endpoint.rawValue)"
        var refreshedToken = false
        while true {
            let (cache, credentials) = tokenSource(for: endpoint)
            let token = try await cache.token(now: now()) { [self] in
                try await self.fetchToken(credentials, deadline: deadline)
            }
            let result = try await send(endpoint, deadline: deadline, logger: logger) {
                self.makeRequest(
                    endpoint: endpoint,
                    body: payload,
                    contentType: "application/json",
                    bearer: token
                )
            }
            switch result.status {
            case 200..<300:
                do {
                    return try JSONDecoder().decode(Result.self, from: Data(result.body.readableBytesView))
                } catch {
                    logger.error(
                        "Prove answered with an undecodable body",
                        metadata: ["prove.status": "\(result.status)"]
                    )
                    throw ProveClientError.unavailable(reason: "undecodable \(endpoint.rawValue) response")
                }
            case 401 where !refreshedToken:
                logger.warning("Prove answered 401; refreshing the access token and retrying once")
                await cache.invalidate(token: token)
                refreshedToken = true
            default:
                let errorBody = Self.decodeErrorBody(result.body)
                var metadata: Logger.Metadata = ["prove.status": "\(result.status)"]
                if let code = errorBody?.code { metadata["prove.error_code"] = "\(code)" }
                // 8003 (formerly 1003) is a step called out of order, a 403 that is no credentials' fault;
                // 8009 is credentials of another Prove product than the flow's.
                if errorBody?.code == 8003 || errorBody?.code == 1003 {
                    logger.warning("Prove refused a step called out of order", metadata: metadata)
                } else if errorBody?.code == 8009 {
                    logger.error(
                        "Prove refused the credentials for this flow: they belong to another Prove product",
                        metadata: metadata)
                } else if result.status == 401 || result.status == 403 {
                    logger.error("Prove rejected the credentials: configuration or secret fault", metadata: metadata)
                } else {
                    logger.warning("Prove rejected the request", metadata: metadata)
                }
                throw ProveClientError.rejected(status: result.status, body: errorBody)
            }
        }
    }

    // MARK: Token

    /// The token cache and credentials of the project `endpoint` belongs to.
    private func tokenSource(for endpoint: Endpoint) -> (TokenCache, ProveCredentials) {
        if endpoint.isPrefill, let prefillCredentials { return (prefillTokens, prefillCredentials) }
        return (tokens, credentials)
    }

    private func fetchToken(_ credentials: ProveCredentials, deadline: ContinuousClock.Instant) async throws
        -> TokenCache.Entry
    {
        var logger = self.logger
        logger[metadataKey: "prove.endpoint"] = "token"
        let fetchStart = now()
        let form =
            "client_id=\(Self.formEncode(credentials.clientID))"
            + "&client_secret=\(Self.formEncode(credentials.clientSecret))"
            + "&grant_type=client_credentials"
        let payload = ByteBuffer(string: form)
        let result = try await send(.token, deadline: deadline, logger: logger) {
            self.makeRequest(
                endpoint: .token,
                body: payload,
                contentType: "application/x-www-form-urlencoded",
                bearer: nil
            )
        }
        guard (200..<300).contains(result.status) else {
            let errorBody = Self.decodeErrorBody(result.body)
            var metadata: Logger.Metadata = ["prove.status": "\(result.status)"]
            if let code = errorBody?.code { metadata["prove.error_code"] = "\(code)" }
            logger.error("Prove refused the access token request: check the client credentials", metadata: metadata)
            throw ProveClientError.rejected(status: result.status, body: errorBody)
        }
        let response: ProveTokenResponse
        do {
            response = try JSONDecoder().decode(ProveTokenResponse.self, from: Data(result.body.readableBytesView))
        } catch {
            logger.error("Prove answered the token request with an undecodable body")
            throw ProveClientError.unavailable(reason: "undecodable token response")
        }
        guard !response.accessToken.isEmpty else {
            throw ProveClientError.unavailable(reason: "empty access token")
        }
        let lifetime = Duration.seconds(max(response.expiresIn, 0)) - Self.tokenRefreshMargin
        logger.debug("Fetched a Prove access token", metadata: ["prove.expires_in": "\(response.expiresIn)"])
        return .init(token: response.accessToken, validUntil: fetchStart + max(lifetime, .zero))
    }

    // MARK: Transport with retries

    private func makeRequest(
        endpoint: Endpoint,
        body: ByteBuffer,
        contentType: String,
        bearer: String?
    ) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: baseURL + endpoint.path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: contentType)
        request.headers.add(name: "Accept", value: "application/json")
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        request.body = .bytes(body)
        return request
    }

    private func send(
        _ endpoint: Endpoint, deadline: ContinuousClock.Instant, logger: Logger,
        makeRequest: @Sendable () -> HTTPClientRequest
    ) async throws -> ProviderTransport.Response {
        do {
            return try await transport.send(
                endpoint: endpoint.rawValue, isIdempotent: endpoint.isIdempotent, deadline: deadline, logger: logger,
                makeRequest: makeRequest)
        } catch let failure as ProviderTransport.Unavailable {
            throw ProveClientError.unavailable(reason: failure.reason)
        }
    }

    // MARK: Helpers

    static func decodeErrorBody(_ body: ByteBuffer) -> ProveErrorBody? {
        guard body.readableBytes > 0 else { return nil }
        return try? JSONDecoder().decode(ProveErrorBody.self, from: Data(body.readableBytesView))
    }

    static func formEncode(_ value: String) -> String {
        var encoded = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += byte < 16 ? "%0\(hex)" : "%\(hex)"
            }
        }
        return encoded
    }
}
