import Foundation

/// Faults, held requests and who watches them, as a ``ProveSandbox`` keeps them.
struct SandboxFaultState: Sendable {
    /// A request the sandbox holds: a fault's latency, or a `hang`.
    struct Held: Sendable {
        /// The key of the fault whose `hang` holds the request; nil for a latency.
        var hang: String?
        /// Finishing it ends the wait.
        var release: AsyncStream<Void>.Continuation
    }

    var table = SandboxFaultTable()
    var held: [UUID: Held] = [:]
    var hangCounts = HangCounts()
    var observers: [UUID: AsyncStream<HangCounts>.Continuation] = [:]
    /// ``ProveSandbox/shutDown()`` was called: nothing is held any more.
    var shutDown = false
}

/// How many requests a `hang` fault has held since the sandbox started, and how many of them ended.
struct HangCounts: Sendable, Equatable {
    var started = 0
    var ended = 0
}

// MARK: Fault API

extension ProveSandbox {
    /// Sets the fault of `endpoint` (`.all`: every Prove endpoint without a fault of its own), replacing its
    /// previous fault and restarting its request count. An empty fault clears it. Requests the replaced fault
    /// holds in a hang are dropped.
    public func setFault(_ fault: SandboxFault, for endpoint: SandboxEndpoint) throws(SandboxFaultError) {
        try faultState.table.set(fault, for: endpoint)
        releaseHangs { $0 == endpoint.rawValue }
    }

    /// Sets the fault of the endpoint named `endpoint` ("token", "unify", "unify-status", "unify-bind", "start",
    /// "validate", "challenge", "complete" or "*"). Throws for an unknown name or an invalid fault.
    public func setFault(_ fault: SandboxFault, for endpoint: String) throws(SandboxFaultError) {
        try setFault(fault, for: try SandboxEndpoint(name: endpoint))
    }

    /// Clears the fault of `endpoint` (`.all`: only the `*` fault) and drops the requests it holds in a hang.
    public func clearFault(for endpoint: SandboxEndpoint) {
        faultState.table.clear(endpoint)
        releaseHangs { $0 == endpoint.rawValue }
    }

    /// Clears every fault and drops every request held in a hang.
    public func clearFaults() {
        faultState.table.clearAll()
        releaseHangs { _ in true }
    }

    /// The faults set: endpoint name ("unify", …, "*") → fault.
    public var faults: [String: SandboxFault] { faultState.table.faults }

    /// How many requests a `hang` fault holds now.
    public var hangingRequests: Int { faultState.held.values.count { $0.hang != nil } }

    /// Ends every hang now (their connections are closed without a response); the faults stay set.
    public func releaseHangs() {
        releaseHangs { _ in true }
    }

    /// The server that serves the sandbox is shutting down, and waits for the requests in progress: every
    /// hang ends now (its connection is dropped), every latency is cut short (its request answered at
    /// once), and from now on no fault holds a request.
    public func shutDown() {
        faultState.shutDown = true
        for held in faultState.held.values { held.release.finish() }
    }

    /// Parses a fault spec of a command-line flag: `ENDPOINT:ITEM[,ITEM...]`, e.g. `unify-status:error=1,status=503`,
    /// `unify:latency=2s`, `*:retry-after=2`, `token:drop`. ENDPOINT is a ``SandboxEndpoint`` name; the items are
    /// those of ``SandboxFault/parse(items:)``. The error names the spec and what is wrong with it.
    public static func parseFault(_ spec: String) throws(SandboxFaultError) -> (endpoint: String, fault: SandboxFault) {
        guard let colon = spec.firstIndex(of: ":") else {
            throw SandboxFaultError("fault \"\(spec)\": expected ENDPOINT:ITEM[,ITEM...], e.g. unify:error=0.5")
        }
        do throws(SandboxFaultError) {
            let endpoint = try SandboxEndpoint(name: spec[..<colon].trimmingCharacters(in: .whitespaces))
            let fault = try SandboxFault.parse(items: String(spec[spec.index(after: colon)...]))
            return (endpoint.rawValue, fault)
        } catch {
            throw SandboxFaultError("fault \"\(spec)\": \(error.description)")
        }
    }

    /// The longest a `hang` fault holds a request whose client stays connected; then its connection is closed.
    public static let maxHang: Duration = .seconds(600)

    // MARK: Internals

    /// Counts a request to `endpoint` for the fault that applies to it; a failing request counts as a call.
    func faultDecision(for endpoint: SandboxEndpoint) -> SandboxFaultTable.Decision? {
        guard let decision = faultState.table.decide(endpoint) else { return nil }
        if decision.failure != nil { count(endpoint.rawValue) }
        return decision
    }

    /// Records a request held by a latency or (with `hang`, its fault's key) a hang; nil after ``shutDown()``.
    func beginHold(hang key: String?, release: AsyncStream<Void>.Continuation) -> UUID? {
        guard !faultState.shutDown else { return nil }
        let id = UUID()
        faultState.held[id] = .init(hang: key, release: release)
        if key != nil {
            faultState.hangCounts.started += 1
            publishHangCounts()
        }
        return id
    }

    func endHold(_ id: UUID) {
        guard let held = faultState.held.removeValue(forKey: id), held.hang != nil else { return }
        faultState.hangCounts.ended += 1
        publishHangCounts()
    }

