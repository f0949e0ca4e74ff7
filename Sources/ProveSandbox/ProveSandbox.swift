import Foundation
import ProveAPI

/// A simulator of Prove's v3 sandbox: OAuth2 token, Unify (desktop Instant Link, customer-supplied possession)
/// and Pre-Fill (desktop Instant Link, validate, challenge, complete), with Prove's test users and error bodies
/// (prove-api.md §1, §3, §4, §6, §8).
/// Instant Link SMS go to an in-memory outbox. Faults (latency, HTTP errors, 429s, malformed answers, hangs,
/// dropped connections) can be set per endpoint: see ``SandboxFault`` and `setFault(_:for:)`.
public actor ProveSandbox {
    /// The simulator's own credentials, good for every product, so that one relay runs both flows.
    public static let clientID = "sandbox-client"
    public static let clientSecret = "sandbox-secret"

    /// A Prove project: at Prove, each product's test users work only with the credentials of that
    /// product's project (403 8009 otherwise, prove-api.md §8).
    public enum Project: String, CaseIterable, Sendable {
        /// `sandbox-client`: every product (the simulator's own convenience).
        case all
        /// Unify: `/v3/unify`, `/v3/unify-status`, `/v3/unify-bind`.
        case unify
        /// Pre-Fill: `/v3/start` → validate → challenge → complete.
        case prefill
        /// Prove Identity: the same routes, but validate offers `v3-complete` at once: the customer types
        /// their details, nothing is pre-filled (no challenge).
        case identity

        /// The project's client id; its secret is the id with `-secret` in place of `-client`.
        public var clientID: String { self == .all ? ProveSandbox.clientID : "sandbox-\(rawValue)-client" }
        public var clientSecret: String { self == .all ? ProveSandbox.clientSecret : "sandbox-\(rawValue)-secret" }

        func allows(_ endpoint: APIEndpoint) -> Bool {
            switch (self, endpoint) {
            case (.all, _): true
            case (.unify, .unify), (.unify, .unifyStatus), (.unify, .unifyBind): true
            case (.prefill, .start), (.prefill, .validate), (.prefill, .challenge), (.prefill, .complete): true
            case (.identity, .start), (.identity, .validate), (.identity, .complete): true
            default: false
            }
        }
    }
    /// Prove's default Instant Link text; `####` is replaced by the link.
    public static let defaultInstantLinkText =
        "Complete your verification. If you did not make this request, do not click the link. ####"
    /// Sessions expire 15 minutes after `/v3/unify` or `/v3/start` returned.
    public static let flowLifetime: TimeInterval = 15 * 60
    /// Request bodies must be under 4 KB: a larger one gets Prove's 400 with code 8001 (`respond`).
    public static let maxBodyBytes = 4095
    /// The most a server reads of a body for the simulator's routes, so that a body of 4 KB or more
    /// still reaches `respond` and gets Prove's answer; past it the server refuses the body itself.
    public static let maxReadBytes = 64 * 1024
    /// The outbox keeps at most this many messages (oldest dropped first).
    public static let maxOutboxMessages = 20_000

    enum UnifyState: Sendable {
        case pending
        /// `possessionType=mobile`: possession would run in the client SDK, which the simulator does not have.
        case awaitingClientSDK
        case possessionRequired
        case passed
        case failed
    }

    struct UnifyFlow: Sendable {
        /// Nil until a bind names the number, for a flow started without one (Mobile Auth or
        /// customer-supplied possession: "Mobile Auth in the United States doesn't require a phone number").
        var user: UnifyTestUser?
        var phoneNumber: String?
        var possessionType: String
        var finalTargetUrl: String?
        var clientRequestId: String
        var clientHumanId: String?
        var createdAt: Date
        var state: UnifyState
        /// The SMS text as the integrator asked for it (`####` where the link goes).
        var smsMessage: String?
        /// Instant Link SMS sent, and phone numbers used, for the client SDK's resend and number
        /// change: at most `maximumSends` and `maximumNumbers`, the first included (Prove's docs).
        var sends = 0
        var numbers = 1
        /// The Prove Key the request named (`deviceId`), and whether it asked to rebind it.
        var deviceId: String?
        var rebind = false
        /// The Prove Key is bound to another number (Prove's 9101).
        var keyMismatch = false
    }

    /// A link in an SMS: its flow, and the `authId` its redirect carries (each send has its own).
    struct LinkTarget: Sendable {
        let correlationId: String
        let authId: String
    }

    public static let maximumSends = 3
    public static let maximumNumbers = 3

    struct PrefillFlow: Sendable {
        var user: PrefillTestUser
        var phoneNumber: String
        var finalTargetUrl: String?
        /// The challenge given at start, used when `/v3/challenge` gives none.
        var dob: String?
        var ssn: String?
        var smsMessage: String?
        var createdAt: Date
        /// Possession: passed at once for the short-term user; else the Instant Link's tap decides it (a
        /// mobile flow would need the client SDK, which the simulator does not have).
        var possession: UnifyState
        /// The steps Prove allows next; a step it does not name answers 403 8003.
        var next: [String: String]
        /// Started with Prove Identity's credentials: validate offers `v3-complete`, not a challenge.
        var identity = false
    }

    public let publicBaseURL: String
    public let tokenLifetime: Int
    private let now: @Sendable () -> Date

    /// Issued tokens: when each expires, and the project whose credentials asked for it.
    private var tokens: [String: (expiry: Date, project: Project)] = [:]
    private var unifyFlows: [String: UnifyFlow] = [:]
    private var prefillFlows: [String: PrefillFlow] = [:]
    /// Instant Link id → its flow and authId.
    private var links: [String: LinkTarget] = [:]
    /// Prove Keys (a device's `deviceId`) → the one phone number each is bound to.
    private var proveKeys: [String: String] = [:]
    private var messages: [SandboxOutboxMessage] = []
    private var lastPurge = Date.distantPast
    private var callCounts: [String: Int] = [:]
    private var issuedTokenCount = 0
    /// Faults, hung requests and their observers (`ProveSandbox+Faults.swift`).
    var faultState = SandboxFaultState()

    /// - Parameters:
    ///   - publicBaseURL: e.g. "http://127.0.0.1:8080"; Instant Links are built from it, never from `Host`.
    ///   - tokenLifetime: `expires_in` of issued tokens, in seconds.
    ///   - now: the sandbox's clock (token and session expiry, `sentAt`).
    public init(publicBaseURL: String, tokenLifetime: Int = 3600, now: @escaping @Sendable () -> Date = { Date() }) {
        var base = publicBaseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.publicBaseURL = base
        self.tokenLifetime = tokenLifetime
        self.now = now
    }

    // MARK: Test hooks

    /// Outbox messages for `phoneNumber` (`nil`: all), oldest first.
    public func outbox(phoneNumber: String?) -> [SandboxOutboxMessage] {
        guard let phoneNumber else { return messages }
        let key = normalizePhone(phoneNumber)
        return messages.filter { normalizePhone($0.phoneNumber) == key }
    }

    /// Makes every issued token invalid: the next API call gets 401.
    public func revokeAllTokens() {
        tokens.removeAll()
    }

    /// How many tokens `/token` issued.
    public var tokensIssued: Int { issuedTokenCount }

    /// How many requests reached an endpoint: "token", "unify", "unify-status", "unify-bind", "start",
    /// "validate", "challenge", "complete", "link", "outbox".
    public func callCount(_ endpoint: String) -> Int {
        callCounts[endpoint, default: 0]
    }

    /// Unify sessions that have not expired.
    public var activeUnifySessions: Int {
        let cutoff = now().addingTimeInterval(-Self.flowLifetime)
        return unifyFlows.values.filter { $0.createdAt > cutoff }.count
    }

    // MARK: Token

    func token(form: [UInt8]?) -> SandboxReply {
        count("token")
        guard let form else { return .error(400, 8001, "request body must be under 4 KB") }
        let fields = Self.parseForm(String(decoding: form, as: UTF8.self))
        guard let project = Project.allCases.first(where: { $0.clientID == fields["client_id"] }),
            fields["client_secret"] == project.clientSecret
        else {
            return .error(401, 8002, "not authorized")
        }
        guard fields["grant_type"] == "client_credentials" else {
            return .error(400, 8001, "grant_type must be client_credentials")
        }
        let current = now()
        tokens = tokens.filter { $0.value.expiry > current }
        let token = Self.makeJWT()
        tokens[token] = (current.addingTimeInterval(TimeInterval(tokenLifetime)), project)
        issuedTokenCount += 1
        return .json(
            200,
            ProveTokenResponse(accessToken: token, tokenType: "Bearer", expiresIn: tokenLifetime)
        )
    }

    // MARK: /v3 API

    enum APIEndpoint: String, CaseIterable, Sendable {
        case unify
        case unifyStatus = "unify-status"
        case unifyBind = "unify-bind"
        case start
        case validate
        case challenge
        case complete

        /// The same endpoint, as faults name it (the names are the same).
        var faultEndpoint: SandboxEndpoint { SandboxEndpoint(rawValue: rawValue)! }
    }

    func handle(_ endpoint: APIEndpoint, authorization: String?, body: [UInt8]?) -> SandboxReply {
        count(endpoint.rawValue)
        guard let project = project(of: authorization) else { return .error(401, 8002, "not authorized") }
        guard project.allows(endpoint) else {
            return .error(403, 8009, "the test user is not allowed with these product credentials")
        }
        guard let body else { return .error(400, 8001, "request body must be valid JSON under 4 KB") }
        switch endpoint {
        case .unify: return decode(UnifyRequest.self, body) { unify($0).reply }
        case .unifyStatus: return decode(UnifyStatusRequest.self, body) { unifyStatus($0).reply }
        case .unifyBind: return decode(UnifyBindRequest.self, body) { unifyBind($0).reply }
        case .start:
            return decode(PrefillStartRequest.self, body) { prefillStart($0, identity: project == .identity).reply }
        case .validate: return decode(PrefillValidateRequest.self, body) { prefillValidate($0).reply }
        case .challenge: return decode(PrefillChallengeRequest.self, body) { prefillChallenge($0).reply }
        case .complete: return decode(PrefillCompleteRequest.self, body) { prefillComplete($0).reply }
        }
    }

    /// One of the relay's own calls, answered in process by ``SandboxProveClient`` and counted like a request;
    /// `nil` while any fault is set, so that the call goes over HTTP, where faults act.
    func inProcess<Body: Encodable & Sendable>(
        _ endpoint: APIEndpoint, _ answer: @Sendable (isolated ProveSandbox) -> SandboxAnswer<Body>
    ) -> SandboxAnswer<Body>? {
        guard faultState.table.faults.isEmpty else { return nil }
        count(endpoint.rawValue)
        return answer(self)
    }

    /// The project of a bearer token that has not expired; nil for any other authorization.
    private func project(of authorization: String?) -> Project? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        guard let token = tokens[String(parts[1]).trimmingCharacters(in: .whitespaces)], now() < token.expiry
        else { return nil }
        return token.project
    }

    func unify(_ request: UnifyRequest) -> SandboxAnswer<UnifyResponse> {
        guard ["desktop", "mobile", "none"].contains(request.possessionType) else {
            return .error(400, 8001, "possessionType must be desktop, mobile or none")
        }
        guard !request.clientRequestId.isEmpty else { return .error(400, 8001, "clientRequestId is required") }
        if let url = request.finalTargetUrl, !Self.isValidFinalTargetUrl(url) {
            return .error(400, 8001, "finalTargetUrl is invalid")
        }
        if request.possessionType == "desktop", (request.finalTargetUrl ?? "").isEmpty {
            return .error(400, 8001, "finalTargetUrl is required when possessionType is desktop")
        }
        if let sms = request.smsMessage, sms.count > 160 {
            return .error(400, 8001, "smsMessage must be at most 160 characters")
        }
        if let email = request.emailAddress, !Self.only(email, extra: "@.+") {
            return .error(400, 8001, "emailAddress is invalid")
        }
        if let ip = request.ipAddress, !Self.only(ip, extra: ".:") {
            return .error(400, 8001, "ipAddress is invalid")
        }
        let user: UnifyTestUser?
        let phoneNumber: String?
        if let phone = request.phoneNumber {
            guard !phone.isEmpty, Self.only(phone, extra: "+") else {
                return .error(400, 8001, "phoneNumber is invalid")
            }
            guard let found = UnifyTestUser.find(phoneNumber: phone) else {
                return Self.unknownUser(phone, product: .unify)
            }
            user = found
            phoneNumber = phone
        } else if let proveId = request.proveId {
            guard let found = UnifyTestUser.find(proveId: proveId) else {
                return .error(400, 8007, "no test user found matching the proveId")
            }
            user = found
            phoneNumber = found.phoneNumber
        } else if request.possessionType == "desktop" {
            return .error(400, 8001, "phoneNumber is required")
        } else {
            // Mobile Auth finds the number on the phone; customer-supplied possession names it at the bind.
            user = nil
            phoneNumber = nil
        }

        purgeExpired()
        let correlationId = UUID().uuidString.lowercased()
        // A Prove Key bound to another number: for customer-supplied possession the flow needs a bind (which
        // rebinds the key); on a phone it fails with 9101 unless `rebind` asks for a full possession check.
        let boundNumber = request.deviceId.flatMap { proveKeys[$0] }
        let keyMismatch = boundNumber.map { $0 != phoneNumber } ?? false
        let keyMatches = phoneNumber != nil && boundNumber == phoneNumber && request.possessionType != "desktop"
        let state: UnifyState
        switch (request.possessionType, user?.kind) {
        case ("mobile", _) where keyMismatch && request.rebind != true: state = .failed
        case _ where keyMatches && user?.kind == .possession: state = .passed
        case ("none", _): state = .possessionRequired
        case (_, .shortTerm?): state = .passed
        // A mobile flow with a finalTargetUrl gets the Instant Link as its client SDK's fallback would
        // send it: the simulator has no SDK on a phone.
        case ("desktop", .possession?),
            ("mobile", .possession?) where request.finalTargetUrl != nil:
            state = .pending
        default: state = .awaitingClientSDK
        }
        unifyFlows[correlationId] = UnifyFlow(
            user: user,
            phoneNumber: phoneNumber,
            possessionType: request.possessionType,
            finalTargetUrl: request.finalTargetUrl,
            clientRequestId: request.clientRequestId,
            clientHumanId: request.clientHumanId,
            createdAt: now(),
            state: state,
            smsMessage: request.smsMessage,
            deviceId: request.deviceId,
            rebind: request.rebind == true,
            keyMismatch: keyMismatch
        )
        if state == .pending { sendLink(correlationId) }
        return .ok(UnifyResponse(success: "pending", correlationId: correlationId, authToken: Self.makeJWT()))
    }

    /// Sends the flow's Instant Link to its phone number: a new link, with an `authId` of its own.
    private func sendLink(_ correlationId: String) {
        guard var flow = unifyFlows[correlationId], let phoneNumber = flow.phoneNumber else { return }
        flow.sends += 1
        unifyFlows[correlationId] = flow
        deliverLink(correlationId, to: phoneNumber, smsMessage: flow.smsMessage)
    }

    /// Puts an Instant Link SMS for the flow (Unify or Pre-Fill) in the outbox.
    private func deliverLink(_ correlationId: String, to phoneNumber: String, smsMessage: String?) {
        let linkId = Self.randomBase64URL(bytes: 16)
        links[linkId] = LinkTarget(correlationId: correlationId, authId: UUID().uuidString.lowercased())
        let link = "\(publicBaseURL)/sandbox/link/\(linkId)"
        let template = smsMessage ?? Self.defaultInstantLinkText
        let text =
            template.contains("####") ? template.replacingOccurrences(of: "####", with: link) : "\(template) \(link)"
        messages.append(.init(phoneNumber: phoneNumber, text: text, link: link, sentAt: now()))
        pruneOutbox()
    }

    /// The newest live flow sent to `phoneNumber` that still waits for its tap.
    private func newestPendingFlow(phoneNumber: String) -> String? {
        unifyFlows.filter {
            $0.value.phoneNumber == phoneNumber && $0.value.state == .pending && liveUnifyFlow($0.key) != nil
        }.max { $0.value.createdAt < $1.value.createdAt }?.key
    }

    /// `POST /sandbox/resend?phoneNumber=N`: the client SDK's resend, a new SMS for the newest flow.
    func resend(phoneNumber: String?) -> SandboxReply {
        count("resend")
        guard let phoneNumber, let correlationId = newestPendingFlow(phoneNumber: phoneNumber) else {
            return .error(404, 8008, "no flow waits for a tap on this phone number")
        }
        guard let flow = unifyFlows[correlationId], flow.sends < Self.maximumSends else {
            return .error(429, 8013, "at most \(Self.maximumSends) sends per flow, the first included")
        }
        sendLink(correlationId)
        return .noContent
    }

    /// `POST /sandbox/change-number` `{"from","to"}`: the client SDK's number change; the newest flow on
    /// `from` moves to the test user of `to`, and its link is sent there.
    func changeNumber(body: [UInt8]?) -> SandboxReply {
        count("change-number")
        struct Change: Decodable {
            var from: String
            var to: String
        }
        guard let body else { return .error(400, 8001, "request body is too large") }
        return decode(Change.self, body) { change in
            guard let correlationId = newestPendingFlow(phoneNumber: change.from), var flow = unifyFlows[correlationId]
            else { return .error(404, 8008, "no flow waits for a tap on this phone number") }
            guard let user = UnifyTestUser.find(phoneNumber: change.to) else {
                return .error(400, 8007, "no test user found matching the phone number")
            }
            guard flow.numbers < Self.maximumNumbers, flow.sends < Self.maximumSends else {
                return .error(429, 8013, "at most \(Self.maximumNumbers) numbers per flow, the first included")
            }
            flow.user = user
            flow.phoneNumber = change.to
            flow.numbers += 1
            unifyFlows[correlationId] = flow
            sendLink(correlationId)
            return .noContent
        }
    }

    func unifyStatus(_ request: UnifyStatusRequest) -> SandboxAnswer<UnifyStatusResponse> {
        guard !request.correlationId.isEmpty else { return .error(400, 8001, "correlationId is required") }
        guard let flow = liveUnifyFlow(request.correlationId) else {
            return .error(400, 8008, "invalid correlation ID")
        }
        return .ok(statusResponse(flow, clientRequestId: request.clientRequestId))
    }

    func unifyBind(_ request: UnifyBindRequest) -> SandboxAnswer<UnifyStatusResponse> {
        guard !request.correlationId.isEmpty else { return .error(400, 8001, "correlationId is required") }
        guard !request.phoneNumber.isEmpty, Self.only(request.phoneNumber, extra: "+") else {
            return .error(400, 8001, "phoneNumber is invalid")
        }
        guard var flow = liveUnifyFlow(request.correlationId) else {
            return .error(400, 8008, "invalid correlation ID")
        }
        let number = normalizePhone(request.phoneNumber)
        // A flow started without a number takes the bind's, when it is a test user's.
        if flow.user == nil, flow.state == .possessionRequired, let user = UnifyTestUser.find(phoneNumber: number) {
            flow.user = user
            flow.phoneNumber = request.phoneNumber
        }
        let matches = number == flow.user?.phoneNumber
        switch flow.state {
        case .possessionRequired where matches:
            flow.state = .passed
            flow.keyMismatch = false
            // The device's Prove Key now holds this number, and only this one.
            let deviceId = flow.deviceId ?? "sandbox-device-" + Self.randomBase64URL(bytes: 9)
            flow.deviceId = deviceId
            proveKeys[deviceId] = flow.phoneNumber
            unifyFlows[request.correlationId] = flow
            return .ok(boundResponse(flow, clientRequestId: request.clientRequestId))
        case .passed where matches && flow.possessionType == "none":
            return .ok(boundResponse(flow, clientRequestId: request.clientRequestId))
        default:
            return .ok(
                UnifyStatusResponse(
                    success: "false",
                    clientRequestId: request.clientRequestId ?? flow.clientRequestId
                )
            )
        }
    }

    /// A bind's answer: the flow's status, with the device's Prove Key as `deviceId`.
    private func boundResponse(_ flow: UnifyFlow, clientRequestId: String?) -> UnifyStatusResponse {
        var response = statusResponse(flow, clientRequestId: clientRequestId)
        response.deviceId = flow.deviceId
        return response
    }

    /// Prove's evaluation code for a number the device's Prove Key is not bound to.
    static let keyMismatch = ["9101": "Phone number doesn't match Prove Key. Rebind required."]

    private func statusResponse(_ flow: UnifyFlow, clientRequestId: String?) -> UnifyStatusResponse {
        let echo = clientRequestId ?? flow.clientRequestId
        switch flow.state {
        case .pending:
            return .init(success: "pending", clientRequestId: echo)
        case .possessionRequired:
            return .init(
                success: "possession_required", phoneNumber: flow.phoneNumber, clientRequestId: echo,
                evaluation: flow.keyMismatch
                    ? ["authentication": .init(result: "fail", failureReasons: Self.keyMismatch)] : nil)
        case .passed:
            return .init(
                success: "true",
                phoneNumber: flow.phoneNumber,
                proveId: flow.user?.proveId,
                deviceId: flow.deviceId,
                clientHumanId: flow.clientHumanId ?? flow.user?.clientHumanId,
                clientRequestId: echo,
                evaluation: [
                    "authentication": .init(result: "pass"),
                    "risk": .init(result: "pass"),
                ]
            )
        case .failed, .awaitingClientSDK:
            return .init(
                success: "false",
                phoneNumber: flow.phoneNumber,
                clientRequestId: echo,
                evaluation: [
                    "authentication": .init(
                        result: "fail",
                        failureReasons: flow.keyMismatch ? Self.keyMismatch : ["9100": "Phone possession incomplete."]),
                    "risk": .init(result: "pass"),
                ]
            )
        }
    }

    // MARK: Instant Link page

    /// Prove's Instant Link page: it completes possession (or declines it), then redirects to the
    /// flow's finalTargetUrl; with `redirect` false it answers a page instead, as when the phone's
    /// browser loses the redirect (the customer tapped; the relay never hears of it).
    func openLink(id: String, decline: Bool, redirect: Bool = true) -> SandboxReply {
        count("link")
        if let link = links[id], liveUnifyFlow(link.correlationId) == nil {
            return openPrefillLink(link, decline: decline, redirect: redirect)
        }
        guard let link = links[id], var flow = liveUnifyFlow(link.correlationId), let target = flow.finalTargetUrl
        else {
            return Self.linkNotFound
        }
        if flow.state == .pending {
            flow.state = decline ? .failed : .passed
            // `rebind`: the full possession check passed, so the device's Prove Key takes this number.
            if flow.state == .passed, flow.rebind, let deviceId = flow.deviceId {
                proveKeys[deviceId] = flow.phoneNumber
            }
        }
        let authId = link.authId
        unifyFlows[link.correlationId] = flow
        return Self.linkAnswer(target: target, asc: flow.state == .passed, authId: authId, redirect: redirect)
    }

    static let linkNotFound = SandboxReply.html(
        404, "<!doctype html><title>Link not found</title><p>This link is invalid or has expired.</p>")

    /// The redirect to `finalTargetUrl` with `asc` (whether possession passed) and the link's `authId`, or the
    /// page a lost redirect leaves on the phone.
    static func linkAnswer(target: String, asc: Bool, authId: String, redirect: Bool) -> SandboxReply {
        guard redirect else {
            return .html(200, "<!doctype html><title>Verified</title><p>Thank you. You can close this page.</p>")
        }
        let separator = target.contains("?") ? "&" : "?"
        return .redirect("\(target)\(separator)asc=\(asc)&authId=\(authId)")
    }

    /// A Pre-Fill flow's Instant Link: the tap completes possession (or declines it) while the flow waits for
    /// `/v3/validate`; a tap after that changes nothing.
    private func openPrefillLink(_ link: LinkTarget, decline: Bool, redirect: Bool) -> SandboxReply {
        guard var flow = livePrefillFlow(link.correlationId), let target = flow.finalTargetUrl else {
            return Self.linkNotFound
        }
        if flow.possession == .pending, flow.next["v3-validate"] != nil {
            flow.possession = decline ? .failed : .passed
            prefillFlows[link.correlationId] = flow
        }
        return Self.linkAnswer(target: target, asc: flow.possession == .passed, authId: link.authId, redirect: redirect)
    }

    func outboxReply(phoneNumber: String?) -> SandboxReply {
        count("outbox")
        return .json(200, SandboxOutbox(messages: outbox(phoneNumber: phoneNumber)))
    }

    // MARK: Pre-Fill

    /// Prove's evaluation when possession did not pass (prove-api.md §5).
    static let possessionIncomplete = ["9100": "Phone possession incomplete."]
    /// Prove's evaluation when `/v3/complete` cannot confirm the individual (prove-api.md §5).
    static let identificationFailed = ["9001": "Identification isn't confirmed using 4 elements."]

    /// `/v3/start`. Every desktop flow sends its Instant Link: the tap stands in for the client SDK, as for
    /// Unify. The short-term user passes possession whether or not the link is tapped.
    /// A number that is no test user of `product`: 8009 when it is another product's test user (its
    /// project's credentials would be needed), 8007 otherwise.
    static func unknownUser<Body>(_ phone: String, product: Project) -> SandboxAnswer<Body> {
        let otherProducts =
            product == .unify
            ? PrefillTestUser.find(phoneNumber: phone) != nil : UnifyTestUser.find(phoneNumber: phone) != nil
        return otherProducts
            ? .error(403, 8009, "the test user is not allowed with these product credentials")
            : .error(400, 8007, "no test user found matching the phone number")
    }

    func prefillStart(_ request: PrefillStartRequest, identity: Bool = false) -> SandboxAnswer<PrefillStartResponse> {
        guard ["desktop", "mobile"].contains(request.flowType) else {
            return .error(400, 8001, "flowType must be desktop or mobile")
        }
        if let url = request.finalTargetUrl, !Self.isValidFinalTargetUrl(url) {
            return .error(400, 8001, "finalTargetUrl is invalid")
        }
        if request.flowType == "desktop", (request.finalTargetUrl ?? "").isEmpty {
            return .error(400, 8001, "finalTargetUrl is required when flowType is desktop")
        }
        guard let phone = request.phoneNumber, !phone.isEmpty else {
            return .error(400, 8001, "phoneNumber is required")
        }
        guard Self.only(phone, extra: "+") else { return .error(400, 8001, "phoneNumber is invalid") }
        if let dob = request.dob, !Self.isValidDob(dob) { return .error(400, 8001, "dob is invalid") }
        if let ssn = request.ssn, !Self.isValidSSN(ssn) { return .error(400, 8001, "ssn is invalid") }
        if let sms = request.smsMessage, sms.count > 160 {
            return .error(400, 8001, "smsMessage must be at most 160 characters")
        }
        if let email = request.emailAddress, !Self.only(email, extra: "@.+") {
            return .error(400, 8001, "emailAddress is invalid")
        }
        if let ip = request.ipAddress, !Self.only(ip, extra: ".:") {
            return .error(400, 8001, "ipAddress is invalid")
        }
        guard let user = PrefillTestUser.find(phoneNumber: phone) else {
            return Self.unknownUser(phone, product: .prefill)
        }
        purgeExpired()
        let correlationId = UUID().uuidString.lowercased()
        let desktop = request.flowType == "desktop"
        let possession: UnifyState = user.shortTerm ? .passed : desktop ? .pending : .awaitingClientSDK
        let flow = PrefillFlow(
            user: user,
            phoneNumber: phone,
            finalTargetUrl: request.finalTargetUrl,
            dob: request.dob,
            ssn: request.ssn,
            smsMessage: request.smsMessage,
            createdAt: now(),
            possession: possession,
            next: ["v3-validate": "/v3/validate"],
            identity: identity
        )
        prefillFlows[correlationId] = flow
        if desktop { deliverLink(correlationId, to: phone, smsMessage: request.smsMessage) }
        return .ok(PrefillStartResponse(next: flow.next, authToken: Self.makeJWT(), correlationId: correlationId))
    }

    /// `/v3/validate`: `success` is false until possession passed (before the tap, after a declined tap, or
    /// a mobile flow without the client SDK), and the flow then ends.
    func prefillValidate(_ request: PrefillValidateRequest) -> SandboxAnswer<PrefillValidateResponse> {
        prefillStep(request.correlationId, step: "v3-validate") { flow in
            guard flow.possession == .passed else {
                flow.next = ["done": "done"]
                return .ok(
                    .init(success: false, challengeMissing: false, next: flow.next, phoneNumber: flow.phoneNumber))
            }
            if flow.identity {
                // Prove Identity: nothing to pre-fill; the customer's own details go to complete.
                flow.next = ["v3-complete": "/v3/complete"]
                return .ok(
                    .init(success: true, challengeMissing: false, next: flow.next, phoneNumber: flow.phoneNumber))
            }
            flow.next = ["v3-challenge": "/v3/challenge"]
            let challengeMissing = flow.dob == nil && flow.ssn == nil
            return .ok(
                .init(success: true, challengeMissing: challengeMissing, next: flow.next, phoneNumber: flow.phoneNumber)
            )
        }
    }

    /// `/v3/challenge`: the challenge of this request, else the one given at start; a wrong one ends the flow.
    func prefillChallenge(_ request: PrefillChallengeRequest) -> SandboxAnswer<PrefillChallengeResponse> {
        if let dob = request.dob, !Self.isValidDob(dob) { return .error(400, 8001, "dob is invalid") }
        if let ssn = request.ssn, !Self.isValidSSN(ssn) { return .error(400, 8001, "ssn is invalid") }
        return prefillStep(request.correlationId, step: "v3-challenge") { flow in
            let dob = request.dob ?? flow.dob
            let ssn = request.ssn ?? flow.ssn
            guard dob != nil || ssn != nil else { return .error(400, 8001, "dob or ssn is required") }
            let expected = flow.user.individual
            let dobMatches = dob.map { Self.dobMatches($0, expected.dob ?? "") } ?? true
            let ssnMatches = ssn.map { Self.ssnMatches($0, expected.ssn ?? "") } ?? true
            guard dobMatches, ssnMatches else {
                flow.next = ["done": "done"]
                return .ok(PrefillChallengeResponse(success: false, next: flow.next))
            }
            flow.next = ["v3-complete": "/v3/complete"]
            return .ok(PrefillChallengeResponse(success: true, next: flow.next, individual: expected))
        }
    }

    /// `/v3/complete`: verified when the names are the test user's and any dob or SSN given matches; only the
    /// first address and email count, as at Prove, and they may differ (the customer may have moved).
    func prefillComplete(_ request: PrefillCompleteRequest) -> SandboxAnswer<PrefillCompleteResponse> {
        let given = request.individual
        if let dob = given.dob, !Self.isValidDob(dob) { return .error(400, 8001, "individual.dob is invalid") }
        if let ssn = given.ssn, !Self.isValidSSN(ssn) { return .error(400, 8001, "individual.ssn is invalid") }
        return prefillStep(request.correlationId, step: "v3-complete") { flow in
            let expected = flow.user.individual
            func same(_ a: String?, _ b: String?) -> Bool {
                guard let a, let b else { return false }
                return a.caseInsensitiveCompare(b) == .orderedSame
            }
            let success =
                same(given.firstName, expected.firstName) && same(given.lastName, expected.lastName)
                && (given.dob.map { Self.dobMatches($0, expected.dob ?? "") } ?? true)
                && (given.ssn.map { Self.ssnMatches($0, expected.ssn ?? "") } ?? true)
            flow.next = ["done": "done"]
            return .ok(
                PrefillCompleteResponse(
                    success: success, next: flow.next,
                    evaluation: success
                        ? nil : ["identification": .init(result: "fail", failureReasons: Self.identificationFailed)]))
        }
    }

    /// Runs a step of a live flow that Prove's last `next` allows: 400 8008 for an unknown or expired flow
    /// (15 minutes after start), 403 8003 for a step out of order or a repeat of a finished one.
    private func prefillStep<Body: Encodable & Sendable>(
        _ correlationId: String,
        step: String,
        _ body: (inout PrefillFlow) -> SandboxAnswer<Body>
    ) -> SandboxAnswer<Body> {
        guard !correlationId.isEmpty else { return .error(400, 8001, "correlationId is required") }
        guard var flow = livePrefillFlow(correlationId) else { return .error(400, 8008, "invalid correlation ID") }
        guard flow.next[step] != nil else { return .error(403, 8003, "step called out of order") }
        let answer = body(&flow)
        prefillFlows[correlationId] = flow
        return answer
    }

    // MARK: Helpers

    func count(_ endpoint: String) {
        callCounts[endpoint, default: 0] += 1
    }

    private func livePrefillFlow(_ correlationId: String) -> PrefillFlow? {
        guard let flow = prefillFlows[correlationId],
            flow.createdAt.addingTimeInterval(Self.flowLifetime) > now()
        else { return nil }
        return flow
    }

    private func liveUnifyFlow(_ correlationId: String) -> UnifyFlow? {
        guard let flow = unifyFlows[correlationId],
            flow.createdAt.addingTimeInterval(Self.flowLifetime) > now()
        else { return nil }
        return flow
    }

    /// Keeps the outbox bounded: messages of live sessions only, at most `maxOutboxMessages`. Messages
    /// are kept in the order they were sent, so the expired ones are at the front: a send costs O(1)
    /// unless something is dropped.
    private func pruneOutbox() {
        let cutoff = now().addingTimeInterval(-Self.flowLifetime)
        let drop = max(messages.prefix { $0.sentAt <= cutoff }.count, messages.count - Self.maxOutboxMessages)
        if drop > 0 { messages.removeFirst(drop) }
    }

    /// Forgets expired flows, at most once a minute: a full pass over every flow on each call would
    /// make session creation slow in proportion to the number of live sessions.
    private func purgeExpired() {
        let now = now()
        guard now.timeIntervalSince(lastPurge) >= 60 else { return }
        lastPurge = now
        let cutoff = now.addingTimeInterval(-Self.flowLifetime)
        unifyFlows = unifyFlows.filter { $0.value.createdAt > cutoff }
        prefillFlows = prefillFlows.filter { $0.value.createdAt > cutoff }
        links = links.filter {
            unifyFlows[$0.value.correlationId] != nil || prefillFlows[$0.value.correlationId] != nil
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8], then handler: (T) -> SandboxReply)
        -> SandboxReply
    {
        do {
            return handler(try JSONDecoder().decode(T.self, from: Data(body)))
        } catch DecodingError.keyNotFound(let key, _) {
            return .error(400, 8001, "\(key.stringValue) is required")
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            let name = context.codingPath.last?.stringValue ?? "request body"
            return .error(400, 8001, "\(name) is invalid")
        } catch {
            return .error(400, 8001, "request body is not valid JSON")
        }
    }

    static func isValidFinalTargetUrl(_ url: String) -> Bool {
        !url.isEmpty && url.count <= 128 && only(url, extra: "-._+=/:?")
    }

    /// Whether `value` has only ASCII letters and digits plus the characters of `extra`.
    static func only(_ value: String, extra: String) -> Bool {
        value.unicodeScalars.allSatisfy { scalar in
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9": true
            default: extra.unicodeScalars.contains(scalar)
            }
        }
    }

    /// `YYYY-MM-DD`, `YYYY-MM` or `MM-DD` against the full date.
    static func dobMatches(_ given: String, _ expected: String) -> Bool {
        given == expected || (given.count == 7 && expected.hasPrefix(given))
            || (given.count == 5 && expected.hasSuffix("-" + given))
    }

    /// `YYYY-MM-DD`, `YYYY-MM` or `MM-DD`, with a month 01–12 and a day 01–31.
    static func isValidDob(_ dob: String) -> Bool {
        let parts = dob.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }) else { return false }
        let lengths = parts.map(\.count)
        let month: Substring
        let day: Substring?
        switch lengths {
        case [4, 2, 2]: (month, day) = (parts[1], parts[2])
        case [4, 2]: (month, day) = (parts[1], nil)
        case [2, 2]: (month, day) = (parts[0], parts[1])
        default: return false
        }
        guard let m = Int(month), (1...12).contains(m) else { return false }
        return day.map { Int($0).map { (1...31).contains($0) } ?? false } ?? true
    }

    /// The full SSN (9 digits) or its last 4.
    static func isValidSSN(_ ssn: String) -> Bool {
        (ssn.count == 9 || ssn.count == 4) && ssn.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// The full SSN or its last 4 digits.
    static func ssnMatches(_ given: String, _ expected: String) -> Bool {
        given == expected || (given.count == 4 && expected.hasSuffix(given))
    }

    /// The fields of a form body or a query string (`+` reads as a space; the first of repeated names wins).
    public static func parseForm(_ form: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
            }
            let key = decode(parts[0])
            if fields[key] == nil { fields[key] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }

    /// `bytes` random bytes in unpadded base64url.
    static func randomBase64URL(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let urlSafe = Data(random).base64EncodedString().utf8.compactMap { byte -> UInt8? in
            switch byte {
            case UInt8(ascii: "+"): UInt8(ascii: "-")
            case UInt8(ascii: "/"): UInt8(ascii: "_")
            case UInt8(ascii: "="): nil
            default: byte
            }
        }
        return String(decoding: urlSafe, as: UTF8.self)
    }

    /// An opaque JWT-shaped token ("eyJ…"); only the sandbox can check it.
    static func makeJWT() -> String {
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\(randomBase64URL(bytes: 24)).\(randomBase64URL(bytes: 32))"
    }
}
