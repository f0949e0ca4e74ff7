import LinkRelaySupport

/// A channel's place under the connection limits, given back when the channel ends (or, at the
/// latest, when the slot is released from memory, so that no path can leak a place).
final class ChannelSlot: Sendable {
    private let pending: Locked<(@Sendable () -> Void)?>

    init(release: (@Sendable () -> Void)?) { pending = Locked(release) }

    func release() {
        let release = pending.withLock { pending in
            defer { pending = nil }
            return pending
        }
        release?()
    }

    deinit { release() }
}
