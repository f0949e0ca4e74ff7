/// A lock that suspends instead of blocking a thread, and hands over in arrival order.
public final class AsyncMutex: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    public init() {}

    public func withLock<T>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state -> Bool in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if acquired { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
