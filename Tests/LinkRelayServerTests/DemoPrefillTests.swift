import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// The demo's Pre-Fill tab through the route table, the demo's controller, the session service and the
/// sandbox, on a relay that is built but not started: the tap's verification is the verifier's own
/// step, run here by hand. The page's script, in a real browser: Tests/browser/test_demo_prefill.py.
@Suite("Demo: Pre-Fill", .timeLimit(.minutes(1)))
struct DemoPrefillTests {
    static let marcia = "2001001693"

    struct Page {
        var status: Int
        var body: String
        var csp: String

        /// The value of the form's hidden or filled field `name`.
        func value(_ name: String) -> String? {
            let pattern = try! Regex(#"name="\#(name)" value="([^"]*)""#)
            return body.firstMatch(of: pattern).flatMap { $0.output[1].substring.map(String.init) }
        }
    }

    /// A relay whose demo is driven as the desktop's browser drives it, one form at a time.
    struct Demo {
        let relay: LinkRelay

        func get(_ target: String) async throws -> Page {
            try await answer(RelayRequest(.GET, target))
        }

        /// A form as a browser posts it; from a page of `origin` when given (browsers send `Origin` on a POST),
        /// with `Sec-Fetch-Site` when given.
        func post(
            _ path: String, _ fields: [(String, String)], origin: String? = nil, fetchSite: String? = nil
        ) async throws -> Page {
            let form = fields.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
            var headers: HTTPHeaders = ["Content-Type": "application/x-www-form-urlencoded"]
            if let origin { headers.add(name: "Origin", value: origin) }
            if let fetchSite { headers.add(name: "Sec-Fetch-Site", value: fetchSite) }
            return try await answer(RelayRequest(.POST, path, headers: headers, body: form.joined(separator: "&")))
        }

        private func answer(_ request: RelayRequest) async throws -> Page {
            let answer = try #require(await relay.respond(to: request))
            return Page(
                status: Int(answer.status.code), body: String(buffer: answer.body),
                csp: answer.headers.first(name: "Content-Security-Policy") ?? "")
        }

        /// `POST /demo/prefill`: the wait page's session and channel token.
        func start(_ fields: [(String, String)]) async throws -> (page: Page, session: [(String, String)]) {
            let page = try await post("/demo/prefill", [("phoneNumber", marcia)] + fields)
            #expect(page.status == 200, "\(page.body)")
            let session = try #require(page.value("session"))
            let token = try #require(page.value("token"))
            return (page, [("session", session), ("token", token)])
        }

        /// The phone taps the newest link (declines it with `decline`); then the verifier asks Prove.
        func tap(_ session: [(String, String)], decline: Bool = false) async throws {
            let link = try #require(await relay.sandbox?.outbox(phoneNumber: marcia).last?.link)
            let prove = await relay.respond(to: RelayRequest(.GET, link + (decline ? "?decline=1" : "")))
            let landing = try #require(prove?.headers.first(name: "Location"))
            #expect(try await get(landing).status == 200)
            await relay.parts.verifier.verify(sessionID: session[0].1)
        }
    }

