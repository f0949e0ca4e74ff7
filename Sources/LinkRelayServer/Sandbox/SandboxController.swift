import NIOCore
import NIOHTTP1
import ProveSandbox

/// The embedded Prove sandbox under `/sandbox/` (`--prove sandbox` only): its own routes
/// (`ProveSandbox.respond`) answer, through the front door like every other route.
final class SandboxController: Sendable {
    let sandbox: ProveSandbox

    init(sandbox: ProveSandbox) {
        self.sandbox = sandbox
    }

    func answer(_ request: RelayRequest) -> Reply {
        .later { [sandbox] in
            // A hang's wait ends when this task is cancelled: its route is cancelled when the client leaves.
            let response = await sandbox.respond(
                method: request.method.rawValue, path: String(request.path), query: request.query.map(String.init),
                authorization: request.headers.first(name: "Authorization"),
                body: { request.body.map { Array($0.readableBytesView) } }, hold: { wait in await wait() })
            switch response {
            case nil: throw Problem.notFound()
            case .dropConnection: return .droppedConnection
            case .reply(let reply):
                var headers: HTTPHeaders = ["Cache-Control": "no-store"]
                if let contentType = reply.contentType { headers.add(name: "Content-Type", value: contentType) }
                if let location = reply.location { headers.add(name: "Location", value: location) }
                if let retryAfter = reply.retryAfter { headers.add(name: "Retry-After", value: String(retryAfter)) }
                return Answer(
                    status: HTTPResponseStatus(statusCode: reply.status), headers: headers,
                    body: ByteBuffer(bytes: reply.body))
            }
        }
    }
}
