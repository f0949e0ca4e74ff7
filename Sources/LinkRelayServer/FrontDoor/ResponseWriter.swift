import NIOCore
import NIOHTTP1

/// The one place an answer's head is made: every answer the relay writes, a channel's included, gets
/// `Date`, `Server`, `X-Content-Type-Options: nosniff`, and HSTS when the public URL is https (the relay may
/// sit behind a TLS-terminating proxy, so it goes by the public URL, not by how the request arrived).
struct ResponseWriter: Sendable {
    static let serverName = "LinkRelay"

    let strictTransportSecurity: Bool

    /// The head of `answer`, with its `Content-Length` unless the body is streamed, and `Connection: close`
    /// when the connection closes after it.
    func head(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, contentLength: Int?, closing: Bool = false)
        -> HTTPResponseHead
    {
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
    func write(_ answer: Answer, head: Bool = false, keepAlive: Bool, to context: ChannelHandlerContext) {
        let responseHead = self.head(
            answer.status, answer.headers, contentLength: answer.body.readableBytes, closing: !keepAlive)
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
