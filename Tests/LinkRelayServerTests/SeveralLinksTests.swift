import Foundation
import LinkRelayCore
import Testing

/// Every link Prove sends for a session's flow may land (API.md v1.1): the client SDK's resend and
/// number change, which the sandbox stands in for (`POST /sandbox/resend`, `/sandbox/change-number`).
@Suite("Several links per session", .timeLimit(.minutes(1)))
struct SeveralLinksTests {
    struct Outbox: Decodable {
        struct Message: Decodable { var link: String }
        var messages: [Message]
    }

    func links(_ relay: TestRelay, _ phone: String = "2001004014") async throws -> [String] {
        try await relay.request(.GET, "/sandbox/outbox?phoneNumber=\(phone)").json(Outbox.self).messages.map(\.link)
    }

    func land(_ relay: TestRelay, _ link: String) async throws -> (HTTPAnswer, String) {
        let redirect = try #require(try await relay.request(.GET, link).header("Location"))
        return (try await relay.request(.GET, redirect), redirect)
    }

    @Test("A resent link lands on the same session with its own authId; the first landing taps, each asks Prove")
    func resend() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            #expect(try await relay.request(.POST, "/sandbox/resend?phoneNumber=2001004014").status == 204)
            let sent = try await links(relay)
            #expect(sent.count == 2)
            let (second, secondURL) = try await land(relay, sent[1])
            #expect(second.status == 200)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "tapped", "result"])
            // The first link's authId was never seen by the ended session: 409; the second's gets its page.
            let (first, firstURL) = try await land(relay, sent[0])
            #expect(firstURL != secondURL)
            #expect(first.status == 409)
            #expect(try await relay.request(.GET, secondURL).status == 200)
        }
    }

    @Test("At most 3 sends and 3 numbers per flow, the first included; then 429 with Prove's error body")
    func limits() async throws {
        try await TestRelay.run { relay in
            _ = try await relay.createSession()
            for _ in 0..<2 {
                #expect(try await relay.request(.POST, "/sandbox/resend?phoneNumber=2001004014").status == 204)
            }
            let refused = try await relay.request(.POST, "/sandbox/resend?phoneNumber=2001004014")
            #expect(refused.status == 429)
            #expect(refused.body.contains("\"code\""))
            #expect(try await links(relay).count == 3)

            _ = try await relay.createSession(phone: "2001004015")
            let change = #"{"from":"2001004015","to":"2001004014"}"#
            #expect(try await relay.request(.POST, "/sandbox/change-number", body: change).status == 204)
            let back = #"{"from":"2001004014","to":"2001004015"}"#
            #expect(try await relay.request(.POST, "/sandbox/change-number", body: back).status == 204)
            let third = try await relay.request(.POST, "/sandbox/change-number", body: change)
            #expect(third.status == 429)
            #expect(try await relay.request(.POST, "/sandbox/resend?phoneNumber=2001009999").status == 404)
            let unknown = #"{"from":"2001004015","to":"2009999999"}"#
            #expect(try await relay.request(.POST, "/sandbox/change-number", body: unknown).status == 400)
        }
    }

    @Test("A number change sends the flow's link to the new number, and that tap verifies the session")
    func changeNumber() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let change = #"{"from":"2001004014","to":"2001004017"}"#
            let moved = try await relay.request(.POST, "/sandbox/change-number", body: change)
            #expect(moved.status == 204, "\(moved.body)")
            let sent = try await links(relay, "2001004017")
            #expect(sent.count == 1)
            let (landing, _) = try await land(relay, try #require(sent.first))
            #expect(landing.status == 200)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "tapped", "result"])
        }
    }

    @Test("The sandbox phone page resends and changes the number through the demo, and offers a lost redirect")
    func phonePage() async throws {
        try await TestRelay.run { relay in
            _ = try await relay.createSession()
            let page = try await relay.request(.GET, "/sandbox/phone?phoneNumber=2001004014")
            #expect(page.body.contains("Resend") && page.body.contains("Use another number"))
            #expect(page.body.contains("?redirect=0"))
            let form = [("Content-Type", "application/x-www-form-urlencoded")]
            let resent = try await relay.request(.POST, "/demo/resend", headers: form, body: "phoneNumber=2001004014")
            #expect(resent.status == 303)
            #expect(resent.header("Location") == "/sandbox/phone?phoneNumber=2001004014")
            #expect(try await links(relay).count == 2)
            let moved = try await relay.request(
                .POST, "/demo/change-number", headers: form, body: "from=2001004014&to=2001004017")
            #expect(moved.header("Location") == "/sandbox/phone?phoneNumber=2001004017")
            #expect(try await links(relay, "2001004017").count == 1)
            let desktop = try await relay.request(.POST, "/demo", headers: form, body: "phoneNumber=2001004015")
            // The buttons; what they do runs in a real browser (Tests/browser/test_demo.py).
            #expect(desktop.body.contains("id=\"resend\"") && desktop.body.contains("id=\"finish\""))
        }
    }
}
