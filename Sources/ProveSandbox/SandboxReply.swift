import Foundation
import ProveAPI

/// An HTTP reply of the simulator, independent of the server that writes it.
public struct SandboxReply: Sendable {
    public var status: Int
    public var contentType: String?
    public var body: [UInt8]
    public var location: String?
    /// Seconds for a `Retry-After` header.
    public var retryAfter: Int?
    /// More headers, written after the others (a page's `Content-Security-Policy`).
    public var extraHeaders: [(name: String, value: String)] = []

    public init(status: Int, contentType: String?, body: [UInt8], location: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.location = location
        self.retryAfter = retryAfter
    }

    /// The reply's headers as a server writes them (it adds its own, and `Content-Length`): no reply is
    /// cached.
    public var headers: [(name: String, value: String)] {
        var headers = [(name: "Cache-Control", value: "no-store")]
        if let contentType { headers.append((name: "Content-Type", value: contentType)) }
        if let location { headers.append((name: "Location", value: location)) }
        if let retryAfter { headers.append((name: "Retry-After", value: String(retryAfter))) }
        return headers + extraHeaders
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()

    /// `value` as JSON (keys sorted, dates ISO 8601).
    public static func json(_ status: Int, _ value: some Encodable) -> SandboxReply {
        let body = (try? encoder.encode(value)).map { [UInt8]($0) } ?? []
        return .init(status: status, contentType: "application/json", body: body)
    }

    static func error(_ status: Int, _ code: Int, _ message: String) -> SandboxReply {
        json(status, ProveErrorBody(code: code, message: message))
    }

    public static func html(_ status: Int, _ page: String) -> SandboxReply {
        .init(status: status, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
    }

    public static func redirect(_ location: String) -> SandboxReply {
        .init(status: 302, contentType: nil, body: [], location: location)
    }
}

/// What a `/v3` endpoint of the simulator answers: its body, or Prove's error body with the HTTP status. The
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
