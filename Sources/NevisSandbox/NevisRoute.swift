import Foundation
import NevisAPI
import ProveSandbox

/// The simulator's routes, all under `/sandbox/nevis/`, one table for every server that mounts it (the
/// relay, and `linkrelay sandbox` beside Prove's).
enum NevisRoute: Sendable, Equatable {
    /// `POST api/v1/approval` (Bearer ``NevisSandbox/accessKey``)
    case approval
    /// `POST api/v1/status` `{"statusToken"}`
    case status
    /// `POST nevisfido/token/dispatch/authentication`
    case dispatch
    /// `POST nevisfido/status` `{"sessionId"}`
    case fidoStatus
    /// `POST nevisfido/token/redeem/authentication` `{"token"}`: the app's side
    case redeem
    /// `GET app`: the Access App page (`?dispatchTokenResponse=`, `?payload=`, `?user=`); `GET open` is the
    /// link's own path and shows the same page
    case app
    /// `POST app/answer` (form `token`, `answer=approve|deny`, optional `user`)
    case answer
    /// `GET faults`
    case faults
    /// `PUT faults/{endpoint}`
    case setFault(endpoint: String)
    /// `DELETE faults/{endpoint}`
    case clearFault(endpoint: String)
    /// `DELETE faults`
    case clearFaults
    /// A known path asked with another method.
    case methodNotAllowed

    init?(method: String, path: String) {
        let prefix = "/sandbox/nevis/"
        guard path.hasPrefix(prefix) else { return nil }
        let rest = path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // HEAD reads a page's head: the same route as GET (it redeems nothing, see `appPage`).
        let method = method == "HEAD" ? "GET" : method
        let post: [[String]: NevisRoute] = [
            ["api", "v1", "approval"]: .approval, ["api", "v1", "status"]: .status,
            ["nevisfido", "token", "dispatch", "authentication"]: .dispatch, ["nevisfido", "status"]: .fidoStatus,
            ["nevisfido", "token", "redeem", "authentication"]: .redeem, ["app", "answer"]: .answer,
        ]
        if let route = post[rest] {
            self = method == "POST" ? route : .methodNotAllowed
            return
        }
        switch (method, rest) {
        case ("GET", ["app"]), ("GET", ["open"]): self = .app
        case ("GET", ["faults"]): self = .faults
        case ("DELETE", ["faults"]): self = .clearFaults
        case ("PUT", let rest) where rest.count == 2 && rest[0] == "faults" && !rest[1].isEmpty:
            self = .setFault(endpoint: rest[1])
        case ("DELETE", let rest) where rest.count == 2 && rest[0] == "faults" && !rest[1].isEmpty:
            self = .clearFault(endpoint: rest[1])
        case (_, ["app"]), (_, ["open"]), (_, ["faults"]): self = .methodNotAllowed
        default: return nil
        }
    }

    /// The endpoint whose fault applies; the redeem service, the app page and the controls have none.
    var faultEndpoint: NevisEndpoint? {
        switch self {
        case .approval: .approval
        case .status: .status
        case .dispatch: .dispatch
        case .fidoStatus: .fidoStatus
        default: nil
        }
    }
}

