import AsyncHTTPClient
import Foundation
import LinkRelayTestSupport
import NIOCore
import NIOHTTP1
import ProveAPI
import ProveSandbox

let publicBase = "http://sandbox.test:8080"

/// A header's name, as the tests write it.
struct FieldName: Hashable, Sendable {
    let name: String

    static let accept = FieldName(name: "Accept")
    static let authorization = FieldName(name: "Authorization")
    static let cacheControl = FieldName(name: "Cache-Control")
    static let contentType = FieldName(name: "Content-Type")
    static let location = FieldName(name: "Location")
    static let retryAfter = FieldName(name: "Retry-After")
}

/// A request's or a reply's headers.
struct Fields: ExpressibleByDictionaryLiteral, Sendable {
    var values: [String: String] = [:]

    init(dictionaryLiteral elements: (FieldName, String)...) {
        for (name, value) in elements { values[name.name.lowercased()] = value }
    }

    init(_ pairs: [(name: String, value: String)]) {
        for (name, value) in pairs { values[name.lowercased()] = value }
    }

    subscript(_ name: FieldName) -> String? { values[name.name.lowercased()] }
}

/// What the simulator answered, as a server would write it.
struct TestResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: Fields
    var body: ByteBuffer
}

/// A request's method, as the tests write it.
enum Method: String, Sendable {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
    case delete = "DELETE"
}

/// A `drop` or `hang` fault: the server closes the connection without an answer.
struct ConnectionDropped: Error {}

/// Sends requests to the sandbox: in process (``SandboxClient``) or over a socket (``LiveSandboxClient``).
protocol SandboxTestClient: Sendable {
    func execute(uri: String, method: Method, headers: Fields, body: ByteBuffer) async throws -> TestResponse
}

extension SandboxTestClient {
    func execute(uri: String, method: Method) async throws -> TestResponse {
        try await execute(uri: uri, method: method, headers: [:], body: ByteBuffer())
    }
}

/// Drives the simulator's `respond` directly, as a server hands requests over: no socket. The body
/// reaches it whole, as the front door hands over one of up to ``ProveSandbox/maxReadBytes``.
struct SandboxClient: SandboxTestClient {
    let sandbox: ProveSandbox

    init(_ sandbox: ProveSandbox) {
        self.sandbox = sandbox
    }

    func execute(uri: String, method: Method, headers: Fields, body: ByteBuffer) async throws -> TestResponse {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let bytes = Array(body.readableBytesView)
        let response = await sandbox.respond(
            method: method.rawValue, path: String(parts[0]), query: parts.count > 1 ? String(parts[1]) : nil,
            authorization: headers[.authorization], body: bytes)
        switch response {
        case nil: return TestResponse(status: .notFound, headers: [:], body: ByteBuffer())
        case .dropConnection: throw ConnectionDropped()
        case .reply(let reply):
            return TestResponse(
                status: HTTPResponseStatus(statusCode: reply.status), headers: Fields(reply.headers),
                body: ByteBuffer(bytes: reply.body))
        }
    }
}

func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(T.self, from: Data(response.body.readableBytesView))
}

extension SandboxTestClient {
    func requestToken(id: String = ProveSandbox.clientID, secret: String = ProveSandbox.clientSecret)
        async throws -> TestResponse
    {
        try await execute(
            uri: "/sandbox/prove/token",
            method: .post,
            headers: [.contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: "client_id=\(id)&client_secret=\(secret)&grant_type=client_credentials")
        )
    }

    func accessToken() async throws -> String {
        try decode(ProveTokenResponse.self, try await requestToken()).accessToken
    }

    func post(_ path: String, token: String?, json: String) async throws -> TestResponse {
        var headers: Fields = [.contentType: "application/json", .accept: "application/json"]
        if let token { headers.values["authorization"] = "Bearer \(token)" }
        return try await execute(
            uri: "/sandbox/prove/v3/\(path)",
            method: .post,
            headers: headers,
            body: ByteBuffer(string: json)
        )
    }

    func post(_ path: String, token: String?, body: some Encodable) async throws -> TestResponse {
        let json = String(decoding: try JSONEncoder().encode(body), as: UTF8.self)
        return try await post(path, token: token, json: json)
    }

    func unifyDesktop(
        token: String,
        phone: String,
        target: String = "https://relay.example/done",
        clientRequestId: String = "req-1",
        smsMessage: String? = nil
    ) async throws -> TestResponse {
        try await post(
            "unify",
            token: token,
            body: UnifyRequest(
                possessionType: "desktop",
                clientRequestId: clientRequestId,
                phoneNumber: phone,
                finalTargetUrl: target,
                smsMessage: smsMessage
            )
        )
    }

    func status(token: String, _ correlationId: String) async throws -> UnifyStatusResponse {
        let response = try await post(
            "unify-status",
            token: token,
            body: UnifyStatusRequest(correlationId: correlationId)
        )
        return try decode(UnifyStatusResponse.self, response)
    }

    func outbox(_ phone: String) async throws -> [SandboxOutboxMessage] {
        let response = try await execute(uri: "/sandbox/outbox?phoneNumber=\(phone)", method: .get)
        return try decode(SandboxOutbox.self, response).messages
    }

    /// Opens an outbox link (an absolute URL on `publicBase`).
    func open(_ link: String, decline: Bool = false) async throws -> TestResponse {
        let path = String(link.dropFirst(publicBase.count)) + (decline ? "?decline=1" : "")
        return try await execute(uri: path, method: .get)
    }
}

func isUUID(_ value: String) -> Bool {
    UUID(uuidString: value) != nil
}

/// Splits `base?asc=…&authId=…` into its parts.
func redirectParts(_ location: String) -> (base: String, query: [String: String]) {
    guard let url = URLComponents(string: location) else { return (location, [:]) }
    var query: [String: String] = [:]
    for item in url.queryItems ?? [] { query[item.name] = item.value ?? "" }
    var base = url
    base.query = nil
    return (base.string ?? location, query)
}

/// Requests over TCP to a served sandbox (`SandboxServer`, as `linkrelay sandbox` runs it), on a
/// connection of their own.
struct LiveSandboxClient: SandboxTestClient {
    let port: Int

    func execute(uri: String, method: Method, headers: Fields, body: ByteBuffer) async throws -> TestResponse {
        try await withHTTPClient(followingRedirects: false) { http in
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(uri)")
            request.method = HTTPMethod(rawValue: method.rawValue)
            for (name, value) in headers.values { request.headers.add(name: name, value: value) }
            if body.readableBytes > 0 { request.body = .bytes(body) }
            let response = try await http.execute(request, timeout: .seconds(30))
            return TestResponse(
                status: response.status, headers: Fields(response.headers.map { ($0.name, $0.value) }),
                body: try await response.body.collect(upTo: 1 << 20))
        }
    }
}
