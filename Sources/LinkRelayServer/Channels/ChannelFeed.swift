import Foundation
import LinkRelayCore
import NIOCore

/// A session's events after a cursor, in order and without duplicates, delivered on one channel's
/// event loop: first what the store holds, then what the hub wakes the channel with. The store stays
/// the truth: when a wake-up skips a seq, the gap is read from the store.
///
/// A feed holds no task while it waits: the hub calls back, and a store read is a short task that
/// hops back to the event loop (none when the store holds the events in memory). Use it on its event
/// loop only; `end()` must be called exactly when the channel ends, which unsubscribes it.
final class ChannelFeed {
    enum Step {
        /// What the store held after the cursor when the channel opened (maybe nothing).
        case replayed([SessionEvent])
        /// New events, after everything delivered before.
        case events([SessionEvent])
        /// The wake-up the channel asked for (`wake(at:)`) is due.
        case tick(Date)
        /// The relay is shutting down.
        case shutdown
        /// The store could not be read.
        case failed
    }

    private let store: any SessionStore & InMemoryReads
    private let eventLoop: any EventLoop
    private let sessionID: String
    private(set) var cursor: Int
    private var listener: ChannelListener?
    private var onStep: ((Step) -> Void)?
    private var replayed = false
    private var reading = false
    private var queued: [ChannelSignal] = []

    /// Subscribes at once and reads the store; `onStep` is called on `eventLoop` until `end()`.
    init(
        store: any SessionStore & InMemoryReads, hub: ChannelHub, eventLoop: any EventLoop, sessionID: String,
        cursor: Int,
        wakeAt: Date?, onStep: @escaping (Step) -> Void
    ) {
        self.store = store
        self.eventLoop = eventLoop
        self.sessionID = sessionID
        self.cursor = cursor
        self.onStep = onStep
        let this = NIOLoopBound(self, eventLoop: eventLoop)
        listener = hub.listen(sessionID: sessionID, wakeAt: wakeAt) { signal in
            // Events committed on this loop (a landing on a connection of the same loop) are written at
            // once, before the rest of the committing request's work (its answer): a reordering with a
            // signal still queued is caught by the seq check, which then reads the store.
            if case .events = signal, eventLoop.inEventLoop {
                this.value.receive(signal)
            } else {
                eventLoop.execute { this.value.receive(signal) }
            }
        }
        readStore()
    }

    /// Asks for one `.tick` at `date`.
    func wake(at date: Date) { listener?.wake(at: date) }

    /// Unsubscribes; no step is delivered after this.
    func end() {
        listener?.finish()
        listener = nil
        onStep = nil
        queued = []
    }

    private func receive(_ signal: ChannelSignal) {
        guard onStep != nil else { return }
        if reading {
            queued.append(signal)
        } else {
            handle(signal)
        }
    }

    private func handle(_ signal: ChannelSignal) {
        switch signal {
        case .tick(let now):
            onStep?(.tick(now))
        case .shutdown:
            onStep?(.shutdown)
        case .changed(let seq):
            if seq.map({ $0 > cursor }) ?? true { readStore() }
        case .events(let events):
            let fresh = events.filter { $0.seq > cursor }
            guard let first = fresh.first, let last = fresh.last else { return }
            guard first.seq == cursor + 1, last.seq - first.seq + 1 == fresh.count else {
                readStore()
                return
            }
            cursor = last.seq
            onStep?(.events(fresh))
        }
    }

    private func readStore() {
        reading = true
        let this = NIOLoopBound(self, eventLoop: eventLoop)
        // From memory, the events still come from the event loop's queue: never from inside `init`, or
        // from inside the step that asked.
        if let events = store.eventsInMemory(sessionID: sessionID, after: cursor) {
            return eventLoop.execute { this.value.stored(.success(events)) }
        }
        let (store, sessionID, after, eventLoop) = (store, sessionID, cursor, eventLoop)
        Task {
            let result = await Result(catching: { try await store.events(sessionID: sessionID, after: after) })
            eventLoop.execute { this.value.stored(result) }
        }
    }

    private func stored(_ result: Result<[SessionEvent], any Error>) {
        reading = false
        guard onStep != nil else { return }
        switch result {
        case .success(let events):
            let fresh = events.filter { $0.seq > cursor }
            cursor = fresh.last?.seq ?? cursor
            if !replayed {
                replayed = true
                onStep?(.replayed(fresh))
            } else if !fresh.isEmpty {
                onStep?(.events(fresh))
            }
        case .failure:
            onStep?(.failed)
        }
        while !reading, onStep != nil, !queued.isEmpty {
            handle(queued.removeFirst())
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
