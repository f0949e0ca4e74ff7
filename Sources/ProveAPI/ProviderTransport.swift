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

/// A provider's HTTP calls (Prove's, Nevis's): per-attempt timeouts derived from the time left before the
/// deadline (at most `RetryPolicy.attemptTimeout`), and retries with capped exponential backoff and full
/// jitter. A call that is safe to repeat (`isIdempotent`) is retried on timeouts, connection errors, 5xx
/// and 429; one that is not, only when the provider cannot have processed it: 429, 503, or a failure to
/// connect.
public struct ProviderTransport: Sendable {
    /// The provider as logs name it ("Prove").
    public let provider: String
    let httpClient: HTTPClient
    let retry: RetryPolicy
    /// Told of every attempt: the endpoint, the HTTP status as a string (or "timeout" / "error"), the time.
    let observe: (@Sendable (String, String, Duration) -> Void)?
    let now: @Sendable () -> ContinuousClock.Instant

    /// Response bodies larger than this are treated as a failed attempt.
    public static let maxResponseBytes = 256 * 1024

    public init(
        provider: String, httpClient: HTTPClient, retry: RetryPolicy,
        observe: (@Sendable (String, String, Duration) -> Void)?,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.provider = provider
        self.httpClient = httpClient
        self.retry = retry
        self.observe = observe
        self.now = now
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: HTTPHeaders
        public var body: ByteBuffer
    }

    /// Why a call gave up: the retries or the time ran out, or a failure that is not safe to retry.
    public struct Unavailable: Error, Sendable {
        public var reason: String
    }

    /// Sends the request, retrying as the policy and `isIdempotent` allow. Returns the first response that is
    /// not retried (2xx or 4xx other than 429); throws `Unavailable` when the retries or the time run out.
    public func send(
        endpoint: String,
        isIdempotent: Bool,
        deadline: ContinuousClock.Instant,
        logger: Logger,
        makeRequest: @Sendable () -> HTTPClientRequest
    ) async throws -> Response {
        var attempt = 0
        while true {
            attempt += 1
            let remaining = deadline - now()
            guard remaining > .zero else {
                logger.warning(
                    "\(provider) call gave up: deadline reached", metadata: ["provider.attempt": "\(attempt)"])
                throw Unavailable(reason: "deadline reached")
            }
            let outcome = try await performAttempt(
                endpoint: endpoint, request: makeRequest(), timeout: min(remaining, retry.attemptTimeout))
            let retryReason: String
            var retryAfter: Duration?
            switch outcome {
            case .response(let result):
                let retryable =
                    result.status == 429
                    || (isIdempotent ? (500..<600).contains(result.status) : result.status == 503)
                guard retryable else {
                    guard result.status >= 500 else { return result }
                    logger.warning(
                        "\(provider) call failed and is not safe to retry",
                        metadata: ["provider.attempt": "\(attempt)", "provider.status": "\(result.status)"]
                    )
                    throw Unavailable(reason: "HTTP \(result.status)")
                }
                retryReason = "HTTP \(result.status)"
                retryAfter = Self.retryAfter(result.headers)
            case .failure(let label, let requestNotSent):
                guard isIdempotent || requestNotSent else {
                    logger.warning(
                        "\(provider) call failed and is not safe to retry",
                        metadata: ["provider.attempt": "\(attempt)", "provider.failure": "\(label)"]
                    )
                    throw Unavailable(reason: label)
                }
                retryReason = label
            }
            guard attempt < retry.maxAttempts else {
                logger.warning(
                    "\(provider) call failed; retries spent",
                    metadata: ["provider.attempt": "\(attempt)", "provider.failure": "\(retryReason)"]
                )
                throw Unavailable(reason: "\(retryReason) after \(attempt) attempts")
            }
            var delay = retry.jitteredDelay(retry: attempt)
            if let retryAfter { delay = max(delay, retryAfter) }
            guard now() + delay < deadline else {
                logger.warning(
                    "\(provider) call failed; no time left for a retry",
                    metadata: ["provider.attempt": "\(attempt)", "provider.failure": "\(retryReason)"]
                )
                throw Unavailable(reason: "\(retryReason); deadline reached")
            }
            logger.info(
                "\(provider) call failed; retrying",
                metadata: [
                    "provider.attempt": "\(attempt)", "provider.failure": "\(retryReason)",
                    "provider.retry_delay_ms": "\(delay.milliseconds)",
                ]
            )
            try await retry.sleep(delay)
        }
    }

    enum AttemptOutcome: Sendable {
        case response(Response)
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
        endpoint: String,
        request: HTTPClientRequest,
        timeout: Duration
    ) async throws -> AttemptOutcome {
        let start = ContinuousClock.now
        let httpClient = self.httpClient
        let attempt = Task {
            let response = try await httpClient.execute(request, timeout: TimeAmount(timeout))
            let body = try await response.body.collect(upTo: Self.maxResponseBytes)
            return Response(status: Int(response.status.code), headers: response.headers, body: body)
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
        observe?(endpoint, status, ContinuousClock.now - start)
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

    /// `Retry-After` in its delay-seconds form.
    static func retryAfter(_ headers: HTTPHeaders) -> Duration? {
        guard let value = headers.first(name: "Retry-After")?.trimmingCharacters(in: .whitespaces),
            let seconds = Int(value), seconds >= 0
        else { return nil }
        return .seconds(seconds)
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
