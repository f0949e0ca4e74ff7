import Foundation
import Hummingbird
import HummingbirdCore
import LinkRelayCore
import Logging
import NIOCore

/// A request for a desktop channel: `GET /v1/sessions/{id}/events|poll|ws`.
struct ChannelRoute: Sendable {
    let sessionID: String
    let transport: ChannelTransport
    let uri: URI

    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 55

    /// Nil for every other request, which Hummingbird's router answers.
    init?(method: HTTPRequest.Method, target: String) {
        guard method == .get, target.hasPrefix("/v1/sessions/") else { return nil }
        let uri = URI(target)
        let parts = uri.path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "v1", parts[2] == "sessions", !parts[3].isEmpty else {
            return nil
        }
        switch parts[4] {
        case "events": transport = .sse
        case "poll": transport = .longpoll
        case "ws": transport = .websocket
        default: return nil
        }
        sessionID = String(parts[3])
        self.uri = uri
    }
}

/// What a channel may start with, once the gate let it through.
struct ChannelAdmission: Sendable {
    let session: Session
    /// The last event the client has: `?after=N`, or SSE's `Last-Event-ID`, else 0.
    let cursor: Int
    /// How long a long-poll may wait, in seconds (`?timeout=`).
    let pollTimeout: Int
    /// CORS headers for the answer.
    let headers: HTTPFields
}

/// The checks every channel passes before it opens, in API.md's order: origin (403), session (404),
/// channel token (401), then cursor and timeout (400).
struct ChannelGate: Sendable {
    let store: any SessionStore
    let allowedOrigins: Set<String>
    let logger: Logger

    typealias Answer = Result<ChannelAdmission, Problem>

    /// Hands `answer` the gate's answer: at once when the origin is refused or the store holds the
    /// session in memory (a long-poll asks again after every event, so that is most of its openings),
    /// else from a task that reads the session first.
    func admit(
        _ route: ChannelRoute, headers: HTTPFields,
        answer: @escaping @Sendable (Answer) -> Void
    ) {
        if let refused = refusedOrigin(headers) { return answer(.failure(refused)) }
        if let session = store.sessionInMemory(id: route.sessionID) { return answer(check(route, headers, session)) }
        Task { answer(await readAndCheck(route, headers)) }
    }

    /// The checks on the session as the store reads it; a store that cannot be read is a 500.
    private func readAndCheck(_ route: ChannelRoute, _ headers: HTTPFields) async -> Answer {
        do {
            return check(route, headers, try await store.session(id: route.sessionID))
        } catch {
            logger.error("Reading a session for a channel failed", metadata: ["error.type": "\(type(of: error))"])
            return .failure(
                Problem(
                    status: .internalServerError, title: "Internal Server Error", detail: "The relay could not answer.")
            )
        }
    }

    private func refusedOrigin(_ headers: HTTPFields) -> Problem? {
        guard let origin = headers[.origin], !allowedOrigins.contains(origin) else { return nil }
        logger.notice("Channel refused: origin not allowed")
        return Problem(status: .forbidden, title: "Forbidden", detail: "This origin may not open channels.")
    }

    /// The checks after the origin's, on the session as read.
    private func check(_ route: ChannelRoute, _ headers: HTTPFields, _ session: Session?) -> Answer {
        guard let session else { return .failure(.notFound("No session with this id.")) }
        let token = route.uri.queryParameters.get("token") ?? Self.bearerToken(headers)
        guard let token, Secrets.constantTimeEquals(token, session.channelToken) else {
            return .failure(
                Problem(
                    status: .unauthorized, title: "Unauthorized", detail: "A valid channel token is required.",
                    headers: [.wwwAuthenticate: "Bearer"]))
        }
        var cursor = 0
        if let raw = route.uri.queryParameters.get("after") ?? headers[.init("Last-Event-ID")!] {
            guard let value = Int(raw), value >= 0 else {
                return .failure(.badRequest("after must be a whole number of at least 0."))
            }
            cursor = value
        }
        var timeout = ChannelRoute.defaultPollTimeout
        if route.transport == .longpoll, let raw = route.uri.queryParameters.get("timeout") {
            guard let value = Int(raw), (0...ChannelRoute.maximumPollTimeout).contains(value) else {
                return .failure(
                    .badRequest("timeout must be whole seconds from 0 to \(ChannelRoute.maximumPollTimeout)."))
            }
            timeout = value
        }
        return .success(
            ChannelAdmission(
                session: session, cursor: cursor, pollTimeout: timeout, headers: corsHeaders(headers[.origin])))
    }

    /// `Vary: Origin`, and the origin itself when it is allowed.
    func corsHeaders(_ origin: String?) -> HTTPFields {
        var headers: HTTPFields = [.vary: "Origin"]
        if let origin, allowedOrigins.contains(origin) { headers[.accessControlAllowOrigin] = origin }
        return headers
    }

    static func bearerToken(_ headers: HTTPFields) -> String? {
        guard let value = headers[.authorization], value.count > 7, value.prefix(7).lowercased() == "bearer " else {
            return nil
        }
        return String(value.dropFirst(7))
    }
}
