import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `ProveClient` over HTTP: OAuth2 token caching, one token refresh on 401, per-attempt timeouts derived from
/// the time left before the deadline (at most `RetryPolicy.attemptTimeout`), and retries with capped
/// exponential backoff and full jitter.
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
    private let httpClient: HTTPClient
    private let retry: RetryPolicy
    private let observer: (any ProveCallObserver)?
    private let logger: Logger
    private let now: @Sendable () -> ContinuousClock.Instant
    private let tokens = TokenCache()
    private let prefillTokens = TokenCache()

    /// Response bodies larger than this are treated as a failed attempt.
    static let maxResponseBytes = 256 * 1024
    /// Tokens are refreshed this long before Prove says they expire.
    static let tokenRefreshMargin: Duration = .seconds(60)

    public init(
        baseURL: String,
        credentials: ProveCredentials,
        prefillCredentials: ProveCredentials? = nil,
        httpClient: HTTPClient,
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
        self.httpClient = httpClient
        self.retry = retry
        self.observer = observer
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

    struct HTTPResult: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: ByteBuffer
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
            let result = try await send(endpoint: endpoint, deadline: deadline, logger: logger) {
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
        let result = try await send(endpoint: .token, deadline: deadline, logger: logger) {
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

    /// Sends the request, retrying as the policy and the endpoint allow. Returns the first response that is
    /// not retried (2xx or 4xx other than 429); throws `.unavailable` when the retries or the time run out.
    private func send(
        endpoint: Endpoint,
        deadline: ContinuousClock.Instant,
        logger: Logger,
        makeRequest: @Sendable () -> HTTPClientRequest
    ) async throws -> HTTPResult {
        var attempt = 0
        while true {
            attempt += 1
            let remaining = deadline - now()
            guard remaining > .zero else {
                logger.warning("Prove call gave up: deadline reached", metadata: ["prove.attempt": "\(attempt)"])
                throw ProveClientError.unavailable(reason: "deadline reached")
            }
            let outcome = try await performAttempt(
                endpoint: endpoint, request: makeRequest(), timeout: min(remaining, retry.attemptTimeout))
            let retryReason: String
            var retryAfter: Duration?
            switch outcome {
            case .response(let result):
                let retryable =
                    result.status == 429
                    || (endpoint.isIdempotent ? (500..<600).contains(result.status) : result.status == 503)
                guard retryable else {
                    guard result.status >= 500 else { return result }
                    logger.warning(
                        "Prove call failed and is not safe to retry",
                        metadata: ["prove.attempt": "\(attempt)", "prove.status": "\(result.status)"]
                    )
                    throw ProveClientError.unavailable(reason: "HTTP \(result.status)")
                }
                retryReason = "HTTP \(result.status)"
                retryAfter = Self.retryAfter(result.headers)
            case .failure(let label, let requestNotSent):
                guard endpoint.isIdempotent || requestNotSent else {
                    logger.warning(
                        "Prove call failed and is not safe to retry",
                        metadata: ["prove.attempt": "\(attempt)", "prove.failure": "\(label)"]
                    )
                    throw ProveClientError.unavailable(reason: label)
                }
                retryReason = label
            }
            guard attempt < retry.maxAttempts else {
                logger.warning(
                    "Prove call failed; retries spent",
                    metadata: ["prove.attempt": "\(attempt)", "prove.failure": "\(retryReason)"]
                )
                throw ProveClientError.unavailable(reason: "\(retryReason) after \(attempt) attempts")
            }
            var delay = retry.jitteredDelay(retry: attempt)
            if let retryAfter { delay = max(delay, retryAfter) }
            guard now() + delay < deadline else {
                logger.warning(
                    "Prove call failed; no time left for a retry",
                    metadata: ["prove.attempt": "\(attempt)", "prove.failure": "\(retryReason)"]
                )
                throw ProveClientError.unavailable(reason: "\(retryReason); deadline reached")
            }
            logger.info(
                "Prove call failed; retrying",
                metadata: [
                    "prove.attempt": "\(attempt)", "prove.failure": "\(retryReason)",
                    "prove.retry_delay_ms": "\(delay.milliseconds)",
                ]
            )
            try await retry.sleep(delay)
        }
    }

    enum AttemptOutcome: Sendable {
        case response(HTTPResult)
        /// `label` is "timeout" or "error: …"; `requestNotSent` is true when the connection was never made.
        case failure(label: String, requestNotSent: Bool)
    }

    /// Whether an attempt's timer cancelled it.
    private final class AttemptTimer: Sendable {
        let fired = Atomic<Bool>(false)
    }

    /// One HTTP attempt, bounded by `timeout` from now, including reading the body.
    ///
    /// The client's own deadline ends at the response head, so a timer on one of its event loops cancels
    /// the attempt, body and all. (A timer, not a sleeping task: on Linux `Task.sleep` goes through
    /// libdispatch's timers; docs/memory.md.)
    private func performAttempt(
        endpoint: Endpoint,
        request: HTTPClientRequest,
        timeout: Duration
    ) async throws -> AttemptOutcome {
        let start = ContinuousClock.now
        let httpClient = self.httpClient
        let attempt = Task {
            let response = try await httpClient.execute(request, timeout: TimeAmount(timeout))
            let body = try await response.body.collect(upTo: Self.maxResponseBytes)
            return HTTPResult(status: Int(response.status.code), headers: response.headers, body: body)
        }
        let timer = AttemptTimer()
        let scheduled = httpClient.eventLoopGroup.any().scheduleTask(in: TimeAmount(timeout)) {
            timer.fired.store(true, ordering: .releasing)
            attempt.cancel()
        }
        defer { scheduled.cancel() }
        let outcome: AttemptOutcome
        do {
            let result = try await withTaskCancellationHandler {
                try await attempt.value
            } onCancel: {
                attempt.cancel()
            }
            outcome = .response(result)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            outcome =
                timer.fired.load(ordering: .acquiring)
                ? .failure(label: "timeout", requestNotSent: false) : Self.classify(error)
        }
        let status: String
        switch outcome {
        case .response(let result): status = String(result.status)
        case .failure(let label, _): status = label == "timeout" ? "timeout" : "error"
        }
        observer?.proveCall(endpoint: endpoint.rawValue, status: status, duration: ContinuousClock.now - start)
        return outcome
    }

    static func classify(_ error: any Error) -> AttemptOutcome {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return .failure(label: "timeout", requestNotSent: true)
            case .readTimeout, .deadlineExceeded, .writeTimeout:
                return .failure(label: "timeout", requestNotSent: false)
            default: return .failure(label: "error: \(error)", requestNotSent: false)
            }
        }
        if let error = error as? ChannelError, case .connectTimeout = error {
            return .failure(label: "timeout", requestNotSent: true)
        }
        let typeName = String(describing: type(of: error))
        if typeName.contains("NIOConnectionError") || typeName.contains("ConnectionRefused") {
            return .failure(label: "error: connection failed", requestNotSent: true)
        }
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED {
            return .failure(label: "error: connection refused", requestNotSent: true)
        }
        return .failure(label: "error: \(typeName)", requestNotSent: false)
    }

    // MARK: Helpers

    static func decodeErrorBody(_ body: ByteBuffer) -> ProveErrorBody? {
        guard body.readableBytes > 0 else { return nil }
        return try? JSONDecoder().decode(ProveErrorBody.self, from: Data(body.readableBytesView))
    }

    /// `Retry-After` in its delay-seconds form.
    static func retryAfter(_ headers: HTTPHeaders) -> Duration? {
        guard let value = headers.first(name: "Retry-After")?.trimmingCharacters(in: .whitespaces),
            let seconds = Int(value), seconds >= 0
        else { return nil }
        return .seconds(seconds)
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

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
