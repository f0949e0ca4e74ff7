import Foundation
import ProveSandbox

/// A request a fault holds: a latency, or a `hang`.
struct Held: Sendable {
    /// The key of the fault whose `hang` holds the request; nil for a latency.
    var hang: String?
    /// Finishing it ends the wait.
    var release: AsyncStream<Void>.Continuation
}

// MARK: Fault API

extension NevisSandbox {
    /// Sets the fault of `endpoint` (`.all`: every Nevis endpoint without a fault of its own), replacing its
    /// previous fault and restarting its count. An empty fault clears it. Requests the replaced fault holds
    /// in a hang are dropped.
    public func setFault(_ fault: NevisFault, for endpoint: NevisEndpoint) throws(SandboxFaultError) {
        try state.withLock { state throws(SandboxFaultError) in try state.faults.set(fault, for: endpoint) }
        releaseHangs { $0 == endpoint.rawValue }
    }

    /// Sets the fault of the endpoint named `endpoint` ("approval", "status", "dispatch", "fido-status", "*").
    public func setFault(_ fault: NevisFault, for endpoint: String) throws(SandboxFaultError) {
        try setFault(fault, for: try NevisEndpoint(name: endpoint))
    }

    /// Clears the fault of `endpoint` (`.all`: only the `*` fault) and drops the requests it holds in a hang.
    public func clearFault(for endpoint: NevisEndpoint) {
        state.withLock { $0.faults.clear(endpoint) }
        releaseHangs { $0 == endpoint.rawValue }
    }

    /// Clears every fault and drops every request held in a hang.
    public func clearFaults() {
        state.withLock { $0.faults.clearAll() }
        releaseHangs { _ in true }
    }

    /// The faults set: endpoint name → fault.
    public var faults: [String: NevisFault] { state.withLock { $0.faults.faults } }

    /// How many requests a `hang` fault holds now.
    public var hangingRequests: Int { state.withLock { $0.held.values.count { $0.hang != nil } } }

    /// Ends every hang now (their connections close without a response); the faults stay set.
    public func releaseHangs() {
        releaseHangs { _ in true }
    }

    /// The server is shutting down and waits for the requests in progress: every hang ends now (its
    /// connection is dropped), every latency is cut short, and from now on no fault holds a request.
    public func shutDown() {
        let held = state.withLock { state in
            state.shutDown = true
            return Array(state.held.values)
        }
        for request in held { request.release.finish() }
    }

    /// Parses a fault spec of a command-line flag: `ENDPOINT:ITEM[,ITEM...]`, e.g. `status:error=1,status=503`,
    /// `dispatch:dispatch-error,times=1`, `*:latency=2s`.
    public static func parseFault(_ spec: String) throws(SandboxFaultError) -> (endpoint: String, fault: NevisFault) {
        guard let colon = spec.firstIndex(of: ":") else {
            throw SandboxFaultError("fault \"\(spec)\": expected ENDPOINT:ITEM[,ITEM...], e.g. status:error=1")
        }
        do throws(SandboxFaultError) {
            let endpoint = try NevisEndpoint(name: spec[..<colon].trimmingCharacters(in: .whitespaces))
            let fault = try NevisFault.parse(items: String(spec[spec.index(after: colon)...]))
            return (endpoint.rawValue, fault)
        } catch {
            throw SandboxFaultError("fault \"\(spec)\": \(error.description)")
        }
    }

    // MARK: Answering with a fault

