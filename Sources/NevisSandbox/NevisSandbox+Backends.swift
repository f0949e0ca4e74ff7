import Foundation
import NevisAPI
import ProveSandbox

/// What a backend endpoint of the simulator answers: its body, or the sandbox's error body with the HTTP
/// status. The routes send it as JSON; ``SandboxNevisClient`` hands it over as it is.
enum NevisAnswer<Body: Encodable & Sendable>: Sendable {
    case ok(Body)
    case error(status: Int, message: String)

    var reply: SandboxReply {
        switch self {
        case .ok(let body): .json(200, body)
        case .error(let status, let message): .nevisError(status, message)
        }
    }
}

// MARK: Authentication Cloud

extension NevisSandbox {
    /// The formatting tags a transaction message may carry (nevis-oob.md §3 confirms `<b>` and the
    /// `<html>` wrapper; the rest of Nevis's small set is a guess). Any other tag, or any attribute, is a 400.
    static let allowedTags: Set<String> = ["html", "b", "i", "u", "br"]

    /// `POST /api/v1/approval` (the caller checked the access key).
    func approval(_ request: AuthCloudApprovalRequest) -> NevisAnswer<AuthCloudApprovalResponse> {
        guard let channel = NevisChannel(rawValue: request.channel) else {
            return .error(status: 400, message: "channel must be app or push (the sandbox simulates no sms or fido2)")
        }
        let message = request.message.flatMap { $0.isEmpty ? nil : $0 }
        if request.prompt == true, message == nil {
            return .error(status: 400, message: "message is required when prompt is true")
        }
        if let message, let problem = Self.markupProblem(in: message) {
            return .error(status: 400, message: problem)
        }
        if request.authenticatorId == "*", channel != .app {
            return .error(status: 400, message: "authenticatorId * is allowed with channel app only")
        }
        let username = request.username.flatMap { $0.isEmpty ? nil : $0 }
        let userId = request.userId.flatMap { $0.isEmpty ? nil : $0 }
        let user: NevisTestUser?
        switch (username, userId) {
        case (nil, nil):
            // Usernameless: the app finds the account (a push needs a device to go to).
            guard channel == .app else {
                return .error(status: 400, message: "username or userId is required for channel push")
            }
            user = nil
        case (let username?, let userId):
            guard let found = NevisTestUser.find(username: username) else {
                return .error(status: 404, message: "no user with this username")
            }
            if let userId, found.userId != userId.lowercased() {
                return .error(status: 400, message: "username and userId name different users")
            }
            user = found
        case (nil, let userId?):
            guard let found = NevisTestUser.find(userId: userId) else {
                return .error(status: 404, message: "no user with this userId")
            }
            user = found
        }
        if user?.device == NevisTestUser.Device.none {
            return .error(status: 400, message: "the user has no registered authenticator")
        }
        let token = UUID().uuidString.lowercased()
        var link: String?
        var qrCode: AuthCloudApprovalResponse.QRCode?
        if channel == .app {
            let appLink = appLink(token: token)
            guard let dataURI = try? Self.qrDataURI(appLink) else {
                return .error(status: 500, message: "the QR code could not be drawn")
            }
            link = appLink
            qrCode = .init(type: "image/png", dataUri: dataURI)
        }
        let operation = Operation(
            backend: .authCloud, handle: Self.makeStatusToken(), token: token, user: user, channel: channel,
            message: message, createdAt: now())
        insert(operation)
        return .ok(
            AuthCloudApprovalResponse(
                transactionId: operation.transactionId, statusToken: operation.handle, userId: user?.userId,
                username: user?.username, qrCode: qrCode, appLinkUri: link,
                createdAt: Self.timestamp(operation.createdAt)))
    }

    /// `POST /api/v1/status`: the status token is the credential. A usernameless operation names its user
    /// only once it succeeded.
    func authCloudStatus(_ request: AuthCloudStatusRequest) -> NevisAnswer<AuthCloudStatusResponse> {
        let now = now()
        return .ok(
            withOperation(handle: request.statusToken) { found in
                guard var operation = found, operation.backend == .authCloud else {
                    return AuthCloudStatusResponse(transactionId: nil, status: "unknown")
                }
                operation.questionAsked(at: now, lifetime: tokenLifetime)
                found = operation
                let phase = operation.phase(at: now, lifetime: tokenLifetime)
                let status =
                    switch phase {
                    // Auth Cloud has no state for the app holding the operation.
                    case .waiting, .redeemed: "pending"
                    case .approved: "succeeded"
                    case .denied, .tokenTimedOut, .timedOut: "failed"
                    }
                let user = operation.identity(in: phase)
                return AuthCloudStatusResponse(
                    transactionId: operation.transactionId, status: status, userId: user?.userId,
                    username: user?.username, createdAt: Self.timestamp(operation.createdAt),
                    lastUpdatedAt: Self.timestamp(operation.lastUpdatedAt))
            })
    }

