import Foundation
import NevisAPI
import ProveSandbox
import Synchronization
import Testing

@testable import NevisSandbox

let publicBase = "http://sandbox.test:8080"

/// The sandbox's clock in a test: it moves only when told.
final class TestClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))

    var now: Date { current.withLock { $0 } }

    func advance(_ seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}

/// A `drop` or `hang` fault: the server would close the connection without an answer.
struct ConnectionDropped: Error {}

/// Drives the simulator's `respond` as a server hands requests over: no socket.
struct NevisTestClient: Sendable {
    let sandbox: NevisSandbox
    let clock: TestClock

    init(tokenLifetime: TimeInterval = NevisSandbox.defaultTokenLifetime) {
        let clock = TestClock()
        self.clock = clock
        sandbox = NevisSandbox(publicBaseURL: publicBase, tokenLifetime: tokenLifetime, now: { clock.now })
    }

    func send(
        _ method: String, _ uri: String, body: String? = nil, authorization: String? = nil,
        accept: String? = "application/json", contentType: String? = "application/json"
    ) async throws -> SandboxReply {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let response = await sandbox.respond(
            method: method, path: String(parts[0]), query: parts.count > 1 ? String(parts[1]) : nil,
            authorization: authorization, accept: accept, contentType: contentType,
            body: body.map { Array($0.utf8) } ?? [])
        switch response {
        case nil: throw NotRouted(uri: uri)
        case .dropConnection: throw ConnectionDropped()
        case .reply(let reply): return reply
        }
    }

    struct NotRouted: Error {
        var uri: String
    }

    // MARK: Authentication Cloud

    func approval(_ json: String, key: String? = NevisSandbox.accessKey) async throws -> SandboxReply {
        try await send(
            "POST", "/sandbox/nevis/api/v1/approval", body: json, authorization: key.map { "Bearer \($0)" })
    }

    func approval(_ request: AuthCloudApprovalRequest) async throws -> AuthCloudApprovalResponse {
        let reply = try await approval(String(decoding: try JSONEncoder().encode(request), as: UTF8.self))
        #expect(reply.status == 200, "\(reply.text)")
        return try decode(AuthCloudApprovalResponse.self, reply)
    }

    func authStatus(_ statusToken: String) async throws -> AuthCloudStatusResponse {
        let body = String(
            decoding: try JSONEncoder().encode(AuthCloudStatusRequest(statusToken: statusToken)), as: UTF8.self)
        let reply = try await send("POST", "/sandbox/nevis/api/v1/status", body: body)
        #expect(reply.status == 200, "\(reply.text)")
        return try decode(AuthCloudStatusResponse.self, reply)
    }

    // MARK: nevisFIDO

    func dispatch(
        dispatcher: String = "link-png-qr-code", username: String? = nil, message: String? = nil,
        target: String? = nil
    ) async throws -> DispatchTokenResponse {
        let transaction = message.map {
            [DispatchContext.Transaction(contentType: "text/plain", content: NevisSandbox.base64URL(Array($0.utf8)))]
        }
        let context = String(
            decoding: try JSONEncoder().encode(DispatchContext(username: username, transaction: transaction)),
            as: UTF8.self)
        let request = DispatchTokenRequest(
            dispatcher: dispatcher, dispatchTargetId: target, getUafRequest: .init(op: "Auth", context: context))
        let reply = try await send(
            "POST", "/sandbox/nevis/nevisfido/token/dispatch/authentication",
            body: String(decoding: try JSONEncoder().encode(request), as: UTF8.self))
        #expect(reply.status == 200, "\(reply.text)")
        return try decode(DispatchTokenResponse.self, reply)
    }

    func fidoStatus(_ sessionId: String) async throws -> FidoStatusResponse {
        let body = String(decoding: try JSONEncoder().encode(FidoStatusRequest(sessionId: sessionId)), as: UTF8.self)
        let reply = try await send("POST", "/sandbox/nevis/nevisfido/status", body: body)
        #expect(reply.status == 200, "\(reply.text)")
        return try decode(FidoStatusResponse.self, reply)
    }

    func redeem(_ token: String) async throws -> SandboxReply {
        try await send(
            "POST", "/sandbox/nevis/nevisfido/token/redeem/authentication", body: #"{"token":"\#(token)"}"#,
            accept: "application/fido+uaf")
    }

    // MARK: The app page

    /// Opens a link (an absolute URL on `publicBase`) on the app page.
    func open(_ link: String) async throws -> SandboxReply {
        #expect(link.hasPrefix(publicBase))
        return try await send("GET", String(link.dropFirst(publicBase.count)), accept: "text/html", contentType: nil)
    }

    func page(_ query: String) async throws -> SandboxReply {
        try await send("GET", "/sandbox/nevis/app?\(query)", accept: "text/html", contentType: nil)
    }

    func answer(token: String, _ answer: String, user: String? = nil) async throws -> SandboxReply {
        var form = "token=\(token)&answer=\(answer)"
        if let user { form += "&user=\(user)" }
        return try await send(
            "POST", "/sandbox/nevis/app/answer", body: form, accept: "text/html",
            contentType: "application/x-www-form-urlencoded")
    }
}

extension SandboxReply {
    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

func decode<T: Decodable>(_ type: T.Type, _ reply: SandboxReply) throws -> T {
    try JSONDecoder().decode(T.self, from: Data(reply.body))
}

/// The sandbox's error body.
struct ErrorBody: Decodable {
    var status: Int
    var error: String
    var message: String
}

/// The dispatch token a link or a payload carries.
func token(in link: String) throws -> String {
    try #require(NevisSandbox.decodePayload(link)).data.token
}

let alice = NevisTestUser.find(username: "alice")!
let bob = NevisTestUser.find(username: "bob")!
let dave = NevisTestUser.find(username: "dave")!
let erin = NevisTestUser.find(username: "erin")!
