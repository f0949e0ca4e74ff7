import AsyncHTTPClient
import NIOCore

/// The one HTTP client the relay calls its providers (Prove, Nevis) through. Its configuration is the
/// outbound policy, and no caller can change it:
/// - redirects are never followed: a request (its client secret, bearer token, status token or body) goes to
///   the configured origin and nowhere else, so no answer can move it to another host or from https to
///   http. `ProviderTransport` turns a 3xx into the provider's failure;
/// - answers over `maxResponseBytes`, before or after decompression, are the provider's failure:
///   `ProviderTransport` refuses a declared `Content-Length` over the cap before reading the body, collects
///   at most the cap, and the decompressor stops inflating past it;
/// - connecting and each wait for the next bytes are bounded (`ProviderTransport` also bounds each attempt
///   whole, by `RetryPolicy.attemptTimeout`);
/// - TLS is AsyncHTTPClient's default: the system's roots, full certificate and host name verification.
///
/// `relay` lives as long as the process, so no path of the relay can leave it unshut; a client made with
/// `init` is shut down by its maker (tests).
public final class ProviderHTTPClient: Sendable {
    /// The largest answer taken, on the wire and once decompressed: 1 MiB. Prove's and Nevis's answers are
    /// a few KiB.
    public static let maxResponseBytes = 1 << 20
    public static let connectTimeout: TimeAmount = .seconds(5)
    public static let readTimeout: TimeAmount = .seconds(10)

    /// The relay's: on AsyncHTTPClient's default event loops, never shut down.
    public static let relay = ProviderHTTPClient()

    let client: HTTPClient

    /// - Parameters:
    ///   - connectTimeout: the longest wait for a connection.
    ///   - readTimeout: the longest wait for the next bytes of an answer. Tests on a loaded machine pass
    ///     longer ones; the policy's other parts have no parameter.
    public init(
        eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup,
        connectTimeout: TimeAmount = ProviderHTTPClient.connectTimeout,
        readTimeout: TimeAmount = ProviderHTTPClient.readTimeout
    ) {
        client = HTTPClient(
            eventLoopGroup: eventLoopGroup,
            configuration: Self.configuration(connectTimeout: connectTimeout, readTimeout: readTimeout))
    }

    /// The policy as AsyncHTTPClient's configuration.
    static func configuration(connectTimeout: TimeAmount, readTimeout: TimeAmount) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: connectTimeout, read: readTimeout)
        configuration.decompression = .enabled(limit: .size(maxResponseBytes))
        return configuration
    }

    var eventLoopGroup: any EventLoopGroup { client.eventLoopGroup }

    /// Closes the client's connections; a client made with `init` must be shut down before it goes.
    public func shutdown() async throws {
        try await client.shutdown()
    }
}
