import NIOHTTP1

/// One line of the route table (`Routes`): a method and a path pattern, whom errors are written for,
/// how much body is read, and the handler.
struct Route: Sendable {
    /// Who reads this route's errors.
    enum Audience: Sendable {
        /// An integrator's backend or a desktop's script: problem+json.
        case api
        /// A person's browser (the phone's landing, the demo): an HTML page.
        case person
    }

    let method: HTTPMethod
    let pattern: PathPattern
    let audience: Audience
    /// The most body bytes read; a larger body reaches the handler as nil.
    let maximumBody: Int
    /// The answer's task is cancelled when the client's connection closes: the sandbox's hangs end so.
    let cancelledWhenClientLeaves: Bool
    let handler: @Sendable (RelayRequest) throws -> Reply

    init(
        _ method: HTTPMethod, _ pattern: PathPattern, _ audience: Audience, body maximumBody: Int = 0,
        cancelledWhenClientLeaves: Bool = false, _ handler: @escaping @Sendable (RelayRequest) throws -> Reply
    ) {
        self.method = method
        self.pattern = pattern
        self.audience = audience
        self.maximumBody = maximumBody
        self.cancelledWhenClientLeaves = cancelledWhenClientLeaves
        self.handler = handler
    }

    /// The handler's reply to `request`; an error it throws is answered as its audience reads errors.
    func reply(to request: RelayRequest, errors: ErrorMapping) -> Reply {
        do {
            return try handler(request)
        } catch {
            return .now(errors.answer(for: error, audience: audience))
        }
    }

    /// A route of the API (`.api`).
    init(
        _ method: HTTPMethod, _ pattern: PathPattern, body maximumBody: Int = 0,
        cancelledWhenClientLeaves: Bool = false,
        _ handler: @escaping @Sendable (RelayRequest) throws -> Reply
    ) {
        self.init(
            method, pattern, .api, body: maximumBody, cancelledWhenClientLeaves: cancelledWhenClientLeaves, handler)
    }
}

/// How a handler answers.
enum Reply: Sendable {
    /// At once, on the connection's event loop.
    case now(Answer)
    /// From a task that runs on the connection's event loop (it reads the store or asks Prove).
    case later(@Sendable () async throws -> Answer)
    /// The connection becomes a desktop channel's (`ChannelsController.open`).
    case channel(ChannelRequest)
}

/// A path pattern: literal segments, `{name}` for any one segment, and a last `**` for any rest.
struct PathPattern: Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case rest
    }

    private let segments: [Segment]
    let description: String

    init(stringLiteral pattern: String) {
        description = pattern
        segments = pattern.split(separator: "/").map { part in
            if part == "**" { return .rest }
            if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(String(part))
        }
    }

    /// The names of the `{name}` segments, in order.
    var parameterNames: [String] {
        segments.compactMap { if case .parameter(let name) = $0 { name } else { nil } }
    }

    /// The `{name}` segments of `path`, in order, or nil when it does not match. A `{name}` never matches
    /// an empty segment (`/l/` is no landing).
    func match(_ path: Substring) -> [Substring]? {
        guard path.first == "/" else { return nil }
        var rest = path.dropFirst()
        var captured: [Substring] = []
        for (index, segment) in segments.enumerated() {
            if segment == .rest { return captured }
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            let part = rest[..<end]
            switch segment {
            case .literal(let literal): guard part == literal else { return nil }
            case .parameter:
                guard !part.isEmpty else { return nil }
                captured.append(part)
            case .rest: break
            }
            let last = index == segments.count - 1
            if last { return end == rest.endIndex ? captured : nil }
            guard end != rest.endIndex else { return nil }
            rest = rest[rest.index(after: end)...]
        }
        // The root pattern `/`.
        return rest.isEmpty ? captured : nil
    }
}
