import Foundation
import LinkRelaySupport
import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP/1.1 server on loopback, for tests whose subject must talk to a real socket (the Prove
/// client, the webhook sender): each request, read whole, goes to a handler, whose answer may stream its
/// body or never come.
public enum TestHTTPServer {
    public struct Request: Sendable {
        public var method: HTTPMethod
        /// The target before `?`.
        public var path: String
        public var headers: HTTPHeaders
        public var body: ByteBuffer
    }

    public struct Response: Sendable {
        public enum Body: Sendable {
            case bytes(ByteBuffer)
            /// Written part by part (chunked); an error it throws (a write to a gone client) closes the
            /// connection.
            case stream(@Sendable (Writer) async throws -> Void)
        }

        public var status: HTTPResponseStatus
        public var headers: HTTPHeaders
        public var body: Body

        public init(status: HTTPResponseStatus, headers: HTTPHeaders = [:], body: Body = .bytes(ByteBuffer())) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    /// Writes a streamed body.
    public struct Writer: Sendable {
        let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>

        public func write(_ bytes: ByteBuffer) async throws {
            try await outbound.write(.body(.byteBuffer(bytes)))
        }
    }

    public typealias Handler = @Sendable (Request) async throws -> Response
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    /// Serves `handler` on `127.0.0.1` while `body` runs; `body` gets the port. Then the listener and every
    /// connection close, and requests still being answered are cancelled.
    public static func serve<T: Sendable>(
        _ handler: @escaping Handler, _ body: @escaping @Sendable (Int) async throws -> T
    ) async throws -> T {
        // Each connection until the accept loop takes it: one accepted while the listener closes is never
        // handed out, and NIO traps on its writer dropped unfinished, so the server finishes it itself.
        let unclaimed = Locked<[ObjectIdentifier: Connection]>([:])
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    let connection = try Connection(wrappingChannelSynchronously: channel)
                    unclaimed.withLock { $0[ObjectIdentifier(channel)] = connection }
                    return connection
                }
            }
        guard let port = listener.channel.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await withDiscardingTaskGroup { connections in
                    try? await listener.executeThenClose { inbound in
                        for try await connection in inbound {
                            unclaimed.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection.channel)) }
                            connections.addTask { await serveConnection(connection, handler) }
                        }
                    }
                    // Requests still being answered (a handler that never answers) end with the server.
                    connections.cancelAll()
                }
            }
            let outcome: Result<T, any Error>
            do {
                outcome = .success(try await body(port))
            } catch {
                outcome = .failure(error)
            }
            // Closing the listener, rather than cancelling its loop, ends its stream only once every
            // accepted connection has been handed out: each then closes through its own
            // `executeThenClose` (NIO traps on a connection's writer dropped unfinished).
            try? await listener.channel.close()
            try await group.waitForAll()
            for connection in unclaimed.withLock({ $0.values }) {
                connection.outbound.finish()
                try? await connection.channel.close()
            }
            return try outcome.get()
        }
    }

    private static func serveConnection(_ connection: Connection, _ handler: Handler) async {
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let next):
                    head = next
                    body.clear()
                case .body(var bytes):
                    body.writeBuffer(&bytes)
                case .end:
                    guard let head else { continue }
                    let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
                    let response = try await handler(
                        Request(method: head.method, path: path, headers: head.headers, body: body))
                    try await write(response, keepAlive: head.isKeepAlive, to: outbound)
                    guard head.isKeepAlive else { return }
                }
            }
        }
    }

    private static func write(
        _ response: Response, keepAlive: Bool, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    ) async throws {
        var headers = response.headers
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        switch response.body {
        case .bytes(let bytes):
            headers.replaceOrAdd(name: "Content-Length", value: String(bytes.readableBytes))
            try await outbound.write(
                .head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)))
            if bytes.readableBytes > 0 { try await outbound.write(.body(.byteBuffer(bytes))) }
        case .stream(let stream):
            headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
            try await outbound.write(
                .head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)))
            try await stream(Writer(outbound: outbound))
        }
        try await outbound.write(.end(nil))
    }
}

/// Answers for tests of a client's size caps (the outbound policy: 1 MiB on the wire and once inflated).
extension TestHTTPServer {
    /// gzip-encoded JSON after a run of spaces, small on the wire: made with Python's
    /// `gzip.compress(b" " * n + json, 9, mtime=0)`. The object decodes as Prove's unify-status answer
    /// (`success` "true") and as the Nevis Authentication Cloud's status (`status` "succeeded").
    public enum Gzipped {
        public static let json =
            #"{"success":"true","proveId":"p-1","phoneNumber":"2001004014","transactionId":"tx-1","#
            + #""status":"succeeded","createdAt":"x","lastUpdatedAt":"y"}"#

        /// 512 KiB of spaces, then `json`: 659 bytes on the wire, 524,429 inflated.
        public static let halfMiB = decode(
            """
            H4sIAAAAAAACA+3MMU7EMBBA0ausXIPkoK3oKGnoOICJLYEESWQ7aBHi7nhTUHKC97r5o5nTCQAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAOB/36Ht81xaC/eh172Em7DV9bM85hG22+k6v65Ledo/Xkod7S7G
            KcZznM5j1WtaWpr727ocB/1yXLSe+n79ePwuueQR51pSL/mhj34Z83tq/XnLf+0r/PwC/AW4bY0ACAA=
            """)

        /// 1 MiB of spaces, then `json`: 1,167 bytes on the wire, 1,048,717 (over 1 MiB) inflated.
        public static let overOneMiB = decode(
            """
            H4sIAAAAAAACA+3MMU7EMBBA0ausXIPkoK3oKGnoOICJLYEESWQ7aBHi7nhTcAHa97r5o5nTCQAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAAAAAAAADgf75D2+e5tBbuQ697CTdhq+tnecwjbLfTdX5dl/K0f7yUOtpdjFOM5zidx6rXtLQ097d1OQ76
            5bhoPfX9+vH4XXLJI861pF7yQx/9Mub31Przlv/aV/j5BQ0OHwmNABAA
            """)

        private static func decode(_ base64: String) -> ByteBuffer {
            let bytes = Data(base64Encoded: base64.filter { !$0.isWhitespace }) ?? Data()
            precondition(!bytes.isEmpty, "a fixture that is not base64")
            return ByteBuffer(bytes: bytes)
        }
    }

    /// A 200 with `body`, declared `Content-Encoding: gzip` and JSON.
    public static func gzipAnswer(_ body: ByteBuffer) -> Response {
        Response(
            status: .ok, headers: ["Content-Type": "application/json", "Content-Encoding": "gzip"],
            body: .bytes(body))
    }

    /// A redirect to `location`.
    public static func redirect(_ status: Int, to location: String) -> Response {
        Response(status: HTTPResponseStatus(statusCode: status), headers: ["Location": location])
    }
}
