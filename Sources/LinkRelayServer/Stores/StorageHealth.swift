import Logging
import Synchronization

/// Whether the store's last write went through, and whether its file was found corrupt. The relay
/// answers 503 while it does not (the store throws `StoreError.unavailable`); each change is logged
/// once, the failure with its cause, so that a disk that fails under load writes two lines, not one
/// per request.
///
/// Corrupt is for good: a write that succeeds on another page says nothing about the damaged one, so
/// neither a success nor another failure changes it, and it is logged once, critical. Only a restart
/// (after the file is restored) clears it.
final class StorageHealth: Sendable {
    private static let healthy: UInt8 = 0
    private static let failing: UInt8 = 1
    private static let corrupt: UInt8 = 2

    private let state = Atomic<UInt8>(StorageHealth.healthy)
    private let logger: Logger
    /// The database file, named in the critical line.
    private let path: String

    init(logger: Logger, path: String = "") {
        self.logger = logger
        self.path = path
    }

    var isFailing: Bool { state.load(ordering: .relaxed) != Self.healthy }

    var isCorrupt: Bool { state.load(ordering: .relaxed) == Self.corrupt }

    func succeeded() {
        // A load first: the exchange, a write to memory every thread shares, only on a change.
        guard state.load(ordering: .relaxed) == Self.failing,
            state.compareExchange(expected: Self.failing, desired: Self.healthy, ordering: .relaxed).exchanged
        else { return }
        logger.notice("The store takes writes again")
    }

    func failed(_ cause: any Error) {
        guard state.compareExchange(expected: Self.healthy, desired: Self.failing, ordering: .relaxed).exchanged
        else { return }
        logger.error(
            "The store cannot take writes: answering 503 until it can", metadata: ["cause": "\(cause)"])
    }

    /// Marks the store broken until restart; true for the call that did (and logged it).
    @discardableResult
    func corrupted(_ cause: any Error) -> Bool {
        guard state.exchange(Self.corrupt, ordering: .relaxed) != Self.corrupt else { return false }
        logger.critical(
            "The store's file is corrupt: answering 503 for everything that needs the store until it is restored and the relay restarted",
            metadata: [
                "file": .string(path), "cause": "\(cause)",
                "action": "stop the relay, run `linkrelay store check`, restore the newest good backup",
            ])
        return true
    }
}
