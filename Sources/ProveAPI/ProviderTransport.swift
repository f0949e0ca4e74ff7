import AsyncHTTPClient
import Foundation
import Logging
import NIOConcurrencyHelpers
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
///
/// An answer the outbound policy (`ProviderHTTPClient`) refuses is the provider's failure, and final: a
/// redirect (any 3xx, never followed) and an answer over 1 MiB throw `Unavailable` at once, whether or not
/// the call is idempotent. Asking the same URL again gets the same answer (a redirect says where the
/// resource is, not that the provider is busy), so a retry would only delay the failure the breaker counts
/// and send the call's credentials once more. The observer gets the status ("307"), or "error" for an
/// answer too large; one line says so at most every 10 s, naming the provider's host and nothing else of
/// the request or the answer (no path, query, `Location` or body).
public struct ProviderTransport: Sendable {
    /// The provider as logs name it ("Prove").
    public let provider: String
    let httpClient: ProviderHTTPClient
    let retry: RetryPolicy
    /// Told of every attempt: the endpoint, the HTTP status as a string (or "timeout" / "error"), the time.
    let observe: (@Sendable (String, String, Duration) -> Void)?
    let now: @Sendable () -> ContinuousClock.Instant

    /// Lines about refused answers, at most one of each kind every `RefusalLog.interval`.
    let refusals = RefusalLog()

    /// Answers larger than this, on the wire or decompressed, are the provider's failure.
    public static let maxResponseBytes = ProviderHTTPClient.maxResponseBytes

    public init(
        provider: String, httpClient: ProviderHTTPClient, retry: RetryPolicy,
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
    /// not retried (2xx or 4xx other than 429); throws `Unavailable` when the retries or the time run out, or
    /// at once for a redirect or an answer too large.
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
            let request = makeRequest()
            let outcome = try await performAttempt(
                endpoint: endpoint, request: request, timeout: min(remaining, retry.attemptTimeout))
            let retryReason: String
            var retryAfter: Duration?
            switch outcome {
            case .response(let result) where (300..<400).contains(result.status):
                refused(.redirect, status: result.status, url: request.url, logger: logger)
                throw Unavailable(reason: "HTTP \(result.status): a redirect, not followed")
            case .tooLarge(let status):
                refused(.tooLarge, status: status, url: request.url, logger: logger)
                throw Unavailable(reason: "an answer over \(Self.maxResponseBytes) bytes")
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
        /// An answer over `maxResponseBytes`, declared, on the wire or decompressed; its status.
        case tooLarge(status: Int)
    }

    /// Logs a refused answer, if its kind had no line in the last `RefusalLog.interval`: the provider's host,
    /// the status and how many such answers the line stands for.
    private func refused(_ kind: RefusalLog.Kind, status: Int, url: String, logger: Logger) {
        guard let count = refusals.admit(kind, now: now()) else { return }
        let host = URLComponents(string: url)?.host ?? "?"
        let message: Logger.Message =
            switch kind {
            case .redirect: "\(provider) answered with a redirect, which the relay does not follow; the call failed"
            case .tooLarge: "\(provider) answered with more than 1 MiB; the call failed"
            }
        logger.error(
            message,
            metadata: [
                "provider.host": .string(host), "provider.status": "\(status)", "provider.answers": "\(count)",
            ])
    }

    /// A declared `Content-Length` over the cap.
    private struct DeclaredTooLarge: Error {}

    /// The status of an answer whose body went over the cap (known once the head has come).
    private final class AttemptStatus: Sendable {
        let value = Atomic<Int>(0)
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
        let status = AttemptStatus()
        let attempt = Task {
            let response = try await httpClient.client.execute(request, timeout: TimeAmount(timeout))
            status.value.store(Int(response.status.code), ordering: .relaxed)
            // The wire's size, declared: the decompressor passes the header on as it came.
            if let declared = response.headers.first(name: "Content-Length").flatMap({ Int($0) }),
                declared > Self.maxResponseBytes
            {
                throw DeclaredTooLarge()
            }
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
            if timer.fired.load(ordering: .acquiring) {
                outcome = .failure(label: "timeout", requestNotSent: false)
            } else if Self.isTooLarge(error) {
                outcome = .tooLarge(status: status.value.load(ordering: .relaxed))
            } else {
                outcome = Self.classify(error)
            }
        }
        let label: String
        switch outcome {
        case .response(let result): label = String(result.status)
        case .failure(let failure, _): label = failure == "timeout" ? "timeout" : "error"
        case .tooLarge: label = "error"
        }
        observe?(endpoint, label, ContinuousClock.now - start)
        return outcome
    }

    /// Whether reading an answer stopped at the cap: a declared length, the bytes collected, or the
    /// decompressor's limit. (The decompressor is AsyncHTTPClient's, from NIOHTTPCompression, which this
    /// module does not import: its error is known by name.)
    static func isTooLarge(_ error: any Error) -> Bool {
        if error is DeclaredTooLarge || error is NIOTooManyBytesError { return true }
        return String(reflecting: error).hasSuffix("DecompressionError.limit")
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

/// Whether a refused answer gets a line now: at most one of each kind every `interval`, counting those
/// it stands for.
final class RefusalLog: Sendable {
    enum Kind: Hashable, Sendable {
        case redirect
        case tooLarge
    }

    static let interval: Duration = .seconds(10)

    private struct Entry {
        var lastLine: ContinuousClock.Instant
        /// Refusals since the last line that got none.
        var unwritten: Int
    }

    /// A pthread lock, which ThreadSanitizer sees (as it does not see `Synchronization.Mutex` on Linux).
    private let entries = NIOLockedValueBox<[Kind: Entry]>([:])

    /// nil when a line of this kind was written less than `interval` ago; else how many refusals the line
    /// stands for: this one and those since the last line.
    func admit(_ kind: Kind, now: ContinuousClock.Instant) -> Int? {
        entries.withLockedValue { entries in
            if let entry = entries[kind], now - entry.lastLine < Self.interval {
                entries[kind]?.unwritten += 1
                return nil
            }
            let count = (entries[kind]?.unwritten ?? 0) + 1
            entries[kind] = Entry(lastLine: now, unwritten: 0)
            return count
        }
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
