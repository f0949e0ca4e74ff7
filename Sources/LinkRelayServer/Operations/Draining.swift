import Synchronization

/// Set when the relay starts shutting down, so `/readyz` turns 503 at once.
final class Draining: Sendable {
    private let flag = Atomic<Bool>(false)

    var isDraining: Bool { flag.load(ordering: .relaxed) }

    func start() { flag.store(true, ordering: .relaxed) }
}
