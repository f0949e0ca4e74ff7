import Foundation
import LinkRelayCore
import Testing

@testable import LinkRelayServer

@Suite("Repeat landings kept in memory", .timeLimit(.minutes(1)))
struct RepeatLandingsTests {
    static let authId = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"

    /// An ended session whose phone landed with `authId`, with a link key of the relay's length.
    static func ended(_ index: Int) -> Session {
        let now = Date()
        let key = String(repeating: String(index), count: LandingRedirect.linkKeyLength)
        var session = Session(
            id: "ses_\(index)", linkKey: key, channelToken: "token", createdAt: now,
            expiresAt: now.addingTimeInterval(180), correlationId: "c\(index)", authToken: nil,
            clientRequestId: "r\(index)", phoneNumber: "2001004014", finalTargetUrl: "http://relay/l/\(key)",
            idempotencyKey: nil, requestFingerprint: "f")
        session.seenAuthIds = [authId]
        session.record(.result(.verified), at: now)
        return session
    }

    @Test("The oldest goes first when the table is full; only the authIds seen are answered")
    func capacity() {
        let landings = RepeatLandings(capacity: 2)
        let sessions = (1...3).map(Self.ended)
        for session in sessions { landings.remember(session) }
        landings.remember(sessions[1])  // again: no second place
        func known(_ session: Session, _ authId: String = Self.authId) -> Bool {
            landings.ended(key: session.linkKey, authId: authId) != nil
        }
        #expect(sessions.map { known($0) } == [false, true, true])
        #expect(!known(sessions[2], "3f2504e0-4f89-41d3-9a0c-0305e82c3302"), "another authId goes to the controller")
        #expect(landings.ended(key: sessions[2].linkKey, authId: Self.authId) == false, "not turned down")
    }
}
