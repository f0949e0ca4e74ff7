import NIOCore
import NIOHTTP1
import NevisSandbox
import ProveSandbox

/// The sandboxes' routes under `/sandbox/`: Nevis's under `/sandbox/nevis/` (`NevisSandbox.respond`), when
/// there is one, and Prove's (`ProveSandbox.respond`), in the relay with `--prove sandbox` and alone as
/// `linkrelay sandbox`: the simulator says what to answer, the front door carries it out (a dropped
/// connection too; a hang's task is cancelled when its client leaves).
final class SandboxController: Sendable {
    let sandbox: ProveSandbox
    /// The same instance the relay's in-process Nevis client asks: the routes see its operations.
    let nevis: NevisSandbox?

    init(sandbox: ProveSandbox, nevis: NevisSandbox? = nil) {
        self.sandbox = sandbox
        self.nevis = nevis
    }

    func answer(_ request: RelayRequest) -> Reply {
        .later { [sandbox, nevis] in
            let path = String(request.path)
            let query = request.query.map(String.init)
            let authorization = request.headers.first(name: "Authorization")
            let body = request.body.map { Array($0.readableBytesView) }
            let response: SandboxResponse?
            if let nevis, path.hasPrefix("/sandbox/nevis/") {
                // Nevis's simulator takes a body of 4 KB or more as none, and refuses it in Nevis's words.
                response = await nevis.respond(
                    method: request.method.rawValue, path: path, query: query, authorization: authorization,
                    accept: request.headers.first(name: "Accept"),
                    contentType: request.headers.first(name: "Content-Type"),
                    body: body.flatMap { $0.count > NevisSandbox.maxBodyBytes ? nil : $0 })
            } else {
                response = await sandbox.respond(
                    method: request.method.rawValue, path: path, query: query, authorization: authorization,
                    body: body)
            }
            switch response {
            case nil: throw Problem.notFound()
            case .dropConnection: return .droppedConnection
            case .reply(let reply):
                return Answer(
                    status: HTTPResponseStatus(statusCode: reply.status), headers: HTTPHeaders(reply.headers),
                    body: ByteBuffer(bytes: reply.body))
            }
        }
    }

}
