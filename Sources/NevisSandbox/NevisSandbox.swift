import Foundation
import LinkRelaySupport
import NevisAPI
import ProveSandbox

/// A simulator of Nevis's two out-of-band backends under `/sandbox/nevis/` (nevis-oob.md): Authentication
/// Cloud (`api/v1/approval`, `api/v1/status`) and nevisFIDO (`nevisfido/token/dispatch/authentication`,
/// `nevisfido/status`, `nevisfido/token/redeem/authentication`), with the test users of ``NevisTestUser``,
/// an Access App page (`app`) that opens a link or a scanned payload and answers Approve or Deny, and
/// faults per endpoint (``NevisFault``).
///
/// One operation store serves both backends: an Auth Cloud operation is found by its `statusToken`, a
/// nevisFIDO one by its `sessionId`, either by its dispatch token (the app's side). Operations are
/// forgotten ``retention`` after they started; an unanswered one times out after `tokenLifetime`.
public final class NevisSandbox: Sendable {
    /// The Auth Cloud access key the sandbox takes (`Authorization: Bearer …`).
    public static let accessKey = "sandbox-nevis-access-key"
    /// How long a dispatch token (and an unanswered operation) lives, unless `init` says otherwise.
    public static let defaultTokenLifetime: TimeInterval = 5 * 60
    /// Operations are forgotten this long after they started (a status question then answers `unknown`).
    public static let retention: TimeInterval = 15 * 60
    /// Request bodies must be under 4 KB, as the Prove sandbox's (the relay mounts both with one limit).
    public static let maxBodyBytes = ProveSandbox.maxBodyBytes

    /// e.g. "http://127.0.0.1:8080": links, redeem URLs and the app page's forms are built from it.
    public let publicBaseURL: String
    public let tokenLifetime: TimeInterval
    let now: @Sendable () -> Date
    let state = Locked(State())

    /// Everything the sandbox keeps, behind one lock.
    struct State: Sendable {
        /// Handle (Auth Cloud `statusToken`, nevisFIDO `sessionId`) → operation.
        var operations: [String: Operation] = [:]
        /// Dispatch token → handle.
        var handles: [String: String] = [:]
        var lastPurge = Date.distantPast
        var callCounts: [String: Int] = [:]
        var faults = NevisFaultTable()
        /// Requests a fault holds (a latency or a hang), and whether ``shutDown()`` let go of them all.
        var held: [UUID: Held] = [:]
        var shutDown = false
    }

    /// - Parameters:
    ///   - publicBaseURL: where the sandbox is reached from a phone; never taken from `Host`.
    ///   - tokenLifetime: seconds until an unredeemed token times out and an unanswered operation fails.
    ///   - now: the sandbox's clock (token lifetime, retention, timestamps).
    public init(
        publicBaseURL: String, tokenLifetime: TimeInterval = NevisSandbox.defaultTokenLifetime,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        var base = publicBaseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.publicBaseURL = base
        self.tokenLifetime = tokenLifetime
        self.now = now
    }

    // MARK: Test hooks

    /// How many requests reached an endpoint: "approval", "status", "dispatch", "fido-status", "redeem",
    /// "app", "answer"; in-process calls count as requests.
    public func callCount(_ endpoint: String) -> Int {
        state.withLock { $0.callCounts[endpoint, default: 0] }
    }

    /// Operations the store holds (live or not yet forgotten).
    public var storedOperations: Int {
        state.withLock { $0.operations.count }
    }

    func count(_ endpoint: String) {
        state.withLock { $0.callCounts[endpoint, default: 0] += 1 }
    }

    // MARK: The store

    /// Keeps a new operation, after forgetting those past ``retention`` (at most once a minute: a pass over
    /// every operation on each start would make starts slow in proportion to the live ones).
    func insert(_ operation: Operation) {
        let now = now()
        state.withLock { state in
            if now.timeIntervalSince(state.lastPurge) >= 60 {
                state.lastPurge = now
                let cutoff = now.addingTimeInterval(-Self.retention)
                state.operations = state.operations.filter { $0.value.createdAt > cutoff }
                state.handles = state.handles.filter { state.operations[$0.value] != nil }
            }
            state.operations[operation.handle] = operation
            state.handles[operation.token] = operation.handle
        }
    }

