/// Caches Prove's OAuth2 access token and shares one in-flight fetch between concurrent callers.
actor TokenCache {
    struct Entry: Sendable {
        var token: String
        /// The token is used while `now < validUntil` (`expires_in − 60 s` after the fetch started).
        var validUntil: ContinuousClock.Instant
    }

    private var entry: Entry?
    private var inFlight: Task<Entry, any Error>?

    /// Returns the cached token if still valid at `now`, else joins the fetch in flight or starts one.
    ///
    /// A fetch is started with the deadline of the caller that started it; callers joining it wait for it.
    func token(now: ContinuousClock.Instant, fetch: @escaping @Sendable () async throws -> Entry) async throws
        -> String
    {
        if let entry, now < entry.validUntil { return entry.token }
        if let inFlight { return try await inFlight.value.token }
        let task = Task { try await fetch() }
        inFlight = task
        let result = await task.result
        if inFlight == task {
            inFlight = nil
            if case .success(let fetched) = result { entry = fetched }
        }
        return try result.get().token
    }

    /// Drops `token` if it is the cached one (a newer token fetched meanwhile is kept).
    func invalidate(token: String) {
        if entry?.token == token { entry = nil }
    }
}
