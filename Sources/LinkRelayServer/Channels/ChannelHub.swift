import Foundation
import LinkRelayCore
import LinkRelaySupport

/// What a waiting channel can be woken by.
enum ChannelSignal: Sendable {
    /// New events of its session (already stored).
    case events([SessionEvent])
    /// Another instance stored events of the session, up to this seq, or may have (nil): read the store.
    case changed(upTo: Int?)
    /// The moment it asked to be woken at has come (a keep-alive or a long-poll timeout is due).
    case tick(Date)
    /// The relay is shutting down: end the channel so that the client reconnects (to this instance
    /// once it is back, or to another) with its cursor.
    case shutdown
}

/// In-process fan-out from stored events to the channels waiting on this instance.
///
/// One hub per process holds every listener; a single `ChannelHeartbeat` wakes the listeners that
/// asked for a timer, so a waiting channel costs a callback, not a task or a timer.
final class ChannelHub: EventBus {
    typealias Deliver = @Sendable (ChannelSignal) -> Void

    private struct Listener {
        let deliver: Deliver
        var wakeAt: Date?
    }

    private struct State {
        var sessions: [String: [UInt64: Listener]] = [:]
        /// The last seq handed to the listeners of each session in `sessions` (see `lacks`).
        var handedOut: [String: Int] = [:]
        var nextID: UInt64 = 0
        var count = 0
        /// Channels opened and closed, and events handed out, since start (see `activity`).
        var activity = 0
        /// When listeners asked to be woken. An entry whose listener has gone or asked for another time
        /// is skipped when it comes up.
        var wakes = DeadlineHeap<(sessionID: String, id: UInt64)>()
        var shuttingDown = false
        /// Waiting for the last listener to go (see `drained()`), by id.
        var drainWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Locked(State())

    /// Starts listening to a session: `deliver` is called (on any thread, never under the hub's lock)
    /// with each signal until the listener finishes. Listen before reading the store, so no event can
    /// fall between.
    func listen(sessionID: String, wakeAt: Date?, _ deliver: @escaping Deliver) -> ChannelListener {
        let (id, shuttingDown) = state.withLock { state -> (UInt64, Bool) in
            state.nextID += 1
            state.count += 1
            state.activity += 1
            state.sessions[sessionID, default: [:]][state.nextID] = Listener(deliver: deliver, wakeAt: wakeAt)
            if let wakeAt { state.wakes.insert((sessionID, state.nextID), at: wakeAt) }
            return (state.nextID, state.shuttingDown)
        }
        // A channel opened during shutdown ends at once, the same way as the ones already open.
        if shuttingDown { deliver(.shutdown) }
        return ChannelListener(hub: self, sessionID: sessionID, id: id)
    }

    /// Number of channels listening on this instance.
    var listenerCount: Int { state.withLock { $0.count } }

    /// How much the channels and sessions of this instance have done: it grows by one for each channel
    /// opened or closed and each write's events handed out. `MemoryTrim` waits for it to rest.
    var activity: Int { state.withLock { $0.activity } }

    /// Tells every channel, and every one opened from now on, that the relay is shutting down.
    func beginShutdown() {
        let all = state.withLock { state in
            state.shuttingDown = true
            return state.sessions.values.flatMap { $0.values.map(\.deliver) }
        }
        for deliver in all { deliver(.shutdown) }
    }

    /// Returns once no channel is listening, or when the task is cancelled.
    func drained() async {
        let waiterID = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { waiter in
                let done = state.withLock { state in
                    if state.count == 0 || Task.isCancelled { return true }
                    state.drainWaiters[waiterID] = waiter
                    return false
                }
                if done { waiter.resume() }
            }
        } onCancel: {
            state.withLock { $0.drainWaiters.removeValue(forKey: waiterID) }?.resume()
        }
    }

