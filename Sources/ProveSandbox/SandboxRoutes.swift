import Foundation
import Hummingbird
import Logging
import NIOCore
import ProveAPI

extension ProveSandbox {
    /// Mounts the simulator on a Hummingbird router (the standalone `linkrelay sandbox`, and tests): every
    /// request under `/sandbox/` goes to ``respond(method:path:query:authorization:body:hold:)``; a path
    /// that is none of its routes is a 404.
    public nonisolated func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            router.on("/sandbox/**", method: method) { request, context -> Response in
                let response = await self.respond(
                    method: method.rawValue, path: request.uri.path, query: request.uri.query,
                    authorization: request.headers[.authorization], body: { await Self.collectBody(request) },
                    hold: { wait in
                        // Hummingbird does not cancel a handler when its client disconnects (nobody reads the
                        // connection meanwhile); this reads it, and cancels `wait` when the inbound side closes.
                        // It needs the body as the server delivered it: a hang answers before it is read.
                        _ = try? await request.body.consumeWithCancellationOnInboundClose { body in
                            for try await _ in body {}
                            await wait()
                        }
                    })
                switch response {
                case nil: return Response(status: .notFound)
                case .reply(let reply): return reply.response
                case .dropConnection: return Self.droppedConnection(context)
                }
            }
        }
    }

    /// The body, or `nil` when it is 4 KB or larger (or cannot be read).
    static func collectBody(_ request: Request) async -> [UInt8]? {
        guard let buffer = try? await request.body.collect(upTo: maxBodyBytes) else { return nil }
        return Array(buffer.readableBytesView)
    }
}

/// The sandbox alone, for `linkrelay sandbox --host H --port P`: the simulator at `http://H:P/sandbox/prove`,
/// its outbox at `http://H:P/sandbox/outbox`. Links use `publicBaseURL`, else `http://H:P`.
public func buildSandboxApplication(
    host: String,
    port: Int,
    publicBaseURL: String?,
    logger: Logger
) -> some ApplicationProtocol {
    let sandbox = ProveSandbox(publicBaseURL: publicBaseURL ?? ProveSandbox.localBaseURL(host: host, port: port))
    return buildSandboxApplication(sandbox: sandbox, host: host, port: port, logger: logger)
}

extension ProveSandbox {
    /// `http://HOST:PORT` (IPv6 hosts in brackets): where a standalone sandbox is reached.
    public static func localBaseURL(host: String, port: Int) -> String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// The sandbox alone, serving the given simulator (tests keep a reference to inspect it).
public func buildSandboxApplication(
    sandbox: ProveSandbox,
    host: String,
    port: Int,
    logger: Logger
) -> some ApplicationProtocol {
    let router = Router(context: SandboxRequestContext.self)
    sandbox.addRoutes(to: router)
    return Application(
        router: router,
        configuration: .init(address: .hostname(host, port: port), serverName: "LinkRelay-ProveSandbox"),
        logger: logger
    )
}

/// The standalone sandbox's request context: Hummingbird's core storage and the connection, which a
/// dropped-connection fault closes.
public struct SandboxRequestContext: ConnectionRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let connection: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        connection = source.channel
    }
}
