import Foundation
import Hummingbird
import HummingbirdTesting
import ProveAPI
import ProveSandbox

let publicBase = "http://sandbox.test:8080"

func makeSandboxApp(_ sandbox: ProveSandbox) -> some ApplicationProtocol {
    let router = Router()
    sandbox.addRoutes(to: router)
    return Application(router: router)
}

func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(T.self, from: Data(response.body.readableBytesView))
}

extension TestClientProtocol {
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
        var headers: HTTPFields = [.contentType: "application/json", .accept: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
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

    /// Opens an outbox link (an absolute URL on `publicBase`) through the router.
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
