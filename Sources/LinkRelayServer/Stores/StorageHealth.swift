import Logging
import Synchronization

/// Whether the store's last write went through. The relay answers 503 while it does not (the store
/// throws `StoreError.unavailable`); each change is logged once, the failure with its cause, so that a
/// disk that fails under load writes two lines, not one per request.
final class StorageHealth: Sendable {
    private let failing = Atomic<Bool>(false)
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    var isFailing: Bool { failing.load(ordering: .relaxed) }

    func succeeded() {
        // A load first: the exchange, a write to memory every thread shares, only on a change.
        guard isFailing, failing.exchange(false, ordering: .relaxed) else { return }
        logger.notice("The store takes writes again")
    }

    func failed(_ cause: any Error) {
        guard !failing.exchange(true, ordering: .relaxed) else { return }
        logger.error(
            "The store cannot take writes: answering 503 until it can", metadata: ["cause": "\(cause)"])
    }
}
