import Foundation
import LinkRelayTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// A scripted stand-in for both Nevis backends on a real socket, under a base path as the relay's simulator
/// serves them (`/sandbox/nevis`). Each request to a known path takes the next scripted step; once the script
/// is spent it answers 200 with the path's body from `defaults`. Every request is recorded.
actor ScriptedNevis {
    enum Step: Sendable {
        case respond(status: Int, retryAfter: String? = nil, body: String = "")
    }

    struct Recorded: Sendable {
        var path: String
        var headers: HTTPHeaders
        var body: String

        /// The top-level keys of the JSON body.
        var keys: Set<String> {
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
                return []
            }
            return Set(object.keys)
        }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder().decode(T.self, from: Data(body.utf8))
        }
    }

    static let basePath = "/sandbox/nevis"
    static let paths: Set<String> = [
        "/api/v1/approval", "/api/v1/status", "/nevisfido/token/dispatch/authentication", "/nevisfido/status",
    ]

    private var steps: [Step]
    private let defaults: [String: String]
    private(set) var requests: [Recorded] = []

    init(_ steps: [Step] = [], defaults: [String: String] = Fixture.okBodies) {
        self.steps = steps
        self.defaults = defaults
    }

    private func answer(_ path: String, headers: HTTPHeaders, body: String) -> Step {
        requests.append(Recorded(path: path, headers: headers, body: body))
        if !steps.isEmpty { return steps.removeFirst() }
        return .respond(status: 200, body: defaults[path] ?? "{}")
    }

    /// Serves the script live; `body` gets the base URL (`http://127.0.0.1:PORT/sandbox/nevis`).
    func serve<T: Sendable>(_ body: @escaping @Sendable (String) async throws -> T) async throws -> T {
        let handler: TestHTTPServer.Handler = { request in
            guard request.method == .POST, request.path.hasPrefix(Self.basePath) else {
                return .init(status: .notFound)
            }
            let path = String(request.path.dropFirst(Self.basePath.count))
            guard Self.paths.contains(path) else { return .init(status: .notFound) }
            let step = await self.answer(
                path, headers: request.headers, body: String(buffer: request.body))
            switch step {
            case .respond(let status, let retryAfter, let body):
                var headers = HTTPHeaders()
                if let retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
                if !body.isEmpty { headers.add(name: "Content-Type", value: "application/json") }
                return .init(
                    status: HTTPResponseStatus(statusCode: status), headers: headers,
                    body: .bytes(ByteBuffer(string: body)))
            }
        }
        return try await TestHTTPServer.serve(handler) { port in
            try await body("http://127.0.0.1:\(port)\(Self.basePath)")
        }
    }
}
