import AsyncHTTPClient
import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// Sends the outbox's messages to their tenants' webhook URLs, signed (Standard Webhooks), at least once each.
///
/// Each tenant with a webhook has a lane of its own (`Lane`): its receiver's circuit breaker, its HTTP
/// client and its sends in flight. A tenant whose receiver is down, slow or huge in its answers ties up
/// only its own lane: another tenant's messages are claimed (by tenant) and sent as if it were alone.
///
/// One loop claims each lane's due messages (leased, so no other instance sends them meanwhile) while
/// fewer than `concurrency` of that lane's are in flight, and each is sent in a task of its own, all
/// on a thread of the sender's own: a receiver that is slow, down or huge in its answers ties up only
/// these tasks and that thread, never a tap, a channel or a call to Prove. The sends' work never queues
/// on the channels' event loops ahead of a tap, and the thread runs at a lower priority (nice 10): when
/// the CPU is short, taps and channels go first and messages wait, kept in the outbox. The loop wakes
/// when a write adds a message, when a send ends, and every `pollInterval` (for retries coming due, and
/// for messages another instance left).
///
/// The store's work is gathered, since it shares the disk with the taps: claims at most every
/// `claimInterval` while the queue keeps up, and the attempts' outcomes in one write every
/// `recordInterval`. One write per outcome, at 2,000 messages a second, quadrupled the bytes SQLite
/// wrote and with them its checkpoint's flush, which the taps' commits then waited behind
/// (Benchmarks/HISTORY.md, "Webhooks").
///
/// A circuit breaker stands for each receiver: after 5 failures in a row, one message goes every 5 s
/// until one is taken. Meanwhile the others wait, due, without an attempt each: when the receiver is
/// back, the backlog goes at once, not at each message's next retry, and an outage costs a few
/// attempts rather than one per message and retry. The messages that failed meanwhile and wait for a
/// retry go with it (`makeRetriesDue`): once a probe gets through, or a delivery follows a failure that
/// found the receiver away.
final class WebhookSender: Service, Sendable {
    /// A 2xx within this long of the attempt's start is a delivery (API.md v1.1).
    static let attemptTimeout: TimeInterval = 15
    /// How long a claimed message stays with its sender: past it, a sender that died has its messages
    /// sent again by another (or by itself after a restart).
    static let lease: TimeInterval = 60
    static let retryFor: TimeInterval = 24 * 3600
    /// The pause before retry n (the last repeats), each made 0.8 to 1.2 times as long (jitter), so that
    /// a receiver that comes back is not met by every message at once.
    static let delays: [TimeInterval] = [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800]
    static let concurrency = 16
    static let pollInterval: TimeInterval = 1
    static let claimInterval: Duration = .milliseconds(5)
    static let recordInterval: Duration = .milliseconds(20)
    /// The answer bodies read, then dropped: more, and the connection is closed instead.
    static let maximumAnswerBytes = 64 * 1024
    /// Attempts kept per message (the newest); only repeated manual retries reach it.
    static let keptAttempts = 50
    static let receiverFailures = 5
    static let probeInterval: TimeInterval = 5

    /// One tenant's receiver: where its messages go and how they are signed, the breaker that stands for
    /// it, the client of its sends, and how many of them are in flight.
    final class Lane: Sendable {
        let tenant: String
        let settings: WebhookSettings
        let receiver: CircuitBreaker
        /// The client of the sends; a probe that gets through brings its own (`send`).
        let client: Locked<HTTPClient>
        /// The client before the last probe's, shut down at the next swap or at the end: sends may still run on it.
        let retired = Locked<HTTPClient?>(nil)
        let inFlight = Locked(0)
        /// An attempt found the receiver away since its last delivery. True at the start: what waits for a
        /// retry from before (a restart during an outage) goes with the first delivery.
        let away = Locked(true)
        /// A delivery after the receiver was away: the next `record()` makes the lane's retries due.
        let back = Locked(false)

        init(tenant: String, settings: WebhookSettings, receiver: CircuitBreaker, client: HTTPClient) {
            self.tenant = tenant
            self.settings = settings
            self.receiver = receiver
            self.client = Locked(client)
        }

        /// Makes `client` the sends' client; returns the client to shut down now (the one retired before).
        func swapClient(_ client: HTTPClient) -> HTTPClient? {
            let old = self.client.withLock { current in
                defer { current = client }
                return current
            }
            return retired.withLock { retired in
                defer { retired = old }
                return retired
            }
        }
    }

