/// Tells the channels of a session that it has new, already stored, events. Only a wake-up:
/// channels read the truth from the store, so a duplicate or a lost publish costs nothing.
public protocol EventBus: Sendable {
    func publish(sessionID: String, events: [SessionEvent])
}
