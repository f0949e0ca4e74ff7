import AsyncHTTPClient
import ProveAPI

/// A client of its own for `body`, shut down after it, so its connections close. Without
/// `followingRedirects` a test sees a 302 as a browser's first request does (the sandbox's link page).
public func withHTTPClient<T>(followingRedirects: Bool = true, _ body: (HTTPClient) async throws -> T)
    async throws -> T
{
    let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: followingRedirects ? .init() : .init(redirectConfiguration: .disallow))
    return try await using(client, shutdown: { try await $0.shutdown() }, body)
}

/// A provider client of its own for `body`, shut down after it so its connections close: the relay's
/// outbound policy, with timeouts no loaded machine reaches.
public func withProviderHTTPClient<T>(_ body: (ProviderHTTPClient) async throws -> T) async throws -> T {
    let client = ProviderHTTPClient(connectTimeout: .seconds(120), readTimeout: .seconds(120))
    return try await using(client, shutdown: { try await $0.shutdown() }, body)
}

/// `body`'s result, `client` shut down after it whether it returned or threw.
private func using<Client, T>(
    _ client: Client, shutdown: (Client) async throws -> Void, _ body: (Client) async throws -> T
) async throws -> T {
    do {
        let result = try await body(client)
        try await shutdown(client)
        return result
    } catch {
        try? await shutdown(client)
        throw error
    }
}