    /// Each tenant's lane as the tenants are configured now: SIGHUP's reload replaces them (`replaceWebhooks`).
    private let laneTable: Locked<[Lane]>
    /// Lanes a reload replaced: their sends in flight end on their clients, shut down at the end.
    private let replacedLanes = Locked<[Lane]>([])
    let outbox: any WebhookOutbox
    let clock: any RelayClock
    let metrics: RelayMetrics
    let logger: Logger
    let attemptTimeout: TimeInterval
    private let configuration: HTTPClient.Configuration
    private let thread = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let executor: EventLoopTaskExecutor
    private let wakeUps = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    /// Attempts that ended, waiting for the next `record()`; their messages stay leased until then.
    private let ended = Locked<[WebhookMessage]>([])
    private let endings = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))

    /// `webhooks`: each tenant with a webhook, and its settings.
    init(
        webhooks: [(tenant: String, settings: WebhookSettings)], outbox: any WebhookOutbox, clock: any RelayClock,
        metrics: RelayMetrics, logger: Logger, attemptTimeout: TimeInterval = WebhookSender.attemptTimeout
    ) {
        self.attemptTimeout = attemptTimeout
        self.outbox = outbox
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .milliseconds(Int64(attemptTimeout * 1000))))
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = Self.concurrency
        // A refused connection ends the attempt at once, as the receiver's answer: the pool would otherwise
        // try again until the connect timeout, holding each attempt 5 s. The sender's retries and the
        // receiver's breaker are the ones that try again.
        configuration.connectionPool.retryConnectionEstablishment = false
        self.configuration = configuration
        laneTable = Locked([])
        executor = EventLoopTaskExecutor(thread.next())
        let lanes = webhooks.map { makeLane(tenant: $0, settings: $1) }
        laneTable.withLock { $0 = lanes }
        // On Linux a thread's nice value is its own: this lowers the sender's thread only.
        thread.next().execute { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10) }
    }

    private func makeLane(tenant: String, settings: WebhookSettings) -> Lane {
        // Its changes are logged, not every attempt: a receiver down at a thousand events a second would
        // otherwise fill the log. Never the URL (it may carry a token), a body or a header.
        let logger = logger
        let receiver = CircuitBreaker(
            failureThreshold: Self.receiverFailures, openDuration: Self.probeInterval,
            probeTimeout: attemptTimeout + Self.probeInterval
        ) { _, to in
            switch to {
            case .open:
                logger.warning(
                    "The webhook receiver does not take messages; trying one every 5 s",
                    metadata: ["tenant": .string(tenant)])
            case .closed:
                logger.notice("The webhook receiver takes messages again", metadata: ["tenant": .string(tenant)])
            case .halfOpen: break
            }
        }
        return Lane(
            tenant: tenant, settings: settings, receiver: receiver,
            client: HTTPClient(eventLoopGroupProvider: .shared(thread), configuration: configuration))
    }

    /// Each tenant with a webhook, as configured now.
    var lanes: [Lane] { laneTable.value }

    /// Whether `tenant`'s sessions report to a webhook now.
    func hasWebhook(_ tenant: String) -> Bool { laneTable.withLock { $0.contains { $0.tenant == tenant } } }

    /// From now on, these webhooks: a tenant whose URL and secret are unchanged keeps its lane (breaker,
    /// connections, sends in flight); a changed or new one gets a lane of its own, and a removed one's
    /// messages wait in the outbox. Messages already claimed go as they were signed.
    func replaceWebhooks(_ webhooks: [(tenant: String, settings: WebhookSettings)]) {
        let old = lanes
        let new = webhooks.map { tenant, settings in
            old.first { $0.tenant == tenant && $0.settings.isSame(as: settings) }
                ?? makeLane(tenant: tenant, settings: settings)
        }
        laneTable.withLock { $0 = new }
        let dropped = old.filter { lane in !new.contains { $0 === lane } }
        replacedLanes.withLock { $0 += dropped }
        wake()
    }

    /// A message was written, or a send ended: look for due messages now.
    func wake() { wakeUps.continuation.yield() }

    func run() async throws {
        await withTaskExecutorPreference(executor) {
            await sendUntilShutdown()
        }
        for lane in lanes + replacedLanes.value {
            for client in [lane.client.value, lane.retired.value].compactMap({ $0 }) { try? await client.shutdown() }
        }
        try? await thread.shutdownGracefully()
    }

    private func sendUntilShutdown() async {
        let ticker = Task(executorPreference: executor) { [self] in
            while (try? await clock.sleep(until: clock.now().addingTimeInterval(Self.pollInterval))) != nil {
                wake()
            }
        }
        let recording = Task(executorPreference: executor) { [self] in
            for await _ in endings.stream {
                try? await Task.sleep(for: Self.recordInterval)
                await record()
            }
        }
        var upkeep = Date.distantPast
        await withDiscardingTaskGroup { group in
            for await _ in wakeUps.stream.cancelOnGracefulShutdown() {
                let now = clock.now()
                if now >= upkeep {
                    upkeep = now.addingTimeInterval(5)
                    if let backlog = try? await outbox.webhookBacklog() { metrics.webhookBacklog(backlog, at: now) }
                }
                // A lane that took a whole batch may have more due: look again at once. One that took less
                // has all that was due: the next claim waits, so that claims keep to one every few ms. A lane
                // with no room or an open breaker waits for the next wake-up (a send's end, the tick).
                var claims: Set<Claim> = []
                for lane in lanes { claims.insert(await claim(for: lane, now: now, into: &group)) }
                if claims.contains(.whole) {
                    wake()
                } else if claims.contains(.partial) {
                    try? await Task.sleep(for: Self.claimInterval)
                }
            }
            // Shutting down: sends under way stop, each stored as a failed attempt, and go again after a start
            // (a send whose record is lost too goes once its lease ends): at least once.
            group.cancelAll()
        }
        ticker.cancel()
        endings.continuation.finish()
        await recording.value
        await record()
    }

    /// Stores the attempts that ended since the last time, in one write. Should the store not take
    /// them, their leases run out and the messages go again.
    ///
    /// Then, for each lane whose receiver is back, the messages that wait for a retry are made due, oldest
    /// first: the outage's failures, stored by now, go with the backlog. (The lanes are read first: every
    /// failure that ended before a delivery marked its lane is among the outcomes stored here or before.)
    private func record() async {
        let back = lanes.filter { Self.takeFlag($0.back) }
        let outcomes = ended.withLock { ended in
            defer { ended.removeAll() }
            return ended
        }
        if !outcomes.isEmpty { try? await outbox.recordWebhookAttempts(outcomes) }
        var due = 0
        for lane in back { due += (try? await outbox.makeRetriesDue(tenant: lane.tenant, now: clock.now())) ?? 0 }
        if due > 0 { wake() }
    }

    /// What a lane's claim took.
    private enum Claim {
        /// Nothing was asked: no room, or the breaker keeps the receiver untried.
        case none
        /// Fewer than asked (a probe's one included): nothing more is due now.
        case partial
        /// As many as asked: more may be due.
        case whole
    }

    /// Claims `lane`'s due messages while it has room and its breaker lets them go, and starts their sends.
    private func claim(for lane: Lane, now: Date, into group: inout DiscardingTaskGroup) async -> Claim {
        let free = Self.concurrency - lane.inFlight.value
        guard free > 0, let first = lane.receiver.acquire(now: now) else { return .none }
        let limit = first.isProbe ? 1 : free
        let claimed: [WebhookMessage]
        do {
            claimed = try await outbox.claimWebhooks(
                tenant: lane.tenant, dueBy: now, leaseUntil: now.addingTimeInterval(Self.lease), limit: limit)
        } catch {
            return .none  // the store says so itself; the next tick tries again
        }
        // No message to probe with: the receiver stays untried for another interval.
        if claimed.isEmpty, first.isProbe { lane.receiver.record(first, success: false, now: now) }
        lane.inFlight.withLock { $0 += claimed.count }
        for (index, message) in claimed.enumerated() {
            let permit = index == 0 ? first : lane.receiver.acquire(now: now)
            group.addTask {
                await self.send(message, lane: lane, permit: permit)
                lane.inFlight.withLock { $0 -= 1 }
                self.wake()
            }
        }
        return claimed.count == limit && !first.isProbe ? .whole : .partial
    }

    /// One attempt; its outcome is stored with the others that end about then (`record()`).
    func send(_ message: WebhookMessage, lane: Lane, permit: CircuitBreaker.Permit?) async {
        let started = clock.now()
        let timestamp = Int(started.timeIntervalSince1970)
        let settings = lane.settings
        var request = HTTPClientRequest(url: settings.url.absoluteString)
        request.method = .POST
        request.headers = [
            "Content-Type": "application/json", "User-Agent": "LinkRelay-Webhooks",
            "webhook-id": message.id, "webhook-timestamp": String(timestamp),
            "webhook-signature": settings.signature(id: message.id, timestamp: timestamp, body: message.payload),
        ]
        request.body = .bytes(message.payload)
        let begin = ContinuousClock.now
        let timeout = Duration.milliseconds(Int64(attemptTimeout * 1000))
        var status: Int?
        var problem: String?
        // A probe goes on a new client. The pool waits between connection attempts for longer after each
        // failure, up to a minute, and counts every refused one until a connection succeeds: after a long
        // outage a probe would time out in that wait though the receiver is back. One that gets through
        // becomes the sends' client.
        let isProbe = permit?.isProbe == true
        let client =
            isProbe
            ? HTTPClient(eventLoopGroupProvider: .shared(thread), configuration: configuration) : lane.client.value
        do {
            let response = try await client.execute(request, deadline: .now() + .init(timeout), logger: logger)
            status = Int(response.status.code)
            if !(200..<300).contains(response.status.code) { problem = "answered \(response.status.code)" }
            // The head decides. The body is read only so that the connection can serve the next attempt,
            // and only within the attempt's time: the client's deadline stops at the head.
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    var read = 0
                    do {
                        for try await chunk in response.body {
                            read += chunk.readableBytes
                            if read > Self.maximumAnswerBytes { return }
                        }
                    } catch {}
                }
                group.addTask { try? await Task.sleep(until: begin + timeout) }
                await group.next()
                group.cancelAll()
            }
        } catch {
            problem = Self.describe(error)
        }
        let duration = clock.now().timeIntervalSince(started)
        if isProbe { try? await (problem == nil ? lane.swapClient(client) : client)?.shutdown() }
        var updated = message
        updated.attempts.append(
            .init(
                at: started, status: status, error: problem,
                durationMs: max(0, Int((duration * 1000).rounded()))))
        updated.attempts = Array(updated.attempts.suffix(Self.keptAttempts))
        let outcome: WebhookOutcome
        if problem == nil {
            updated.state = .delivered
            outcome = .delivered
        } else if let next = Self.nextAttempt(
            after: updated.attempts.count, now: clock.now(), createdAt: message.createdAt)
        {
            updated.nextAttemptAt = next
            outcome = .retry
        } else {
            updated.state = .failed
            outcome = .failed
            logger.warning(
                "Webhook message given up after 24 hours",
                metadata: [
                    "webhook_id": .string(message.id), "type": .string(message.type), "tenant": .string(lane.tenant),
                ])
        }
        metrics.webhookAttempt(outcome)
        if problem == nil {
            if Self.takeFlag(lane.away) || isProbe { lane.back.withLock { $0 = true } }
        } else if Self.findsReceiverAway(status: status, problem: problem) {
            lane.away.withLock { $0 = true }
        }
        if let permit { lane.receiver.record(permit, success: problem == nil, now: clock.now()) }
        ended.withLock { $0.append(updated) }
        endings.continuation.yield()
    }

    /// When the attempt after `attempts` attempts is due, with jitter; nil once 24 hours have passed.
    /// The last one is made at the 24 hours' end.
    static func nextAttempt(
        after attempts: Int, now: Date, createdAt: Date, jitter: Double = .random(in: 0.8...1.2)
    ) -> Date? {
        let end = createdAt.addingTimeInterval(retryFor)
        guard now < end else { return nil }
        let delay = delays[min(max(attempts - 1, 0), delays.count - 1)] * jitter
        return min(now.addingTimeInterval(delay), end)
    }

    /// The flag's value, leaving it false.
    private static func takeFlag(_ flag: Locked<Bool>) -> Bool {
        flag.withLock { flag in
            let was = flag
            flag = false
            return was
        }
    }

    /// Whether a failure says the receiver is away rather than that it refused this message: no connection,
    /// or a gateway's 502 or 503. A timeout or another status may be the message's own (a receiver that
    /// chokes on it), which must not be sent again at every delivery; 5 of them in a row open the breaker,
    /// whose probe's delivery then counts.
    static func findsReceiverAway(status: Int?, problem: String?) -> Bool {
        guard let status else { return problem != "timeout" && problem != "cancelled" }
        return status == 502 || status == 503
    }

    private static func describe(_ error: any Error) -> String {
        if error is CancellationError { return "cancelled" }
        if refused(error) { return "connection refused" }
        guard let error = error as? HTTPClientError else { return "connection failed" }
        switch error {
        case .deadlineExceeded, .readTimeout: return "timeout"
        case .connectTimeout: return "connect timeout"
        case .remoteConnectionClosed: return "connection closed"
        default: return "connection failed"
        }
    }

    private static func refused(_ error: any Error) -> Bool {
        if let error = error as? IOError { return error.errnoCode == ECONNREFUSED }
        if let error = error as? NIOConnectionError { return error.connectionErrors.contains { refused($0.error) } }
        return false
    }
}

/// How an attempt ended; the label of `linkrelay_webhook_deliveries_total`.
enum WebhookOutcome: String, CaseIterable, Sendable {
    case delivered
    /// Not delivered; tried again later.
    case retry
    /// Not delivered within 24 hours: given up.
    case failed
}
