import AsyncHTTPClient
import Foundation
import LinkRelayServer
import LinkRelayTestSupport
import NIOCore
import NevisAPI
import ProveSandbox
import Testing

@testable import NevisSandbox

/// The Nevis simulator served beside Prove's by `SandboxServer` (`linkrelay sandbox`), over TCP: the
/// front door hands the headers over and carries a drop out.
@Suite(.timeLimit(.minutes(1))) struct NevisStandaloneTests {
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    static func send(
        _ port: Int, _ method: String, _ path: String, body: String? = nil, headers: [String: String] = [:]
    ) async throws -> Reply {
        try await withHTTPClient(followingRedirects: false) { http in
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            request.method = .init(rawValue: method)
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body { request.body = .bytes(ByteBuffer(string: body)) }
            let response = try await http.execute(request, timeout: .seconds(30))
            var fields: [String: String] = [:]
            for header in response.headers { fields[header.name.lowercased()] = header.value }
            let bytes = try await response.body.collect(upTo: 1 << 20)
            return Reply(status: Int(response.status.code), headers: fields, body: String(buffer: bytes))
        }
    }

    @Test func servesBothBackendsAndTheAppBesideProve() async throws {
        let nevis = NevisSandbox(publicBaseURL: publicBase)
        let server = SandboxServer(
            sandbox: ProveSandbox(publicBaseURL: publicBase), nevis: nevis, host: "127.0.0.1", port: 0,
            logger: quietLogger("sandbox"))
        try await server.serving { port in
            let json = ["Content-Type": "application/json", "Accept": "application/json"]
            let approval = try await Self.send(
                port, "POST", "/sandbox/nevis/api/v1/approval", body: #"{"channel":"push","username":"dave"}"#,
                headers: json.merging(["Authorization": "Bearer \(NevisSandbox.accessKey)"]) { $1 })
            #expect(approval.status == 200 && approval.headers["cache-control"] == "no-store")
            let started = try JSONDecoder().decode(AuthCloudApprovalResponse.self, from: Data(approval.body.utf8))
            let status = try await Self.send(
                port, "POST", "/sandbox/nevis/api/v1/status", body: #"{"statusToken":"\#(started.statusToken)"}"#,
                headers: json)
            #expect(status.status == 200 && status.body.contains(#""status":"pending""#))

            let dispatch = "/sandbox/nevis/nevisfido/token/dispatch/authentication"
            let body = #"{"dispatcher":"link","getUafRequest":{"op":"Auth"}}"#
            let html = ["Content-Type": "application/json", "Accept": "text/html"]
            #expect(try await Self.send(port, "POST", dispatch, body: body, headers: html).status == 406)
            let dispatched = try await Self.send(port, "POST", dispatch, body: body, headers: json)
            #expect(dispatched.status == 200 && dispatched.body.contains(#""dispatchResult":"dispatched""#))

            let page = try await Self.send(port, "GET", "/sandbox/nevis/app?user=dave")
            #expect(page.status == 200 && page.headers["content-security-policy"]?.contains("'none'") == true)
            #expect(page.body.contains("Approve"))
            // Prove's routes are still Prove's; a path of neither is a 404.
            let token = try await Self.send(
                port, "POST", "/sandbox/prove/token",
                body: "client_id=sandbox-client&client_secret=sandbox-secret&grant_type=client_credentials",
                headers: ["Content-Type": "application/x-www-form-urlencoded"])
            #expect(token.status == 200)
            #expect(try await Self.send(port, "GET", "/sandbox/nevis/nothing").status == 404)

            try nevis.setFault(.drop, for: .status)
            await #expect(throws: (any Error).self) {
                _ = try await Self.send(port, "POST", "/sandbox/nevis/api/v1/status", body: "{}", headers: json)
            }
        }
    }
}