extension NevisSandbox {
    /// Answers one request to `/sandbox/nevis/…`, as any server hands it over; nil for a path outside the
    /// simulator's routes.
    ///
    /// The server carries out what the answer asks: `.dropConnection` closes the connection without a
    /// response. A `hang` fault waits here until it is released or its task is cancelled (the server
    /// cancels it when the client leaves).
    ///
    /// - Parameters:
    ///   - query: the query string as sent (still percent-encoded).
    ///   - authorization, accept, contentType: the request's headers of those names.
    ///   - body: the request's body; nil when it is 4 KB or larger (``maxBodyBytes``).
    public func respond(
        method: String, path: String, query: String?, authorization: String?, accept: String? = nil,
        contentType: String? = nil, body: [UInt8]?
    ) async -> SandboxResponse? {
        guard let route = NevisRoute(method: method, path: path) else { return nil }
        if let endpoint = route.faultEndpoint, let faulted = await faulted(endpoint) { return faulted }
        let fields = query.map { ProveSandbox.parseForm($0) } ?? [:]
        let reply: SandboxReply
        switch route {
        case .approval:
            count(NevisEndpoint.approval.rawValue)
            guard Self.isAccessKey(authorization) else {
                return .reply(.nevisError(401, "a valid access key is required (Authorization: Bearer …)"))
            }
            reply = decode(AuthCloudApprovalRequest.self, body) { approval($0).reply }
        case .status:
            count(NevisEndpoint.status.rawValue)
            reply = decode(AuthCloudStatusRequest.self, body) { authCloudStatus($0).reply }
        case .dispatch:
            count(NevisEndpoint.dispatch.rawValue)
            reply =
                Self.refusedMedia(accept: accept, contentType: contentType)
                ?? decode(DispatchTokenRequest.self, body) { dispatch($0).reply }
        case .fidoStatus:
            count(NevisEndpoint.fidoStatus.rawValue)
            reply =
                Self.refusedMedia(accept: accept, contentType: contentType)
                ?? decode(FidoStatusRequest.self, body) { fidoStatus($0).reply }
        case .redeem:
            count("redeem")
            reply =
                Self.refusedMedia(accept: accept, contentType: contentType, alsoAccepted: "application/fido+uaf")
                ?? redeem(body: body ?? [])
        case .app:
            count("app")
            reply = appPage(fields, opening: method != "HEAD")
        case .answer:
            count("answer")
            reply = answerPage(ProveSandbox.parseForm(String(decoding: body ?? [], as: UTF8.self)))
        case .faults:
            reply = .json(200, NevisFaultList(faults: faults))
        case .setFault(let endpoint):
            reply = putFaultReply(endpoint: endpoint, body: body)
        case .clearFault(let endpoint):
            reply = deleteFaultReply(endpoint: endpoint)
        case .clearFaults:
            clearFaults()
            reply = .noContent
        case .methodNotAllowed:
            reply = .nevisError(405, "method not allowed")
        }
        return .reply(reply)
    }

    static func isAccessKey(_ authorization: String?) -> Bool {
        guard let authorization else { return false }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        return parts.count == 2 && parts[0].lowercased() == "bearer"
            && parts[1].trimmingCharacters(in: .whitespaces) == accessKey
    }

    /// nevisFIDO's 406 (`Accept` allows no JSON) and 415 (the body is not JSON); nil when both fit. No
    /// `Accept` accepts anything.
    static func refusedMedia(accept: String?, contentType: String?, alsoAccepted: String? = nil) -> SandboxReply? {
        let acceptable = ["application/json", "application/*", "*/*"] + (alsoAccepted.map { [$0] } ?? [])
        if let accept {
            let ranges = accept.split(separator: ",").map(mediaType)
            guard ranges.contains(where: acceptable.contains) else {
                return .nevisError(406, "Accept must allow application/json")
            }
        }
        guard contentType.map(mediaType) == "application/json" else {
            return .nevisError(415, "Content-Type must be application/json")
        }
        return nil
    }

    /// `type/subtype` of a media type or range, lowercased, without parameters.
    private static func mediaType(_ value: some StringProtocol) -> String {
        (value.split(separator: ";", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces).lowercased()
    }

    private func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8]?, then handler: (T) -> SandboxReply)
        -> SandboxReply
    {
        guard let body else { return .nevisError(400, "the body must be under 4 KB") }
        do {
            return handler(try JSONDecoder().decode(T.self, from: Data(body)))
        } catch DecodingError.keyNotFound(let key, _) {
            return .nevisError(400, "\(key.stringValue) is required")
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            return .nevisError(400, "\(context.codingPath.last?.stringValue ?? "the body") is invalid")
        } catch {
            return .nevisError(400, "the body is not valid JSON")
        }
    }
}