    /// Why `message` would be refused for its markup (a tag outside ``allowedTags``, an attribute, a
    /// comment); nil when it is plain text or uses allowed tags only. A `<` not followed by a tag name and
    /// a closing `>` is text.
    static func markupProblem(in message: String) -> String? {
        var rest = Substring(message)
        while let open = rest.firstIndex(of: "<") {
            rest = rest[rest.index(after: open)...]
            guard let first = rest.first, first.isASCII, first.isLetter || first == "/" || first == "!" || first == "?",
                let close = rest.firstIndex(of: ">")
            else { continue }
            var inside = rest[..<close]
            rest = rest[rest.index(after: close)...]
            guard inside.first != "!", inside.first != "?" else { return "comments and declarations are not allowed" }
            if inside.first == "/" { inside = inside.dropFirst() }
            if inside.last == "/" { inside = inside.dropLast() }
            let name = inside.prefix { $0.isASCII && ($0.isLetter || $0.isNumber) }
            guard inside.dropFirst(name.count).allSatisfy(\.isWhitespace) else {
                return "tag attributes are not allowed"
            }
            guard allowedTags.contains(name.lowercased()) else { return "unsupported tag <\(name)>" }
        }
        return nil
    }
}

// MARK: nevisFIDO

/// The dispatchers the simulated nevisFIDO has (nevis-oob.md §1b).
enum FidoDispatcher: String, Sendable {
    /// A PNG QR code of the link (base64 in `dispatcherInformation.response`).
    case linkQRCode = "link-png-qr-code"
    /// The link itself.
    case link
    /// A PNG QR code of the raw base64url payload, for the app's own scanner.
    case qrCode = "png-qr-code"
    /// A push to the device of `dispatchTargetId` (the user's id); the app page's user list shows it.
    case push = "firebase-cloud-messaging"
}

/// The redeem service's answer (nevis-oob.md §1b).
struct ReturnUAFRequest: Codable, Sendable, Equatable {
    var statusCode: Int
    var uafRequest: String
    var op: String
    var lifetimeMillis: Int
}

extension NevisSandbox {
    /// `POST /nevisfido/token/dispatch/authentication`: HTTP 200 for any well-formed request, whether or not
    /// it went (`dispatchResult`).
    func dispatch(_ request: DispatchTokenRequest) -> NevisAnswer<DispatchTokenResponse> {
        guard request.getUafRequest.op == "Auth" else {
            return .error(status: 400, message: "getUafRequest.op must be Auth on the authentication endpoint")
        }
        var context = DispatchContext()
        if let text = request.getUafRequest.context, !text.isEmpty {
            guard let decoded = try? JSONDecoder().decode(DispatchContext.self, from: Data(text.utf8)) else {
                return .error(status: 400, message: "getUafRequest.context is not a JSON object")
            }
            context = decoded
        }
        var message: String?
        if let transaction = context.transaction?.first {
            guard let text = Self.base64URLDecoded(transaction.content) else {
                return .error(status: 400, message: "the transaction content is not base64url")
            }
            message = String(decoding: text, as: UTF8.self)
        }
        func notDispatched(_ result: String) -> NevisAnswer<DispatchTokenResponse> {
            .ok(
                .init(
                    token: nil, sessionId: nil, dispatcherInformation: .init(name: request.dispatcher),
                    dispatchResult: result))
        }
        guard let dispatcher = FidoDispatcher(rawValue: request.dispatcher) else {
            return notDispatched("dispatcherNotFound")
        }
        var user: NevisTestUser?
        if let name = context.username, !name.isEmpty {
            guard let found = NevisTestUser.find(username: name) ?? NevisTestUser.find(userId: name) else {
                return notDispatched("userNotFound")
            }
            user = found
        }
        if dispatcher == .push {
            // A push goes to a registered device: the target is the user's id.
            guard let target = request.dispatchTargetId.flatMap(NevisTestUser.find(userId:)),
                user == nil || user == target
            else { return notDispatched("dispatchTargetNotFound") }
            user = target
        }
        if user?.device == NevisTestUser.Device.none { return notDispatched("dispatchTargetNotFound") }

        let token = UUID().uuidString.lowercased()
        let response: String?
        switch dispatcher {
        case .linkQRCode:
            guard let png = try? Self.qrPNG(appLink(token: token)) else { return notDispatched("internalError") }
            response = Data(png).base64EncodedString()
        case .link:
            response = appLink(token: token)
        case .qrCode:
            guard let png = try? Self.qrPNG(encodedPayload(token: token)) else { return notDispatched("internalError") }
            response = Data(png).base64EncodedString()
        case .push:
            response = nil
        }
        let operation = Operation(
            backend: .fido, handle: UUID().uuidString.lowercased(), token: token, user: user,
            channel: dispatcher == .push ? .push : .app, message: message, createdAt: now())
        insert(operation)
        return .ok(
            .init(
                token: token, sessionId: operation.handle,
                dispatcherInformation: .init(name: dispatcher.rawValue, response: response),
                dispatchResult: "dispatched"))
    }

