import Foundation

/// What the simulator answers a request with.
public enum SandboxResponse: Sendable {
    case reply(SandboxReply)
    /// Close the connection without an answer (the `drop` and `hang` faults).
    case dropConnection
}

/// The simulator's routes, one table for every server that mounts it (the relay's front door, in the relay
/// with `--prove sandbox` and alone as `linkrelay sandbox`).
enum SandboxRoute: Sendable, Equatable {
    /// `POST /sandbox/prove/token`, or `POST /token` as Prove's server SDKs ask it
    case token
    /// `POST /sandbox/prove/v3/{unify, unify-status, unify-bind, start, validate, challenge, complete}`, or
    /// the same at the root (`/v3/…`)
    case api(ProveSandbox.APIEndpoint)
    /// `GET /sandbox/outbox?phoneNumber=N`
    case outbox
    /// `GET /sandbox/link/{id}`: the Instant Link page; `?decline=1` declines, `?redirect=0` answers a
    /// page instead of the redirect (a lost redirect).
    case link(id: String)
    /// `POST /sandbox/resend?phoneNumber=N`: the client SDK's resend.
    case resend
    /// `POST /sandbox/change-number` `{"from","to"}`: the client SDK's number change.
    case changeNumber
    /// `GET /sandbox/faults`
    case faults
    /// `PUT /sandbox/faults/{endpoint}`
    case setFault(endpoint: String)
    /// `DELETE /sandbox/faults/{endpoint}`
    case clearFault(endpoint: String)
    /// `DELETE /sandbox/faults`
    case clearFaults

    init?(method: String, path: some StringProtocol) {
        var parts = String(path).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // Prove's paths at the root are the same routes as under `/sandbox/prove`.
        if parts.count >= 2, parts[0].isEmpty, parts[1] == "token" || parts[1] == "v3" {
            parts.insert(contentsOf: ["sandbox", "prove"], at: 1)
        }
        guard parts.count >= 3, parts[0].isEmpty, parts[1] == "sandbox" else { return nil }
        switch (method, Array(parts.dropFirst(2))) {
        case ("POST", ["prove", "token"]): self = .token
        case ("POST", let rest) where rest.count == 3 && rest[0] == "prove" && rest[1] == "v3":
            guard let endpoint = ProveSandbox.APIEndpoint(rawValue: rest[2]) else { return nil }
            self = .api(endpoint)
        case ("GET", ["outbox"]): self = .outbox
        case ("GET", let rest) where rest.count == 2 && rest[0] == "link" && !rest[1].isEmpty: self = .link(id: rest[1])
        case ("POST", ["resend"]): self = .resend
        case ("POST", ["change-number"]): self = .changeNumber
        case ("GET", ["faults"]): self = .faults
        case ("PUT", let rest) where rest.count == 2 && rest[0] == "faults" && !rest[1].isEmpty:
            self = .setFault(endpoint: rest[1])
        case ("DELETE", let rest) where rest.count == 2 && rest[0] == "faults" && !rest[1].isEmpty:
            self = .clearFault(endpoint: rest[1])
        case ("DELETE", ["faults"]): self = .clearFaults
        default: return nil
        }
    }

    /// The endpoint whose fault applies to this route; the outbox, the link page and the controls have none.
    var faultEndpoint: SandboxEndpoint? {
        switch self {
        case .token: .token
        case .api(let endpoint): endpoint.faultEndpoint
        default: nil
        }
    }
}

extension ProveSandbox {
    /// Answers one request to `/sandbox/…`, as any server hands it over; nil when no route of the simulator
    /// has this method and path.
    ///
    /// The server carries out what the answer asks: `.dropConnection` closes the connection without a
    /// response. A `hang` fault waits here until the request is released or its task is cancelled: the
    /// server cancels it when the client leaves.
    ///
    /// - Parameters:
    ///   - query: the query string as sent (still percent-encoded).
    ///   - body: the request's body, nil for none. One of 4 KB or more (past ``maxBodyBytes``) is refused as
    ///     Prove refuses it: 400 with code 8001 on Prove's routes. A server reads up to ``maxReadBytes``.
    public nonisolated func respond(
        method: String, path: String, query: String?, authorization: String?, body: [UInt8]?
    ) async -> SandboxResponse? {
        guard let route = SandboxRoute(method: method, path: path) else { return nil }
        if let endpoint = route.faultEndpoint, let faulted = await faulted(endpoint) { return faulted }
        // Every route below takes a missing body and one too large alike (8001 on Prove's own).
        let body = body.flatMap { $0.count > Self.maxBodyBytes ? nil : $0 }
        let fields = query.map { Self.parseForm($0) } ?? [:]
        switch route {
        case .token:
            return .reply(await token(form: body))
        case .api(let endpoint):
            return .reply(await handle(endpoint, authorization: authorization, body: body))
        case .outbox:
            // A `+` in a query string reads as a space.
            let phone = fields["phoneNumber"]?.replacingOccurrences(of: " ", with: "+")
            return .reply(await outboxReply(phoneNumber: phone?.isEmpty == false ? phone : nil))
        case .link(let id):
            return .reply(
                await openLink(id: id, decline: fields["decline"] == "1", redirect: fields["redirect"] != "0"))
        case .resend:
            return .reply(await resend(phoneNumber: fields["phoneNumber"]?.replacingOccurrences(of: " ", with: "+")))
        case .changeNumber:
            return .reply(await changeNumber(body: body))
        case .faults:
            return .reply(await faultListReply())
        case .setFault(let endpoint):
            return .reply(await putFaultReply(endpoint: endpoint, body: body))
        case .clearFault(let endpoint):
            return .reply(await deleteFaultReply(endpoint: endpoint))
        case .clearFaults:
            await clearFaults()
            return .reply(.noContent)
        }
    }

    /// `http://HOST:PORT` (IPv6 hosts in brackets): where a standalone sandbox is reached.
    public static func localBaseURL(host: String, port: Int) -> String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}
