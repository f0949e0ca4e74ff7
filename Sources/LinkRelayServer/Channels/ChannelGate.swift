import Foundation
import LinkRelayCore
import NIOHTTP1

/// The checks every channel passes before it opens, in API.md's order: origin (403), session (404),
/// channel token (401), then cursor and timeout (400).
struct ChannelGate: Sendable {
    let store: any SessionStore
    let allowedOrigins: Set<String>
    let securityEvents: SecurityEvents

    typealias Verdict = Result<ChannelAdmission, any Error>

    /// Hands `answer` the gate's answer: at once when the origin is refused or the store holds the
    /// session in memory (a long-poll asks again after every event, so that is most of its openings),
    /// else from a task that reads the session first.
    func admit(_ channel: ChannelRequest, answer: @escaping @Sendable (Verdict) -> Void) {
        if let refused = refusedOrigin(channel.request.headers) { return answer(.failure(refused)) }
        if let session = store.sessionInMemory(id: channel.sessionID) { return answer(check(channel, session)) }
        Task { answer(await readAndCheck(channel)) }
    }

    /// The checks on the session as the store reads it; a store that cannot be read is the store's error.
    private func readAndCheck(_ channel: ChannelRequest) async -> Verdict {
        do {
            return check(channel, try await store.session(id: channel.sessionID))
        } catch {
            return .failure(error)
        }
    }

    /// The 403 of an origin that is not allowed. It is readable by any page (`Access-Control-Allow-Origin:
    /// *`, no credentials), so that the browser client can report it and stop rather than retry for ever:
    /// it is decided on `Origin` alone, before the session is read, and says nothing about the session.
    func refusedOrigin(_ headers: HTTPHeaders) -> Problem? {
        guard let origin = headers.first(name: "Origin"), !allowedOrigins.contains(origin) else { return nil }
        securityEvents.record(.channelOrigin)
        var problem = Problem.forbidden("This origin may not open channels.")
        problem.headers.add(name: "Access-Control-Allow-Origin", value: "*")
        return problem
    }

    /// The checks after the origin's, on the session as read.
    private func check(_ channel: ChannelRequest, _ session: Session?) -> Verdict {
        Verdict { () throws(any Error) -> ChannelAdmission in
            let request = channel.request
            guard let session else { throw SessionError.notFound }
            guard let token = try request.queryItem("token") ?? request.bearerToken,
                Secrets.constantTimeEquals(token, session.channelToken)
            else {
                throw Problem.unauthorized("A valid channel token is required.")
            }
            var cursor = 0
            if let raw = try request.queryItem("after") ?? request.headers.first(name: "Last-Event-ID") {
                guard let value = Int(raw), value >= 0 else {
                    throw Problem.badRequest("after must be a whole number of at least 0.")
                }
                cursor = value
            }
            var timeout = ChannelRequest.defaultPollTimeout
            if channel.transport == .longpoll, let raw = try request.queryItem("timeout") {
                guard let value = Int(raw), (0...ChannelRequest.maximumPollTimeout).contains(value) else {
                    throw Problem.badRequest(
                        "timeout must be whole seconds from 0 to \(ChannelRequest.maximumPollTimeout).")
                }
                timeout = value
            }
            return ChannelAdmission(
                session: session, cursor: cursor, pollTimeout: timeout,
                headers: corsHeaders(request.headers.first(name: "Origin")))
        }
    }

    /// `error` with the CORS headers of `origin`: a browser shows a page of an allowed origin a refusal
    /// (401, 404, …) only with them, and the browser client learns why a WebSocket was refused from the
    /// long-poll's status. A refused origin's answer is readable by any page (`refusedOrigin`); a 429
    /// stays bare.
    func readable(_ error: any Error, origin: String?) -> any Error {
        guard !(error is LimitExceeded), var problem = ErrorMapping.knownProblem(error) else { return error }
        problem.headers.add(contentsOf: corsHeaders(origin))
        return problem
    }

    /// `Vary: Origin`, and the origin itself when it is allowed.
    func corsHeaders(_ origin: String?) -> HTTPHeaders {
        var headers: HTTPHeaders = ["Vary": "Origin"]
        if let origin, allowedOrigins.contains(origin) {
            headers.add(name: "Access-Control-Allow-Origin", value: origin)
        }
        return headers
    }
}