    /// The hang counts now, then after every change (a test hook).
    func hangCountUpdates() -> AsyncStream<HangCounts> {
        let (stream, continuation) = AsyncStream<HangCounts>.makeStream()
        let id = UUID()
        faultState.observers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeHangObserver(id) }
        }
        continuation.yield(faultState.hangCounts)
        return stream
    }

    private func removeHangObserver(_ id: UUID) {
        faultState.observers[id] = nil
    }

    private func publishHangCounts() {
        for observer in faultState.observers.values { observer.yield(faultState.hangCounts) }
    }

    private func releaseHangs(where matches: (String) -> Bool) {
        for held in faultState.held.values {
            if let key = held.hang, matches(key) { held.release.finish() }
        }
    }
}

// MARK: Answering with a fault

extension ProveSandbox {
    /// Applies the fault of `endpoint`, if any: waits its latency, then returns the faulted response, or `nil`
    /// to answer normally. A `hang` holds the request (see ``hold(_:hang:)``), then drops its connection.
    nonisolated func faulted(_ endpoint: SandboxEndpoint) async -> SandboxResponse? {
        guard let decision = await faultDecision(for: endpoint) else { return nil }
        if let latency = decision.latency { await hold(latency, hang: nil) }
        switch decision.failure {
        case nil:
            return nil
        case .status(let status, let retryAfter):
            return .reply(.faultError(status, retryAfter: retryAfter))
        case .malformed:
            return .reply(.malformed(endpoint))
        case .drop:
            return .dropConnection
        case .hang:
            await hold(Self.maxHang, hang: decision.key)
            return .dropConnection
        }
    }

    /// Waits `duration` (a latency, or a hang of the fault `key`), cut short when the task is cancelled
    /// (the server's way to say the client left) or by ``shutDown()``; a hang also by a change of its fault
    /// or ``releaseHangs()``. After ``shutDown()`` nothing waits.
    private nonisolated func hold(_ duration: Duration, hang key: String?) async {
        let (released, release) = AsyncStream<Void>.makeStream()
        guard let id = await beginHold(hang: key, release: release) else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { for await _ in released {} }
            await group.next()
            group.cancelAll()
        }
        await endHold(id)
    }

    /// `PUT /sandbox/faults/{endpoint}`: the body is a JSON ``SandboxFault`` (it starts with `{`) or spec items
    /// such as `error=0.5,status=503`.
    func putFaultReply(endpoint name: String, body: [UInt8]?) -> SandboxReply {
        do throws(SandboxFaultError) {
            let endpoint = try SandboxEndpoint(name: name.removingPercentEncoding ?? name)
            guard let body else { throw SandboxFaultError("the body must be under 4 KB") }
            try setFault(try Self.decodeFault(body), for: endpoint)
            return .noContent
        } catch {
            return .controlError(error.description)
        }
    }

    func deleteFaultReply(endpoint name: String) -> SandboxReply {
        do throws(SandboxFaultError) {
            clearFault(for: try SandboxEndpoint(name: name.removingPercentEncoding ?? name))
            return .noContent
        } catch {
            return .controlError(error.description)
        }
    }

    func faultListReply() -> SandboxReply {
        .json(200, SandboxFaultList(faults: faults))
    }

    static func decodeFault(_ body: [UInt8]) throws(SandboxFaultError) -> SandboxFault {
        try SandboxFault.decode(body)
    }
}

extension SandboxReply {
    public static let noContent = SandboxReply(status: 204, contentType: nil, body: [])

    /// A control endpoint's 400: `{"error": message}`.
    static func controlError(_ message: String) -> SandboxReply {
        json(400, ["error": message])
    }

    /// Prove's error body (code 8000, "Internal Error") with `status`, and `Retry-After` when given.
    static func faultError(_ status: Int, retryAfter: Int?) -> SandboxReply {
        let message: String
        switch status {
        case 429: message = "rate limit exceeded"
        case 500: message = "internal error"
        case 502: message = "bad gateway"
        case 503: message = "service unavailable"
        case 504: message = "gateway timeout"
        default: message = status < 500 ? "client error" : "server error"
        }
        var reply = error(status, 8000, message + " (sandbox fault)")
        reply.retryAfter = retryAfter
        return reply
    }

    /// 200 with a JSON content type and a JSON object cut short.
    static func malformed(_ endpoint: SandboxEndpoint) -> SandboxReply {
        let text =
            endpoint == .token
            ? #"{"access_token":"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."#
            : #"{"success":"pending","correlationId":"7f3e"#
        return .init(status: 200, contentType: "application/json", body: Array(text.utf8))
    }
}

/// A fault as a PUT's body gives it: JSON, or spec items (`latency=250ms,error=0.5`).
public protocol SandboxFaultBody: Decodable {
    static func parse(items text: String) throws(SandboxFaultError) -> Self
    func validate() throws(SandboxFaultError)
}

extension SandboxFaultBody {
    /// The fault a body names, checked; a clear error for anything else.
    public static func decode(_ body: [UInt8]) throws(SandboxFaultError) -> Self {
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("{") else { return try parse(items: text) }
        let fault: Self
        do {
            fault = try JSONDecoder().decode(Self.self, from: Data(body))
        } catch DecodingError.dataCorrupted(let context) where !context.codingPath.isEmpty {
            throw SandboxFaultError(context.debugDescription)
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            throw SandboxFaultError("\(context.codingPath.last?.stringValue ?? "the body") has the wrong type")
        } catch {
            throw SandboxFaultError("the body is neither a JSON fault nor fault items")
        }
        try fault.validate()
        return fault
    }
}

extension SandboxFault: SandboxFaultBody {}
