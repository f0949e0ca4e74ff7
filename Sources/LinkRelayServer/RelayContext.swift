import Foundation
import Hummingbird
import LinkRelayCore
import NIOCore
import ProveSandbox

/// The request context of every route: Hummingbird's core storage, the peer's address, and the
/// connection (which the embedded sandbox's dropped-connection fault closes).
public struct RelayContext: RequestContext, RemoteAddressRequestContext, ConnectionRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public let connection: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        connection = source.channel
    }

    /// Request bodies the relay accepts are tiny (a session request is at most 4 KiB).
    public var maxUploadSize: Int { 16 * 1024 }
}

/// JSON as the relay writes it: dates in ISO 8601 with milliseconds, keys in a stable order.
enum RelayJSON {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(timestamp(date))
        }
        return encoder
    }()

    static func timestamp(_ date: Date) -> String { ISO8601Milliseconds.string(date) }

    static func response(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:],
        contentType: String = "application/json"
    ) throws -> Response {
        var headers = headers
        headers[.contentType] = contentType
        headers[.cacheControl] = "no-store"
        return Response(
            status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }

    static func data(_ value: some Encodable) -> Data { (try? encoder.encode(value)) ?? Data() }
}

extension Request {
    /// The token after `Bearer ` in the Authorization header.
    var bearerToken: String? { ChannelGate.bearerToken(headers) }
}