    /// Applies the fault of `endpoint`, if any: waits its latency, then returns the faulted response, or nil
    /// to answer normally. A failing request counts as a call and changes nothing else; a `hang` holds the
    /// request until it is released, then drops its connection.
    func faulted(_ endpoint: NevisEndpoint) async -> SandboxResponse? {
        guard let decision = state.withLock({ $0.faults.decide(endpoint) }) else { return nil }
        if decision.failure != nil { count(endpoint.rawValue) }
        if let latency = decision.latency { await hold(latency, hang: nil) }
        switch decision.failure {
        case nil:
            return nil
        case .dispatchError:
            return .reply(.json(200, DispatchFailure(dispatchResult: "dispatchError")))
        case .http(.status(let status, let retryAfter)):
            var reply = SandboxReply.nevisError(status, "sandbox fault")
            reply.retryAfter = retryAfter
            return .reply(reply)
        case .http(.malformed):
            let text =
                endpoint == .approval ? #"{"transactionId":"7f3e","statusToken":"eyJ"# : #"{"status":"pend"#
            return .reply(.init(status: 200, contentType: "application/json", body: Array(text.utf8)))
        case .http(.drop):
            return .dropConnection
        case .http(.hang):
            await hold(ProveSandbox.maxHang, hang: decision.key)
            return .dropConnection
        }
    }

    /// Waits `duration`, cut short when the task is cancelled (the client left), by ``shutDown()``, and for a
    /// hang by a change of its fault or ``releaseHangs()``. After ``shutDown()`` nothing waits.
    private func hold(_ duration: Duration, hang key: String?) async {
        let (released, release) = AsyncStream<Void>.makeStream()
        let id = UUID()
        let held = state.withLock { state in
            guard !state.shutDown else { return false }
            state.held[id] = Held(hang: key, release: release)
            return true
        }
        guard held else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { for await _ in released {} }
            await group.next()
            group.cancelAll()
        }
        _ = state.withLock { $0.held.removeValue(forKey: id) }
    }

    private func releaseHangs(where matches: (String) -> Bool) {
        let held = state.withLock { state in state.held.values.filter { $0.hang.map(matches) ?? false } }
        for request in held { request.release.finish() }
    }

    /// `PUT /sandbox/nevis/faults/{endpoint}`: a JSON ``NevisFault`` (the body starts with `{`) or spec items.
    func putFaultReply(endpoint name: String, body: [UInt8]?) -> SandboxReply {
        do throws(SandboxFaultError) {
            let endpoint = try NevisEndpoint(name: name.removingPercentEncoding ?? name)
            guard let body else { throw SandboxFaultError("the body must be under 4 KB") }
            try setFault(try Self.decodeFault(body), for: endpoint)
            return .noContent
        } catch {
            return .json(400, ["error": error.description])
        }
    }

    func deleteFaultReply(endpoint name: String) -> SandboxReply {
        do throws(SandboxFaultError) {
            clearFault(for: try NevisEndpoint(name: name.removingPercentEncoding ?? name))
            return .noContent
        } catch {
            return .json(400, ["error": error.description])
        }
    }

    static func decodeFault(_ body: [UInt8]) throws(SandboxFaultError) -> NevisFault {
        try NevisFault.decode(body)
    }
}

/// A dispatch that did not go: HTTP 200 all the same, with only its `dispatchResult`.
struct DispatchFailure: Encodable {
    var dispatchResult: String
}

/// The error body both simulated backends answer with, in the shape of a Spring Boot error (nevisFIDO's
/// framework; Auth Cloud's own shape is not documented): `{"status", "error", "message"}`.
struct NevisErrorBody: Codable, Sendable, Equatable {
    var status: Int
    var error: String
    var message: String
}

extension SandboxReply {
    static func nevisError(_ status: Int, _ message: String) -> SandboxReply {
        let reason =
            switch status {
            case 400: "Bad Request"
            case 401: "Unauthorized"
            case 404: "Not Found"
            case 405: "Method Not Allowed"
            case 406: "Not Acceptable"
            case 410: "Gone"
            case 415: "Unsupported Media Type"
            case 429: "Too Many Requests"
            case 500: "Internal Server Error"
            case 502: "Bad Gateway"
            case 503: "Service Unavailable"
            case 504: "Gateway Timeout"
            default: status < 500 ? "Client Error" : "Server Error"
            }
        return .json(status, NevisErrorBody(status: status, error: reason, message: message))
    }
}

extension NevisFault: SandboxFaultBody {}
