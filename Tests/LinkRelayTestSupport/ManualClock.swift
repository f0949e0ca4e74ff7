import Foundation
import LinkRelayCore
import LinkRelaySupport

/// A clock that moves only when told to. Sleepers wake as soon as `advance` passes their deadline.
public final class ManualClock: RelayClock {
    private struct Sleeper {
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Date
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
        /// Tasks waiting in `waitForSleepers`, with the count each waits for.
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Locked<State>

    public init(now: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Locked(State(now: now))
    }

    public func now() -> Date { state.withLock { $0.now } }

    /// How many tasks are sleeping on this clock right now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Returns once at least `count` tasks sleep on this clock: a test's way to know that the work it
    /// started has reached its next pause, without sleeping itself.
    public func waitForSleepers(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                guard state.sleepers.count < count else { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    public func advance(by seconds: TimeInterval) {
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.now += seconds
            let now = state.now
            let ids = state.sleepers.filter { $0.value.deadline <= now }.map(\.key)
            return ids.compactMap { state.sleepers.removeValue(forKey: $0)?.continuation }
        }
        for continuation in due { continuation.resume() }
    }

    public func sleep(until deadline: Date) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                var satisfied: [CheckedContinuation<Void, Never>] = []
                let resumeNow: (any Error)?? = state.withLock { state in
                    if Task.isCancelled { return .some(CancellationError()) }
                    if deadline <= state.now { return .some(nil) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    let count = state.sleepers.count
                    satisfied = state.watchers.filter { $0.count <= count }.map(\.continuation)
                    state.watchers.removeAll { $0.count <= count }
                    return nil
                }
                for watcher in satisfied { watcher.resume() }
                switch resumeNow {
                case .some(.some(let error)): continuation.resume(throwing: error)
                case .some(.none): continuation.resume()
                case .none: break
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
