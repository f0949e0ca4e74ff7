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
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}

/// A provider client of its own for `body`, shut down after it so its connections close: the relay's
/// outbound policy, with timeouts no loaded machine reaches.
public func withProviderHTTPClient<T>(_ body: (ProviderHTTPClient) async throws -> T) async throws -> T {
    let client = ProviderHTTPClient(connectTimeout: .seconds(120), readTimeout: .seconds(120))
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}
