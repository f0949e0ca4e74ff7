import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// The demo's Nevis tab through the route table, the demo's controller, the session service and the
/// Nevis sandbox, on a relay that is built but not started: the relay's question to Nevis is the
/// verifier's own step, run here by hand once the app page has answered. The page's script, in a real
/// browser, from the QR code to verified: Tests/browser/test_demo_nevis.py.
@Suite("Demo: Nevis", .timeLimit(.minutes(1)))
struct DemoNevisTests {
    typealias Demo = DemoPrefillTests.Demo

    /// The value of the page's attribute `name` on the element with `id`.
    static func attribute(_ name: String, id: String, in page: String) -> String? {
        let pattern = try! Regex(#"<[a-z]+ [^>]*id="\#(id)"[^>]*>"#)
        guard let element = page.firstMatch(of: pattern).map({ String($0.output[0].substring ?? "") }) else {
            return nil
        }
        let value = try! Regex(#"\b\#(name)="([^"]*)""#)
        return element.firstMatch(of: value).flatMap { $0.output[1].substring.map(String.init) }
    }

    @Test("The Nevis tab's form offers the sandbox users, dave first chosen, and the app and push channels")
    func form() async throws {
        let demo = Demo(relay: try await TestRelay.unstarted())
        let page = try await demo.get("/?flow=nevis")
        #expect(page.status == 200)
        #expect(page.body.contains(#"<a href="/?flow=nevis" aria-current="page">Nevis</a>"#))
        #expect(page.body.contains(#"<form method="post" action="/demo/nevis" class="fields">"#))
        #expect(page.body.contains(#"<option value="dave" selected>dave: you answer on the Access App page"#))
        for user in ["alice", "bob", "carol"] { #expect(page.body.contains(#"<option value="\#(user)">"#)) }
        #expect(page.body.contains(#"<option value="">Usernameless"#))
        #expect(page.body.contains(#"<input type="radio" name="channel" value="app" checked>"#))
        #expect(page.body.contains(#"<input type="radio" name="channel" value="push">"#))
        let unify = try await demo.get("/")
        #expect(unify.body.contains(#"<a href="/?flow=nevis">Nevis</a>"#), "the tab is on every demo page")
        #expect(!unify.body.contains("/demo/nevis"))
    }

    @Test(
        "Started for dave: the QR code and the link, the Access App one click away; approved there, the result names dave; nothing logged"
    )
    func approved() async throws {
        let logs = LogCapture()
        let relay = try await TestRelay.unstarted(logs: logs)
        let demo = Demo(relay: relay)
        let started = try await demo.post(
            "/demo/nevis", [("username", "dave"), ("message", "Pay CHF 12?"), ("channel", "app")])
        #expect(started.status == 200, "\(started.body)")
        #expect(started.csp.contains("img-src 'self' data:;"), "the QR code is a data: URI")
        #expect(started.csp.contains("script-src 'self'") && !started.csp.contains("unsafe"))
        let qrCode = try #require(Self.attribute("src", id: "qr", in: started.body))
        #expect(qrCode.hasPrefix("data:image/png;base64,"))
        let appLink = try #require(Self.attribute("href", id: "app-link", in: started.body))
        #expect(appLink.contains("/sandbox/nevis/open?dispatchTokenResponse="))
        #expect(Self.attribute("href", id: "app-page", in: started.body) == appLink)
        #expect(Self.attribute("target", id: "app-page", in: started.body) == "_blank")
        #expect(started.body.contains("as <strong>dave</strong>"))
        #expect(started.body.contains(#"id="status" aria-live="polite">Waiting for the approval…</p>"#))
        let session = try #require(started.value("session"))
        let token = try #require(started.value("token"))
        #expect(Self.attribute("data-token", id: "session", in: started.body) == token)

        // Before an answer, the result form shows the wait page again.
        let early = try await demo.post("/demo/nevis/result", [("session", session), ("token", token)])
        #expect(early.status == 200 && early.body.contains("Waiting for the approval…"))

        // The phone: the Access App page opens the link, shows the message, and the person approves.
        let app = try await demo.get(appLink)
        #expect(app.status == 200 && app.body.contains("Pay CHF 12?"))
        try await OpsNevisTests.answer(relay, appLink: appLink, approve: true)
        await relay.parts.verifier.verify(sessionID: session)

        let result = try await demo.post("/demo/nevis/result", [("session", session), ("token", token)])
        #expect(result.status == 200)
        #expect(result.body.contains("<h1>Approved</h1>"))
        #expect(result.body.contains(#"<p class="status verified" id="outcome">Verified ✓</p>"#))
        #expect(result.body.contains(#"<dd id="nevis-username">dave</dd>"#))
        #expect(result.body.contains("<code>succeeded</code>"))
        #expect(!result.body.contains(appLink) && !result.body.contains(token), "the result page holds no secret")

        let secrets = [qrCode, appLink, token, "Pay CHF 12?", String(appLink.split(separator: "=").last ?? "-")]
        for line in logs.all {
            for secret in secrets { #expect(!line.contains(secret), "a log line holds \(secret.prefix(12))…") }
        }
    }

    @Test("Usernameless: denied on the app page, the result says not approved and names no one")
    func usernamelessDenied() async throws {
        let relay = try await TestRelay.unstarted()
        let demo = Demo(relay: relay)
        let started = try await demo.post("/demo/nevis", [("username", ""), ("channel", "app")])
        #expect(started.status == 200, "\(started.body)")
        #expect(!started.body.contains("as <strong>"))
        let appLink = try #require(Self.attribute("href", id: "app-link", in: started.body))
        try await OpsNevisTests.answer(relay, appLink: appLink, approve: false)
        let session = try #require(started.value("session"))
        await relay.parts.verifier.verify(sessionID: session)
        let result = try await demo.post(
            "/demo/nevis/result", [("session", session), ("token", try #require(started.value("token")))])
        #expect(result.body.contains("<h1>Not approved</h1>"))
        #expect(result.body.contains(#"<p class="status failed" id="outcome">Not verified</p>"#))
        #expect(!result.body.contains("nevis-username"), "Nevis names a usernameless user only once approved")
    }

    @Test("Push: no QR code; the Access App link lists the user's pending operations")
    func push() async throws {
        let relay = try await TestRelay.unstarted()
        let demo = Demo(relay: relay)
        let started = try await demo.post("/demo/nevis", [("username", "dave"), ("channel", "push")])
        #expect(started.status == 200, "\(started.body)")
        #expect(!started.body.contains("<img") && !started.body.contains(#"id="app-link""#))
        #expect(started.body.contains("Nevis sent the request to <strong>dave</strong>'s Access App."))
        let appPage = try #require(Self.attribute("href", id: "app-page", in: started.body))
        #expect(appPage == "/sandbox/nevis/app?user=dave")
        let inbox = try await demo.get(appPage)
        #expect(inbox.status == 200 && inbox.body.contains(#"name="answer" value="approve""#), "one to answer")
    }

    @Test("A refused start shows the form again with Nevis's words, what was given kept and escaped")
    func refused() async throws {
        let relay = try await TestRelay.unstarted()
        let demo = Demo(relay: relay)
        let page = try await demo.post(
            "/demo/nevis", [("username", "carol"), ("message", "<b>Pay</b> \"now\""), ("channel", "push")])
        #expect(page.status == 422)
        #expect(page.body.contains(#"<p class="status failed" role="alert">"#))
        #expect(page.body.contains(#"<option value="carol" selected>"#))
        #expect(page.body.contains(#"<input type="radio" name="channel" value="push" checked>"#))
        #expect(page.body.contains("&lt;b&gt;Pay&lt;/b&gt;") && !page.body.contains("<b>Pay</b>"))

        let invalid = try await demo.post("/demo/nevis", [("username", "dave"), ("channel", "fax")])
        #expect(invalid.status == 422 && invalid.body.contains("Channel "), "the field by its label on the form")
    }

    @Test("The Nevis forms posted from another origin are 403 and start or show nothing")
    func foreignOrigin() async throws {
        let relay = try await TestRelay.unstarted()
        let demo = Demo(relay: relay)
        let started = try await demo.post("/demo/nevis", [("username", "dave"), ("channel", "push")])
        func pending() async throws -> Int {
            try await demo.get("/sandbox/nevis/app?user=dave").body.matches(of: #/value="approve"/#).count
        }
        #expect(try await pending() == 1)
        let evil = "https://evil.example"
        let start = try await demo.post("/demo/nevis", [("username", "dave"), ("channel", "push")], origin: evil)
        #expect(start.status == 403 && start.body.contains("<html"), "the friendly page")
        #expect(try await pending() == 1, "no operation started")
        let session = [
            ("session", try #require(started.value("session"))), ("token", try #require(started.value("token"))),
        ]
        let result = try await demo.post("/demo/nevis/result", session, origin: evil)
        #expect(result.status == 403 && !result.body.contains("dave"))
        let wrongToken = try await demo.post("/demo/nevis/result", [session[0], ("token", "not-the-token")])
        #expect(wrongToken.status == 404 && wrongToken.body.contains("cannot go on"))
    }
}