    @Test("Start, wait, asked for the dob the create lacked, the person shown to confirm, confirmed; nothing logged")
    func wholeFlow() async throws {
        let logs = LogCapture()
        let demo = Demo(relay: try await TestRelay.unstarted(logs: logs))

        let home = try await demo.get("/?flow=prefill")
        #expect(home.status == 200)
        #expect(home.body.contains(#"<a href="/?flow=prefill" aria-current="page">Pre-Fill</a>"#))
        #expect(home.body.contains(#"action="/demo/prefill""#) && home.value("phoneNumber") == Self.marcia)

        let (waiting, session) = try await demo.start([])
        #expect(waiting.body.contains("Check your phone") && waiting.body.contains(#"src="/assets/demo.js""#))
        #expect(waiting.body.contains(#"id="prefill-next""#) && !waiting.body.contains(#"id="resend""#))
        #expect(waiting.csp.contains("script-src 'self'"))
        // Before the result the form shows the wait page again; with another token, no session at all.
        #expect(try await demo.post("/demo/prefill/challenge", session).body.contains("Check your phone"))
        let stranger = try await demo.post("/demo/prefill/challenge", [session[0], ("token", "not-the-token")])
        #expect(stranger.status == 404 && stranger.body.contains("cannot go on"))

        try await demo.tap(session)
        let id = session[0].1
        #expect(try await demo.relay.store.session(id: id)?.state == .verified)

        let question = try await demo.post("/demo/prefill/challenge", session)
        #expect(question.status == 200 && question.body.contains("Confirm it's you"))
        #expect(question.value("session") == id && !question.csp.contains("script-src"))
        let badDob = try await demo.post("/demo/prefill/challenge", session + [("dob", "19820719")])
        #expect(badDob.status == 422 && badDob.body.contains("Date of birth must be YYYY-MM-DD"))

        let person = try await demo.post("/demo/prefill/challenge", session + [("dob", "1982-07-19")])
        #expect(person.status == 200 && person.body.contains("Check your details"))
        let shown = ["firstName", "lastName", "dob", "address", "city", "region", "postalCode"].map(person.value)
        #expect(shown == ["Marcia", "Longo", "1982-07-19", "00 Mallard Park", "New Orleans", "LA", "70165"])
        #expect(!person.body.contains("6227"), "no SSN on the page")

        let fields = ["firstName", "lastName", "dob", "address", "city", "region", "postalCode"].map {
            ($0, person.value($0) ?? "")
        }
        let unnamed = try await demo.post("/demo/prefill/complete", session + fields.filter { $0.0 != "firstName" })
        #expect(unnamed.status == 422 && unnamed.body.contains("First name is required"))
        #expect(unnamed.value("lastName") == "Longo", "the form comes back as typed")

        let confirmed = try await demo.post("/demo/prefill/complete", session + fields)
        #expect(confirmed.status == 200 && confirmed.body.contains("Verified ✓"))
        #expect(try await demo.relay.store.session(id: id)?.prefill?.completed == true)
        // A second confirm shows the outcome kept; it asks Prove nothing more.
        #expect(try await demo.post("/demo/prefill/complete", session + fields).body.contains("Verified ✓"))

        let logged = logs.all.joined(separator: "\n")
        #expect(logged.contains("Pre-Fill step taken"))
        for secret in ["Marcia", "Longo", "1982-07-19", "19820719", "Mallard", "New Orleans", "70165", "0806227"] {
            #expect(!logged.contains(secret), "the logs contain \(secret)")
        }
    }

    @Test("An SSN given with the start: after the tap the person comes at once, and a changed name is not verified")
    func ssnAtStart() async throws {
        let demo = Demo(relay: try await TestRelay.unstarted())
        let (_, session) = try await demo.start([("ssn", "6227")])
        try await demo.tap(session)
        let person = try await demo.post("/demo/prefill/challenge", session)
        #expect(person.value("firstName") == "Marcia")
        let other = try await demo.post(
            "/demo/prefill/complete", session + [("firstName", "Mark"), ("lastName", "Longo")])
        #expect(other.status == 200 && other.body.contains("Not verified"))
    }

    @Test("Bad input gets a page: an invalid start, a declined tap, an empty form")
    func badInput() async throws {
        let demo = Demo(relay: try await TestRelay.unstarted())
        let invalid = try await demo.post("/demo/prefill", [("phoneNumber", Self.marcia), ("ssn", "12")])
        #expect(invalid.status == 422 && invalid.body.contains("SSN must be 9 digits, or the last 4"))
        #expect(invalid.body.contains(#"action="/demo/prefill""#) && invalid.value("phoneNumber") == Self.marcia)

        let (_, session) = try await demo.start([("dob", "1982-07-19")])
        try await demo.tap(session, decline: true)
        let declined = try await demo.post("/demo/prefill/challenge", session)
        #expect(declined.status == 200 && declined.body.contains("Not verified"))
        #expect(!declined.body.contains("Check your details"))

        for path in ["/demo/prefill/challenge", "/demo/prefill/complete"] {
            let empty = try await demo.post(path, [])
            #expect(empty.status == 404 && empty.body.contains("Start again"))
        }
        // A Unify session's token opens no Pre-Fill step.
        let unify = try await demo.post("/demo", [("phoneNumber", "2001004014")])
        let unifySession = [("session", unify.body.firstMatch(of: /ses_[A-Za-z0-9]+/).map { String($0.output) } ?? "")]
        let token = unify.body.firstMatch(of: /data-token="([^"]+)"/).map { String($0.output.1) } ?? ""
        #expect(try await demo.post("/demo/prefill/complete", unifySession + [("token", token)]).status == 404)
    }