    /// `POST /nevisfido/status`, keyed by the dispatch's session id. `tokenCreated` until the app redeems,
    /// `clientAuthenticating` until it answers; an unredeemed token past its lifetime says `tokenTimedOut`.
    func fidoStatus(_ request: FidoStatusRequest) -> NevisAnswer<FidoStatusResponse> {
        let now = now()
        return .ok(
            withOperation(handle: request.sessionId) { found in
                guard var operation = found, operation.backend == .fido else {
                    return FidoStatusResponse(status: "unknown", timestamp: Self.timestamp(now))
                }
                operation.questionAsked(at: now, lifetime: tokenLifetime)
                found = operation
                let phase = operation.phase(at: now, lifetime: tokenLifetime)
                let status =
                    switch phase {
                    case .waiting, .tokenTimedOut: "tokenCreated"
                    case .redeemed: "clientAuthenticating"
                    case .approved: "succeeded"
                    case .denied, .timedOut: "failed"
                    }
                let tokenResult =
                    phase == .tokenTimedOut ? "tokenTimedOut" : operation.redeemed ? "tokenRedeemed" : nil
                return FidoStatusResponse(
                    status: status, timestamp: Self.timestamp(now), userId: operation.identity(in: phase)?.userId,
                    uafStatusCode: phase == .approved ? 1200 : nil,
                    tokenInformation: tokenResult.map { .init(tokenResult: $0) })
            })
    }

    /// `POST /nevisfido/token/redeem/authentication` `{"token"}`: the app takes the operation (once).
    func redeem(body: [UInt8]) -> SandboxReply {
        struct Redeem: Decodable {
            var token: String
        }
        guard let request = try? JSONDecoder().decode(Redeem.self, from: Data(body)) else {
            return .nevisError(400, "the body must be {\"token\": …}")
        }
        let now = now()
        return withOperation(token: request.token) { found -> SandboxReply in
            guard var operation = found else { return .nevisError(404, "unknown token") }
            let phase = operation.phase(at: now, lifetime: tokenLifetime)
            guard phase == .waiting else {
                return .nevisError(410, phase == .tokenTimedOut ? "the token timed out" : "the token was redeemed")
            }
            operation.redeemed = true
            operation.lastUpdatedAt = now
            found = operation
            let remaining = operation.createdAt.addingTimeInterval(tokenLifetime).timeIntervalSince(now)
            return .json(
                200,
                ReturnUAFRequest(
                    statusCode: 1200, uafRequest: Self.uafRequest(for: operation), op: "Auth",
                    lifetimeMillis: Int(remaining * 1000)))
        }
    }

    /// A stand-in for the UAF AuthenticationRequest the app would sign: its header, a challenge, and the
    /// transaction to confirm.
    static func uafRequest(for operation: Operation) -> String {
        struct Header: Encodable {
            var upv = ["major": 1, "minor": 1]
            var op = "Auth"
            var serverData: String
        }
        struct Transaction: Encodable {
            var contentType = "text/plain"
            var content: String
        }
        struct Request: Encodable {
            var header: Header
            var challenge: String
            var transaction: [Transaction]?
        }
        let request = Request(
            header: Header(serverData: random(bytes: 16)), challenge: random(bytes: 32),
            transaction: operation.message.map { [Transaction(content: base64URL(Array($0.utf8)))] })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode([request])) ?? Data(), as: UTF8.self)
    }
}
