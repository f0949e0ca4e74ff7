import Foundation
import Testing

@testable import LinkRelayCore

@Suite("A session's rare parts behind a pointer (Boxed)")
struct BoxedTests {
    @Test("A copy keeps its own result when the other copy's changes")
    func copiesStayApart() {
        var first = SessionTests.makeSession()
        first.result = SessionResult(outcome: .verified, proveSuccess: "true", phoneNumber: "2001004014")
        var second = first
        second.result?.reason = "changed"
        second.prefill = nil
        #expect(first.result?.reason == nil)
        #expect(second.result?.reason == "changed")
        #expect(first.result?.outcome == .verified)
        second.result = nil
        #expect(first.result != nil)
        #expect(first != second)
    }

    @Test("Codable as an optional: nil is left out, a missing key reads as nil, a value round-trips")
    func codableAsAnOptional() throws {
        var session = SessionTests.makeSession()
        let bare = try JSONSerialization.jsonObject(with: JSONEncoder().encode(session)) as? [String: Any]
        #expect(bare?.keys.contains("result") == false)
        #expect(bare?.keys.contains("prefill") == false)
        #expect(bare?.keys.contains("nevis") == false)
        #expect(try JSONDecoder().decode(Session.self, from: JSONEncoder().encode(session)) == session)

        session.result = SessionResult(outcome: .failed, proveSuccess: "false", reason: "test")
        let data = try JSONEncoder().encode(session)
        #expect(try JSONDecoder().decode(Session.self, from: data).result?.reason == "test")
        let explicitNull = try JSONSerialization.data(withJSONObject: ["value": NSNull()])
        #expect(try JSONDecoder().decode(Holder.self, from: explicitNull).value == nil)
    }

    /// A copy of a session without them is the size of its own fields: the store's cache keeps one per live
    /// session, so each byte here is a byte per waiting desktop.
    @Test("A session without a result, Pre-Fill or Nevis operation holds none of their room")
    func roomOfASession() {
        #expect(MemoryLayout<Boxed<SessionResult>>.size == MemoryLayout<Int>.size)
        // 800 bytes with the three inline; 312 without.
        #expect(MemoryLayout<Session>.size < 400)
    }

    struct Holder: Codable {
        @Boxed var value: SessionResult? = nil
    }
}
