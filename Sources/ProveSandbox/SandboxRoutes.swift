import Foundation
import Hummingbird
import Logging
import NIOCore
import ProveAPI

/// An HTTP reply of the simulator, independent of the web framework.
struct SandboxReply: Sendable {
    var status: Int
    var contentType: String?
    var body: [UInt8]
    var location: String?
    /// Seconds for a `Retry-After` header.
    var retryAfter: Int? = nil

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()

    static func json(_ status: Int, _ value: some Encodable) -> SandboxReply {
        let body = (try? encoder.encode(value)).map { [UInt8]($0) } ?? []
        return .init(status: status, contentType: "application/json", body: body)
    }

    static func error(_ status: Int, _ code: Int, _ message: String) -> SandboxReply {
        json(status, ProveErrorBody(code: code, message: message))
    }

    static func html(_ status: Int, _ page: String) -> SandboxReply {
        .init(status: status, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
    }

    static func redirect(_ location: String) -> SandboxReply {
        .init(status: 302, contentType: nil, body: [], location: location)
    }

    var response: Response {
        var headers = HTTPFields()
        if let contentType { headers[.contentType] = contentType }
        if let location { headers[.location] = location }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        headers[.cacheControl] = "no-store"
        headers[.contentLength] = String(body.count)
        return Response(
            status: HTTPResponse.Status(code: status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}

/// What a Unify endpoint of the simulator answers: its body, or Prove's error body with the HTTP status. The
/// routes send it as JSON; ``SandboxProveClient`` hands it over as it is.
enum SandboxAnswer<Body: Encodable & Sendable>: Sendable {
    case ok(Body)
    case error(status: Int, ProveErrorBody)

    static func error(_ status: Int, _ code: Int, _ message: String) -> Self {
        .error(status: status, ProveErrorBody(code: code, message: message))
    }

    var reply: SandboxReply {
        switch self {
        case .ok(let body): .json(200, body)
        case .error(let status, let body): .json(status, body)
        }
    }
}

extension ProveSandbox {
    /// Mounts the simulator: `POST /sandbox/prove/token`, `POST /sandbox/prove/v3/{unify, unify-status,
    /// unify-bind, start, validate, challenge, complete}`, `GET /sandbox/outbox?phoneNumber=N` and
    /// `GET /sandbox/link/{id}` (the Instant Link page; `?decline=1` declines).
    ///
    /// And the fault controls (see ``SandboxFault``): `GET /sandbox/faults` → 200 ``SandboxFaultList``;
    /// `PUT /sandbox/faults/{endpoint}` with a JSON ``SandboxFault`` or spec items (`error=0.5,status=503`)
    /// → 204; `DELETE /sandbox/faults/{endpoint}` and `DELETE /sandbox/faults` (all) → 204. `{endpoint}` is a
    /// ``SandboxEndpoint`` name, `*` for all. Bad input → 400 `{"error": "…"}`.
    public nonisolated func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        router.post("/sandbox/prove/token") { request, context -> Response in
            if let faulted = await self.faultedResponse(.token, request: request, context: context) { return faulted }
            let body = await Self.collectBody(request)
            return await self.token(form: body).response
        }
        for endpoint in APIEndpoint.allCases {
            router.post("/sandbox/prove/v3/\(endpoint.rawValue)") { request, context -> Response in
                if let faulted = await self.faultedResponse(endpoint.faultEndpoint, request: request, context: context)
                {
                    return faulted
                }
                let authorization = request.headers[.authorization]
                let body = await Self.collectBody(request)
                return await self.handle(endpoint, authorization: authorization, body: body).response
            }
        }
        router.get("/sandbox/outbox") { request, _ -> Response in
            // A `+` in a query string may arrive decoded as a space.
            let phone = request.uri.queryParameters.get("phoneNumber")?
                .replacingOccurrences(of: " ", with: "+")
            return await self.outboxReply(phoneNumber: phone?.isEmpty == false ? phone : nil).response
        }
        router.get("/sandbox/link/{id}") { request, context -> Response in
            let id = context.parameters.get("id") ?? ""
            let decline = request.uri.queryParameters.get("decline") == "1"
            return await self.openLink(id: id, decline: decline).response
        }
        router.get("/sandbox/faults") { _, _ -> Response in
            await self.faultListReply().response
        }
        router.put("/sandbox/faults/{endpoint}") { request, context -> Response in
            let endpoint = context.parameters.get("endpoint") ?? ""
            let body = await Self.collectBody(request)
            return await self.putFaultReply(endpoint: endpoint, body: body).response
        }
        router.delete("/sandbox/faults/{endpoint}") { _, context -> Response in
            await self.deleteFaultReply(endpoint: context.parameters.get("endpoint") ?? "").response
        }
        router.delete("/sandbox/faults") { _, _ -> Response in
            await self.clearFaults()
            return SandboxReply.noContent.response
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
