import Foundation
import LinkRelayCore
import Testing

@testable import LinkRelayServer

@Suite("Channel hub", .timeLimit(.minutes(1)))
struct ChannelHubTests {
    @Test("A session's channels lack a seq until events up to it are handed out; with no channel, none is lacked")
    func lacksWhatWasNotHandedOut() {
        let hub = ChannelHub()
        let at = Date(timeIntervalSinceReferenceDate: 0)
        let events = [
            SessionEvent(seq: 1, kind: .waiting(expiresAt: at), at: at),
            SessionEvent(seq: 2, kind: .tapped(asc: true), at: at),
        ]
        #expect(!hub.lacks(sessionID: "ses_1", upTo: 1))

        let first = hub.listen(sessionID: "ses_1", wakeAt: nil) { _ in }
        #expect(hub.lacks(sessionID: "ses_1", upTo: 1))
        hub.publish(sessionID: "ses_1", events: events)
        #expect(!hub.lacks(sessionID: "ses_1", upTo: 2))
        #expect(hub.lacks(sessionID: "ses_1", upTo: 3))

        // Once the session's last channel has gone, a new one reads the store itself: nothing is
        // counted as handed out to it.
        first.finish()
        let second = hub.listen(sessionID: "ses_1", wakeAt: nil) { _ in }
        defer { second.finish() }
        #expect(hub.lacks(sessionID: "ses_1", upTo: 2))
    }
}
