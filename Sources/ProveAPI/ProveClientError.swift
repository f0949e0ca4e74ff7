/// The errors a `ProveClient` throws (besides `CancellationError` when the calling task is cancelled).
public enum ProveClientError: Error, Sendable, Equatable {
    /// A 4xx other than 429 (after the single 401 token refresh and retry). Not retried.
    case rejected(status: Int, body: ProveErrorBody?)
    /// Timeouts, connection errors, 5xx, 429 after the retries were spent, a redirect (never followed), an
    /// answer over 1 MiB, an undecodable 2xx body, or the deadline was reached.
    case unavailable(reason: String)
}

extension ProveClientError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .rejected(let status, let body):
            "Prove rejected the request with \(status)" + (body?.code.map { " (code \($0))" } ?? "")
        case .unavailable(let reason):
            "Prove unavailable: \(reason)"
        }
    }
}
