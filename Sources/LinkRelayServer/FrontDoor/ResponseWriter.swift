import NIOCore
import NIOHTTP1

/// The one place an answer's head is made: every answer the relay writes, a channel's included, gets
/// `Date`, `Server`, `X-Content-Type-Options: nosniff`, and HSTS when the public URL is https (the relay may
/// sit behind a TLS-terminating proxy, so it goes by the public URL, not by how the request arrived).
/// Each head is counted here too (`linkrelay_http_responses_total`), so no answer goes uncounted.
struct ResponseWriter: Sendable {
    static let serverName = "LinkRelay"
    /// The `route` of an answer to a request no line of the route table matched (404, 405, a refused head).
    static let unmatched = "unmatched"

    let strictTransportSecurity: Bool
    /// Counts each answer by route and status; nil for a server without metrics.
    var metrics: RelayMetrics? = nil

    /// The head of `answer`, with its `Content-Length` unless the body is streamed, and `Connection: close`
    /// when the connection closes after it. `route`: the pattern of the request's line in the route
    /// table, or `unmatched`.
    func head(
        _ status: HTTPResponseStatus, _ headers: HTTPHeaders, contentLength: Int?, closing: Bool = false,
        route: String
    ) -> HTTPResponseHead {
        metrics?.httpResponse(route: route, status: Int(status.code))
        var headers = headers
        if closing { headers.replaceOrAdd(name: "Connection", value: "close") }
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        if strictTransportSecurity {
            headers.add(name: "Strict-Transport-Security", value: "max-age=63072000; includeSubDomains")
        }
        if let contentLength { headers.replaceOrAdd(name: "Content-Length", value: String(contentLength)) }
        headers.add(name: "Server", value: Self.serverName)
        headers.add(name: "Date", value: HTTPDate.now())
        return HTTPResponseHead(version: .http1_1, status: status, headers: headers)
    }

    /// Writes `answer` whole; a HEAD gets the head a GET would, without the body. Closes the connection
    /// after it unless `keepAlive`.
    func write(
        _ answer: Answer, head: Bool = false, keepAlive: Bool, route: String, to context: ChannelHandlerContext
    ) {
        let responseHead = self.head(
            answer.status, answer.headers, contentLength: answer.body.readableBytes, closing: !keepAlive, route: route)
        context.write(NIOAny(HTTPServerResponsePart.head(responseHead)), promise: nil)
        if !head, answer.body.readableBytes > 0 {
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(answer.body))), promise: nil)
        }
        end(keepAlive: keepAlive, context)
    }

    /// Ends the answer being written; closes the connection after it unless `keepAlive`.
    func end(keepAlive: Bool, _ context: ChannelHandlerContext) {
        let ended = context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)))
        if !keepAlive {
            let channel = context.channel
            ended.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
