import AsyncHTTPClient
import Foundation
import LinkRelayServer
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import ProveAPI
import ProveSandbox
import Testing

/// Records the backoff sleeps instead of sleeping.
final class SleepRecorder: Sendable {
    let sleeps = Locked<[Duration]>([])

    var sleep: @Sendable (Duration) async throws -> Void {
        { [sleeps] duration in sleeps.withLock { $0.append(duration) } }
    }
}

/// Records every attempt reported to the observer.
final class ObserverRecorder: ProveCallObserver {
    let calls = Locked<[String]>([])

    func proveCall(endpoint: String, status: String, duration: Duration) {
        calls.withLock { $0.append("\(endpoint) \(status)") }
    }
}

/// A settable client clock: `now()` is the real clock plus an offset.
final class OffsetClock: Sendable {
    let offset = Locked<Duration>(.zero)
    /// Nil: the real clock's time, moved by `offset`; else this instant, moved only by `offset`.
    private let frozenAt: ContinuousClock.Instant?

    init(frozen: Bool = false) { frozenAt = frozen ? .now : nil }

    var now: @Sendable () -> ContinuousClock.Instant {
        { [offset, frozenAt] in (frozenAt ?? ContinuousClock.now) + offset.value }
    }
}

/// Serves `sandbox` live on an ephemeral port, as `linkrelay sandbox` does; `body` gets the base URL of its
/// Prove API.
func withLiveSandbox<T: Sendable>(
    _ sandbox: ProveSandbox,
    _ body: @escaping @Sendable (String) async throws -> T
) async throws -> T {
    let server = SandboxServer(
        sandbox: sandbox, host: "127.0.0.1", port: 0,
        logger: Logger(label: "sandbox", factory: { _ in SwiftLogNoOpLogHandler() }))
    return try await server.serving { port in try await body("http://127.0.0.1:\(port)/sandbox/prove") }
}

let sandboxCredentials = ProveCredentials(clientID: ProveSandbox.clientID, clientSecret: ProveSandbox.clientSecret)

/// The client under test, pointed at a live sandbox, with the sandbox's credentials unless told otherwise.
func sandboxClient(
    _ baseURL: String,
    _ http: ProviderHTTPClient,
    credentials: ProveCredentials = sandboxCredentials,
    logger: Logger = quietLogger(),
    now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
) -> HTTPProveClient {
    HTTPProveClient(
        baseURL: baseURL, credentials: credentials, httpClient: http,
        retry: RetryPolicy(attemptTimeout: .seconds(patientSeconds)), logger: logger, now: now)
}

/// Deadlines and attempt timeouts for tests that are not about time: only a hang reaches them, never a
/// loaded machine (under ThreadSanitizer, with every suite running at once, a loopback call has taken
/// over 10 s).
let patientSeconds: Double = 120

func deadline(_ seconds: Double = patientSeconds, now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant {
    now + .milliseconds(Int(seconds * 1000))
}