    func publish(sessionID: String, events: [SessionEvent]) {
        guard !events.isEmpty else { return }
        let listeners = state.withLock { state -> [Deliver] in
            state.activity += 1
            guard let listeners = state.sessions[sessionID] else { return [] }
            state.handedOut[sessionID] = max(state.handedOut[sessionID] ?? 0, events[events.count - 1].seq)
            return listeners.values.map(\.deliver)
        }
        for deliver in listeners { deliver(.events(events)) }
    }

    /// Whether a channel of `sessionID` listens on this instance and has not been handed `seq` yet: a
    /// wake-up for this instance's own write comes back after the write's events were handed out.
    func lacks(sessionID: String, upTo seq: Int) -> Bool {
        state.withLock { state in state.sessions[sessionID] != nil && state.handedOut[sessionID] ?? 0 < seq }
    }

    /// Another instance stored events of `sessionID`, the last one `seq`.
    func changed(sessionID: String, upTo seq: Int) {
        let listeners = state.withLock { state in state.sessions[sessionID]?.values.map(\.deliver) ?? [] }
        for deliver in listeners { deliver(.changed(upTo: seq)) }
    }

    /// Wake-ups from other instances may have been missed (the listen connection was down): every
    /// listener reads its session's events from the store again.
    func changedAll() {
        let all = state.withLock { state in state.sessions.values.flatMap { $0.values.map(\.deliver) } }
        for deliver in all { deliver(.changed(upTo: nil)) }
    }

    /// Wakes every listener whose wake time has come; each must set a new one to be woken again.
    /// Returns the next wake time asked for (nil: none).
    @discardableResult
    func tick(now: Date) -> Date? {
        let (due, next) = state.withLock { state -> ([Deliver], Date?) in
            let due = state.wakes.popDue(at: now).compactMap { wake -> Deliver? in
                let (sessionID, id) = wake.value
                guard let listener = state.sessions[sessionID]?[id], listener.wakeAt == wake.date else { return nil }
                state.sessions[sessionID]?[id]?.wakeAt = nil
                return listener.deliver
            }
            return (due, state.wakes.first?.date)
        }
        for deliver in due { deliver(.tick(now)) }
        return next
    }

    /// Drops the wake-ups of listeners that have gone or asked for another time, which would otherwise
    /// stay until their time, and the room a burst of channels left in its tables.
    func compact() {
        state.withLock { state in
            let sessions = state.sessions
            state.wakes.removeAll { sessions[$0.value.sessionID]?[$0.value.id]?.wakeAt != $0.date }
            state.sessions.releaseUnusedCapacity()
            state.handedOut.releaseUnusedCapacity()
        }
    }

    /// How many wake-ups are waiting, stale ones included.
    var wakeCount: Int { state.withLock { $0.wakes.count } }

    fileprivate func setWake(sessionID: String, id: UInt64, at date: Date?) {
        state.withLock { state in
            guard state.sessions[sessionID]?[id] != nil else { return }
            state.sessions[sessionID]?[id]?.wakeAt = date
            if let date { state.wakes.insert((sessionID, id), at: date) }
        }
    }

    fileprivate func remove(sessionID: String, id: UInt64) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.sessions[sessionID]?.removeValue(forKey: id) != nil else { return [] }
            if state.sessions[sessionID]?.isEmpty == true {
                state.sessions[sessionID] = nil
                state.handedOut[sessionID] = nil
            }
            state.count -= 1
            state.activity += 1
            guard state.count == 0 else { return [] }
            defer { state.drainWaiters = [:] }
            return Array(state.drainWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// One channel's subscription to its session. Finishing it unsubscribes.
struct ChannelListener: Sendable {
    fileprivate let hub: ChannelHub
    let sessionID: String
    fileprivate let id: UInt64

    /// Asks for one `.tick` at `date` (or none with nil).
    func wake(at date: Date?) { hub.setWake(sessionID: sessionID, id: id, at: date) }

    /// Unsubscribes; a signal already on its way may still arrive. Safe to call from any thread, more than once.
    func finish() { hub.remove(sessionID: sessionID, id: id) }
}
