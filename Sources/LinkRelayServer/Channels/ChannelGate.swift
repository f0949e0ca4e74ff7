import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOHTTP1

/// The checks every channel passes before it opens, in API.md's order: a token at all (401, the route's
/// guard), origin (403), session and token (404), then cursor and timeout (400). An origin no tenant
/// allows is refused before the session is read; one that another tenant allows, once the session's
/// tenant is known. A token that does not match is answered as an unknown id is, by the same path: see
/// `unknownSession()`.
struct ChannelGate: Sendable {
    let store: any SessionStore & InMemoryReads
    let origins: AllowedOrigins
    let securityEvents: SecurityEvents

    typealias Verdict = Result<ChannelAdmission, any Error>

    /// Hands `answer` the gate's answer: at once when the origin is refused or the store holds the
    /// session in memory (a long-poll asks again after every event, so that is most of its openings),
    /// else from a task that reads the session first.
    func admit(_ channel: ChannelRequest, answer: @escaping @Sendable (Verdict) -> Void) {
        if let refused = refusedOrigin(channel.request.headers.first(name: "Origin")) {
            return answer(.failure(refused))
        }
        if let session = store.sessionInMemory(id: channel.sessionID), matches(channel.request, session) {
            return answer(check(channel, session))
        }
        Task { answer(await readAndCheck(channel)) }
    }

    /// Whether the request's token (as the route's guard read it) is the session's.
    private func matches(_ request: RelayRequest, _ session: Session) -> Bool {
        guard case .channelToken(let token) = request.credential else { return false }
        return Secrets.constantTimeEquals(token, session.channelToken)
    }

    /// The 404 of an unknown id, after the store read an unknown id costs: a session found (in memory or
    /// in the store) whose token does not match is refused so too, so that neither the answer nor its
    /// time tells an id that exists from one that does not.
    func unknownSession() async -> any Error {
        do {
            _ = try await store.session(id: Self.decoyID)
        } catch {
            return error
        }
        return SessionError.notFound
    }

    /// An id of a session's length that no session has: `Secrets.sessionID()` makes no `_` after `ses_`.
    private static let decoyID = "ses_decoy_never_a_session_"

    /// The checks on the session as the store reads it; a store that cannot be read is the store's error.
    private func readAndCheck(_ channel: ChannelRequest) async -> Verdict {
        let inMemory = store.sessionInMemory(id: channel.sessionID)
        var session = inMemory
        if inMemory == nil {
            do {
                session = try await store.session(id: channel.sessionID)
            } catch {
                return .failure(error)
            }
        }
        // Found in memory, for a token that does not match: the unknown id's store read follows.
        if let inMemory, !matches(channel.request, inMemory) {
            let origin = channel.request.headers.first(name: "Origin")
            if let refused = refusedOrigin(origin, tenant: inMemory.owner) { return .failure(refused) }
            return .failure(await unknownSession())
        }
        return check(channel, session)
    }

    /// 403 for an `Origin` that no tenant allows; nil without one.
    func refusedOrigin(_ origin: String?) -> Problem? {
        guard let origin, !origins.allowsAny(origin) else { return nil }
        return refused()
    }

    /// 403 for an `Origin` that `tenant` does not allow; nil without one.
    func refusedOrigin(_ origin: String?, tenant: String) -> Problem? {
        guard let origin, !origins.allows(origin, tenant: tenant) else { return nil }
        return refused()
    }

    /// The 403 of an origin that is not allowed. It is readable by any page (`Access-Control-Allow-Origin:
    /// *`, no credentials), so that the browser client can report it and stop rather than retry for ever.
    /// Decided on `Origin` alone, it says nothing of a session; after the session's read (another tenant
    /// allows the origin), only that the id is a session's, which a page holding it knows.
    private func refused() -> Problem {
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
            let origin = request.headers.first(name: "Origin")
            if let refused = refusedOrigin(origin, tenant: session.owner) { throw refused }
            // The token as the route's guard read it (`Route.Guard.channelToken`).
            guard matches(request, session) else { throw SessionError.notFound }
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
                session, cursor: cursor, pollTimeout: timeout,
                headers: corsHeaders(origin, tenant: session.owner))
        }
    }

    /// `error` with the CORS headers of `origin`: a browser shows a page of an allowed origin a refusal
    /// (401, 404, …) only with them, and the browser client learns why a WebSocket was refused from the
    /// long-poll's status. A refused origin's answer is readable by any page (`refused()`); a 429
    /// stays bare. Each CORS header appears once: a refusal's own (`*`) is kept.
    func readable(_ error: any Error, origin: String?) -> any Error {
        guard !(error is LimitExceeded), var problem = ErrorMapping.knownProblem(error) else { return error }
        for (name, value) in corsHeaders(origin) where !problem.headers.contains(name: name) {
            problem.headers.add(name: name, value: value)
        }
        return problem
    }

    /// `Vary: Origin`, and the origin itself when a tenant allows it (`tenant`, when named).
    func corsHeaders(_ origin: String?, tenant: String? = nil) -> HTTPHeaders {
        var headers: HTTPHeaders = ["Vary": "Origin"]
        if let origin, tenant.map({ origins.allows(origin, tenant: $0) }) ?? origins.allowsAny(origin) {
            headers.add(name: "Access-Control-Allow-Origin", value: origin)
        }
        return headers
    }
}

/// The browser origins each tenant's sessions take on their channels and finish hook. SIGHUP's reload
/// replaces the tenants' lists (`replace`).
final class AllowedOrigins: Sendable {
    private struct Table {
        var byTenant: [String: Set<String>]
        /// Every origin some tenant allows.
        var any: Set<String>
    }

    /// `--allowed-origin`'s, for every tenant that names none of its own.
    private let defaults: Set<String>
    private let table: Locked<Table>

    init(defaults: [String], tenants: [TenantSettings] = []) {
        self.defaults = Set(defaults)
        table = Locked(Self.table(defaults: self.defaults, tenants: tenants))
    }

    /// From now on, these tenants' origins.
    func replace(tenants: [TenantSettings]) {
        let replacement = Self.table(defaults: defaults, tenants: tenants)
        table.withLock { $0 = replacement }
    }

    private static func table(defaults: Set<String>, tenants: [TenantSettings]) -> Table {
        var byTenant: [String: Set<String>] = [:]
        for tenant in tenants { byTenant[tenant.name] = tenant.allowedOrigins.map(Set.init) }
        return Table(byTenant: byTenant, any: byTenant.values.reduce(defaults) { $0.union($1) })
    }

    /// Every origin some tenant allows.
    var any: Set<String> { table.withLock { $0.any } }

    func allowsAny(_ origin: String) -> Bool { table.withLock { $0.any.contains(origin) } }

    func allows(_ origin: String, tenant: String) -> Bool {
        table.withLock { $0.byTenant[tenant] ?? defaults }.contains(origin)
    }
}
