import NIOCore
import NIOHTTP1
import ProveSandbox

/// The Prove sandbox's routes under `/sandbox/` (`ProveSandbox.respond`), in the relay with `--prove
/// sandbox` and alone as `linkrelay sandbox`: the simulator says what to answer, the front door carries it
/// out (a dropped connection too; a hang's task is cancelled when its client leaves).
final class SandboxController: Sendable {
    let sandbox: ProveSandbox

    init(sandbox: ProveSandbox) {
        self.sandbox = sandbox
    }

    func answer(_ request: RelayRequest) -> Reply {
        .later { [sandbox] in
            let response = await sandbox.respond(
                method: request.method.rawValue, path: String(request.path), query: request.query.map(String.init),
                authorization: request.headers.first(name: "Authorization"),
                body: request.body.map { Array($0.readableBytesView) })
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