    /// Runs `body` on the live operation of `handle` (nil: unknown or forgotten), under the lock.
    func withOperation<T>(handle: String, _ body: (inout Operation?) -> T) -> T {
        let cutoff = now().addingTimeInterval(-Self.retention)
        return state.withLock { state in
            var operation = state.operations[handle].flatMap { $0.createdAt > cutoff ? $0 : nil }
            let result = body(&operation)
            if let operation { state.operations[handle] = operation }
            return result
        }
    }

    /// Runs `body` on the live operation of the dispatch token `token`.
    func withOperation<T>(token: String, _ body: (inout Operation?) -> T) -> T {
        let handle = state.withLock { $0.handles[token] }
        return withOperation(handle: handle ?? "", body)
    }

    /// The live operations of `user` that still wait for an answer, newest first (the app's fetch channel).
    func pendingOperations(of user: NevisTestUser) -> [Operation] {
        let now = now()
        let cutoff = now.addingTimeInterval(-Self.retention)
        return state.withLock { state in
            state.operations.values.filter {
                $0.user == user && $0.createdAt > cutoff && $0.phase(at: now, lifetime: tokenLifetime).isOpen
            }
        }.sorted { $0.createdAt > $1.createdAt }
    }
}

/// One out-of-band operation, started on either backend.
struct Operation: Sendable {
    enum Backend: Sendable {
        case authCloud
        case fido
    }

    enum Answer: Sendable {
        case approved
        case denied
    }

    /// Where the operation is, whichever backend asks; each backend words it its own way.
    enum Phase: Sendable, Equatable {
        /// Nobody has the operation yet.
        case waiting
        /// The app redeemed the token; no answer yet.
        case redeemed
        case approved
        case denied
        /// Never redeemed within the token's lifetime.
        case tokenTimedOut
        /// Redeemed, but not answered within the lifetime.
        case timedOut

        /// Whether an answer can still change it.
        var isOpen: Bool { self == .waiting || self == .redeemed }
    }

    let backend: Backend
    /// What the status question takes: Auth Cloud's `statusToken`, nevisFIDO's `sessionId`.
    let handle: String
    let transactionId: String
    /// The dispatch token in the app's payload.
    let token: String
    /// Nil: usernameless.
    let user: NevisTestUser?
    let channel: NevisChannel
    /// The text to confirm, as the backend got it.
    let message: String?
    let createdAt: Date
    var lastUpdatedAt: Date
    var questions = 0
    var redeemed = false
    var answer: Answer?

    init(
        backend: Backend, handle: String, token: String, user: NevisTestUser?, channel: NevisChannel,
        message: String?, createdAt: Date
    ) {
        self.backend = backend
        self.handle = handle
        self.transactionId = UUID().uuidString.lowercased()
        self.token = token
        self.user = user
        self.channel = channel
        self.message = message
        self.createdAt = createdAt
        self.lastUpdatedAt = createdAt
    }

    /// The scripted devices' rule, the only place it is written: they act on status questions, never on
    /// timers. The first question finds the operation waiting, the second finds the app holding it, the
    /// third and later get the device's answer. An operation that timed out stays as it is.
    mutating func questionAsked(at now: Date, lifetime: TimeInterval) {
        questions += 1
        guard phase(at: now, lifetime: lifetime).isOpen else { return }
        let scripted: Answer? =
            switch user?.device {
            case .approves?: .approved
            case .denies?: .denied
            default: nil
            }
        guard let scripted else { return }
        if questions >= 2, !redeemed {
            redeemed = true
            lastUpdatedAt = now
        }
        if questions >= 3 {
            answer = scripted
            lastUpdatedAt = now
        }
    }

    /// Where the operation is at `now`: an answer stands; without one, the lifetime ends it.
    func phase(at now: Date, lifetime: TimeInterval) -> Phase {
        switch answer {
        case .approved?: return .approved
        case .denied?: return .denied
        case nil:
            guard now < createdAt.addingTimeInterval(lifetime) else { return redeemed ? .timedOut : .tokenTimedOut }
            return redeemed ? .redeemed : .waiting
        }
    }

    /// Who answered, as a status reports it: the named user, or for a usernameless operation the
    /// usernameless account once it succeeded (nil before).
    func identity(in phase: Phase) -> NevisTestUser? {
        user ?? (phase == .approved ? NevisTestUser.usernameless : nil)
    }

    /// Whether a person answers it on the app page: usernameless operations, and users without a
    /// scripted device.
    var answeredOnPage: Bool { user?.answeredOnPage ?? true }
}