    @Test("A demo form posted from another origin is 403, the friendly page, and changes or shows nothing")
    func foreignOrigin() async throws {
        let relay = try await TestRelay.unstarted()
        let demo = Demo(relay: relay)
        let own = "http://127.0.0.1:8080"
        let evil = "https://evil.example"
        // A page elsewhere that learned a verified session's channel token asks for the person.
        let (_, session) = try await demo.start([("dob", "1982-07-19")])
        try await demo.tap(session)
        let stolen = try await demo.post("/demo/prefill/challenge", session, origin: evil)
        #expect(stolen.status == 403 && stolen.body.contains("<html"), "the friendly page")
        #expect(!stolen.body.contains("Marcia") && !stolen.body.contains("Longo") && !stolen.body.contains("Mallard"))
        #expect(try await relay.store.session(id: session[0].1)?.prefill?.individual == nil, "Prove was not asked")
        let fields = [("firstName", "Marcia"), ("lastName", "Longo")]
        #expect(try await demo.post("/demo/prefill/complete", session + fields, origin: evil).status == 403)
        #expect(try await relay.store.session(id: session[0].1)?.prefill?.completed == nil)

        let outbox = await relay.sandbox?.outbox(phoneNumber: Self.marcia).count
        for (path, form) in [
            ("/demo", [("phoneNumber", "2001004014")]), ("/demo/prefill", [("phoneNumber", Self.marcia)]),
            ("/demo/resend", [("phoneNumber", Self.marcia)]),
            ("/demo/change-number", [("from", Self.marcia), ("to", "2001004014")]),
        ] {
            let page = try await demo.post(path, form, origin: evil)
            #expect(page.status == 403 && page.body.contains("<html"), "\(path)")
            let null = try await demo.post(path, form, origin: "null", fetchSite: "cross-site")
            #expect(null.status == 403, "\(path) from a sandboxed frame elsewhere")
        }
        #expect(await relay.sandbox?.outbox(phoneNumber: Self.marcia).count == outbox, "no link sent again")
        #expect(await relay.sandbox?.outbox(phoneNumber: "2001004014").isEmpty == true, "no session started")
        let metrics = await relay.respond(to: RelayRequest(.GET, "/metrics")).map { String(buffer: $0.body) } ?? ""
        #expect(metrics.contains(#"linkrelay_security_events_total{event="demo_origin_refused"} 10"#), "\(metrics)")

        #expect(try await demo.post("/demo", [("phoneNumber", "2001004014")], origin: "null").status == 403)

        // The relay's own page, and a form without Origin (a browser that sends none), go on as before. Under
        // the pages' `Referrer-Policy: no-referrer` a browser sends the relay's own form with `Origin: null`
        // and `Sec-Fetch-Site: same-origin`.
        let person = try await demo.post("/demo/prefill/challenge", session, origin: own)
        #expect(person.status == 200 && person.value("firstName") == "Marcia")
        let ownNull = try await demo.post("/demo/prefill/challenge", session, origin: "null", fetchSite: "same-origin")
        #expect(ownNull.status == 200 && ownNull.value("firstName") == "Marcia")
        #expect(try await demo.post("/demo/resend", [("phoneNumber", Self.marcia)], origin: own).status == 303)
        #expect(try await demo.post("/demo", [("phoneNumber", "2001004014")]).status == 200)
    }

    @Test("A demo form that names a field twice is 400 and starts nothing")
    func duplicateFormField() async throws {
        let relay = try await TestRelay.unstarted()
        let demo = Demo(relay: relay)
        let twice = try await demo.post("/demo", [("phoneNumber", "2001004014"), ("phone%4Eumber", "2001004018")])
        #expect(twice.status == 400)
        #expect(await relay.sandbox?.outbox(phoneNumber: "2001004014").isEmpty == true)
        #expect(await relay.sandbox?.outbox(phoneNumber: "2001004018").isEmpty == true)
    }
}
