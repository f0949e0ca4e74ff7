import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

/// Faults, hung requests and who watches them, as a ``ProveSandbox`` keeps them.
struct SandboxFaultState: Sendable {
    struct Hang: Sendable {
        /// The key of the fault that made the request hang.
        var key: String
        /// Finishing it ends the hang.
        var release: AsyncStream<Void>.Continuation
    }

    var table = SandboxFaultTable()
    var hangs: [UUID: Hang] = [:]
    var hangCounts = HangCounts()
    var observers: [UUID: AsyncStream<HangCounts>.Continuation] = [:]
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
        releaseHangs { $0.key == endpoint.rawValue }
    }

    /// Sets the fault of the endpoint named `endpoint` ("token", "unify", "unify-status", "unify-bind", "start",
    /// "validate", "challenge", "complete" or "*"). Throws for an unknown name or an invalid fault.
    public func setFault(_ fault: SandboxFault, for endpoint: String) throws(SandboxFaultError) {
        try setFault(fault, for: try SandboxEndpoint(name: endpoint))
    }

    /// Clears the fault of `endpoint` (`.all`: only the `*` fault) and drops the requests it holds in a hang.
    public func clearFault(for endpoint: SandboxEndpoint) {
        faultState.table.clear(endpoint)
        releaseHangs { $0.key == endpoint.rawValue }
    }

    /// Clears every fault and drops every request held in a hang.
    public func clearFaults() {
        faultState.table.clearAll()
        releaseHangs { _ in true }
    }

    /// The faults set: endpoint name ("unify", …, "*") → fault.
    public var faults: [String: SandboxFault] { faultState.table.faults }

    /// How many requests a `hang` fault holds now.
    public var hangingRequests: Int { faultState.hangs.count }

    /// Ends every hang now (their connections are closed without a response); the faults stay set.
    /// A graceful shutdown of the server ends them by itself.
    public func releaseHangs() {
        releaseHangs { _ in true }
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

    func beginHang(key: String, release: AsyncStream<Void>.Continuation) -> UUID {
        let id = UUID()
        faultState.hangs[id] = .init(key: key, release: release)
        faultState.hangCounts.started += 1
        publishHangCounts()
        return id
    }

    func endHang(_ id: UUID) {
        faultState.hangs[id] = nil
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

    private func releaseHangs(where matches: (SandboxFaultState.Hang) -> Bool) {
        for hang in faultState.hangs.values where matches(hang) { hang.release.finish() }
    }
}

// MARK: Answering with a fault

extension ProveSandbox {
    /// Applies the fault of `endpoint`, if any: waits its latency, then returns the faulted response, or `nil`
    /// to answer normally. A `hang` is held through `hold` (see `respond`).
    nonisolated func faulted(
        _ endpoint: SandboxEndpoint, hold: (@Sendable () async -> Void) async -> Void
    ) async -> SandboxResponse? {
        guard let decision = await faultDecision(for: endpoint) else { return nil }
        if let latency = decision.latency {
            // Cut short when the server shuts down (it waits for requests in progress): then answer at once.
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: latency) }
        }
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
            let key = decision.key
            await hold { await self.hang(key: key) }
            return .dropConnection
        }
    }

    /// Holds a request without answering until its task is cancelled (the server's way to say the client
    /// left), the server shuts down gracefully, the fault is cleared or replaced (or ``releaseHangs()``),
    /// or ``maxHang`` passes.
    ///
    /// A graceful shutdown waits for requests in progress, and so for a hang; Hummingbird's connection tasks
    /// inherit the service group's graceful-shutdown handler, so the hang ends when the shutdown begins.
    private nonisolated func hang(key: String) async {
        let (released, release) = AsyncStream<Void>.makeStream()
        let id = await beginHang(key: key, release: release)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await Task.sleep(for: Self.maxHang) }
                group.addTask { for await _ in released {} }
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            release.finish()
        }
        await endHang(id)
    }

    /// A response that is never sent: the connection closes instead. When the context hands over its
    /// connection (``ConnectionRequestContext``, as the standalone sandbox's does), the
    /// connection is closed outright, before anything is written. Otherwise this cancels the task that
    /// serves the connection: Hummingbird then closes the channel's input, and the response's first
    /// write fails with `CancellationError` (NIO's async writer refuses writes from a cancelled task).
    /// That way is racy: NIO's HTTP error handler may answer the half-closed connection with a 400
    /// first. Should the task not be the connection's (a middleware running the handler in a child
    /// task, or the router test framework), the body below throws after the head: the client gets a
    /// head and a connection closed mid-body, or, in the router test framework, an error from `execute`.
    static func droppedConnection(_ context: some RequestContext) -> Response {
        if let connection = (context as? any ConnectionRequestContext)?.connection {
            connection.close(promise: nil)
        } else {
            withUnsafeCurrentTask { $0?.cancel() }
        }
        return Response(
            status: .badGateway,
            headers: [.connection: "close"],
            body: ResponseBody { _ in throw SandboxConnectionDropped() }
        )
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
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("{") else { return try SandboxFault.parse(items: text) }
        let fault: SandboxFault
        do {
            fault = try JSONDecoder().decode(SandboxFault.self, from: Data(body))
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

/// Thrown by the body of a dropped connection's response, so that nothing more is written.
struct SandboxConnectionDropped: Error {}

/// A request context that hands the sandbox its connection, so that a dropped-connection fault can close it.
public protocol ConnectionRequestContext: RequestContext {
    var connection: any Channel { get }
}

extension SandboxReply {
    static let noContent = SandboxReply(status: 204, contentType: nil, body: [])

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
        default: message = HTTPResponse.Status(code: status).reasonPhrase.lowercased()
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
