import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// What operators see of Nevis: the open operations by age in `/metrics`, and the ops page's Nevis
/// section and status box, shown only with `--nevis`. On relays built but not started, so that nothing
/// asks Nevis but what a test does: a create asks for the approval, the verifier's step for the status.
@Suite("Ops: Nevis", .timeLimit(.minutes(1)))
struct OpsNevisTests {
    static let basic = HTTPHeaders([OpsPageTests.basic("ops", TestRelay.apiKey)])

    static func opsPage(_ relay: LinkRelay) async throws -> String {
        let answer = try #require(await relay.respond(to: RelayRequest(.GET, "/ops", headers: basic)))
        #expect(answer.status == .ok)
        return String(buffer: answer.body)
    }

    /// `POST /v1/sessions` with `body`: the status, and the session's id and app link when created.
    static func create(_ relay: LinkRelay, _ body: String) async throws -> (
        status: Int, id: String?, appLink: String?
    ) {
        let headers: HTTPHeaders = ["Authorization": "Bearer \(TestRelay.apiKey)", "Content-Type": "application/json"]
        let answer = try #require(
            await relay.respond(to: RelayRequest(.POST, "/v1/sessions", headers: headers, body: body)))
        let object = try JSONSerialization.jsonObject(with: Data(buffer: answer.body)) as? [String: Any]
        let approval = object?["approval"] as? [String: Any]
        return (Int(answer.status.code), object?["sessionId"] as? String, approval?["appLink"] as? String)
    }

    /// The Access App page opens `appLink` (which shows the operation) and answers it, as a person taps
    /// Approve or Deny.
    static func answer(_ relay: LinkRelay, appLink: String, approve: Bool) async throws {
        let app = try #require(await relay.respond(to: RelayRequest(.GET, appLink)))
        #expect(app.status == .ok)
        let page = DemoPrefillTests.Page(status: 200, body: String(buffer: app.body), csp: "")
        let form = "token=\(try #require(page.value("token")))&answer=\(approve ? "approve" : "deny")"
        let answered = await relay.respond(
            to: RelayRequest(
                .POST, "/sandbox/nevis/app/answer",
                headers: ["Content-Type": "application/x-www-form-urlencoded"], body: form))
        #expect(answered?.status == .ok)
    }

    @Test("/metrics counts the open Nevis operations by the age of their hold, and no other flow's")
    func operationsOpenMetric() async throws {
        let clock = ManualClock()
        let relay = try await TestRelay.unstarted(clock: clock)
        let unify = try await relay.respond(
            to: RelayRequest(
                .POST, "/v1/sessions",
                headers: ["Authorization": "Bearer \(TestRelay.apiKey)", "Content-Type": "application/json"],
                body: #"{"phoneNumber":"2001004014"}"#))
        #expect(unify?.status == .created)
        for _ in 0..<2 { #expect(try await Self.create(relay, #"{"flow":"nevis","username":"dave"}"#).status == 201) }
        clock.advance(by: 40)
        #expect(try await Self.create(relay, #"{"flow":"nevis","username":"dave","channel":"push"}"#).status == 201)
        #expect(try await Self.create(relay, #"{"flow":"nevis","username":"carol"}"#).status == 422, "no session")

        let text = String(buffer: try #require(await relay.respond(to: RelayRequest(.GET, "/metrics"))).body)
        let metrics = OpsMetricsText(text: text)
        #expect(metrics.value(#"linkrelay_nevis_operations_open{age="0-30s"}"#) == 1)
        #expect(metrics.value(#"linkrelay_nevis_operations_open{age="30-60s"}"#) == 2)
        #expect(metrics.value(#"linkrelay_nevis_operations_open{age="5m+"}"#) == 0)
        #expect(metrics.value(#"linkrelay_sessions_in_progress{state="waiting",age="30-60s"}"#) == 3, "every flow's")
        #expect(metrics.value(#"linkrelay_nevis_calls_total{endpoint="approval",status="200"}"#) == 3)
        #expect(metrics.value(#"linkrelay_nevis_calls_total{endpoint="approval",status="400"}"#) == 1)
        #expect(text.contains("# TYPE linkrelay_nevis_operations_open gauge"))
    }

    @Test(
        "After a Nevis session approved and one open, the page's Nevis section counts the calls by endpoint and answer, the open operation by age, the breaker; no secret"
    )
    func section() async throws {
        let clock = ManualClock()
        let relay = try await TestRelay.unstarted(clock: clock)
        let approved = try await Self.create(
            relay, #"{"flow":"nevis","username":"dave","message":"Pay CHF 12 to Example Shop?"}"#)
        try await Self.answer(relay, appLink: try #require(approved.appLink), approve: true)
        await relay.parts.verifier.verify(sessionID: try #require(approved.id))
        let open = try await Self.create(relay, #"{"flow":"nevis","username":"dave"}"#)
        #expect(try await Self.create(relay, #"{"flow":"nevis","username":"carol"}"#).status == 422)

        let page = try await Self.opsPage(relay)
        func figure(_ label: String) -> String? { OpsPageTests.figure(page, section: "nevis", label) }
        #expect(figure("Open operations") == "1")
        #expect(figure("Calls, last hour") == "4", "three approvals, one status question")
        #expect(figure("Errors, last hour") == "0")
        #expect(figure("Breaker") == "closed")
        #expect(figure("Refused by the breaker (503), last hour") == "0")
        #expect(page.contains("<td>approval</td><td>3</td><td>2</td><td>1</td><td>0</td><td>0.0 %</td>"), "carol: 4xx")
        #expect(page.contains("<td>status</td><td>1</td><td>1</td><td>0</td><td>0</td><td>0.0 %</td>"))
        #expect(page.contains("0–30 s: waiting 1, the app has it 0"), "the open operation, under 30 s old")
        #expect(page.contains("status questions 1</title>"), "this minute's status question")
        let box = try #require(OpsStatusTests.box(page, "nevis"))
        #expect(box.level == "ok" && box.value == "0.0 %", "\(box)")
        #expect(box.detail.hasSuffix("breaker closed"))
        for secret in [approved.id, approved.appLink, open.id, open.appLink, "Pay CHF 12"].compactMap({ $0 }) {
            #expect(!page.contains(secret), "the page shows \(secret.prefix(12))…")
        }
    }

    @Test(
        "Timeouts on Nevis's status: the error rate is red on the strip and in the table, and status questions per second follow the calls"
    )
    func errors() async throws {
        let clock = ManualClock()  // on a minute's first second
        let relay = try await TestRelay.unstarted(clock: clock)
        clock.advance(by: 30)
        // What the Nevis client tells the relay of each attempt, as `--nevis` wires it.
        for index in 0..<27 {
            relay.metrics.nevisCall(
                endpoint: "status", status: index < 18 ? "200" : "timeout", duration: .milliseconds(4))
        }
        let page = try await Self.opsPage(relay)
        let box = try #require(OpsStatusTests.box(page, "nevis"))
        #expect(box.level == "bad" && box.value == "33.3 %", "\(box)")
        #expect(box.detail.hasPrefix("status: 9 of 27 calls failed in the last 5 min; alert above 5.0 %"))
        #expect(
            page.contains(
                #"<td>status</td><td>27</td><td>18</td><td>0</td><td class="bad">9</td><td class="bad">33.3 %</td>"#))
        // 27 questions over the window's 4 whole minutes and the 30 s of this one.
        #expect(OpsPageTests.figure(page, section: "nevis", "Status questions per second") == "0.10")
        #expect(OpsPageTests.figure(page, section: "nevis", "Errors, last hour") == "9")
    }

    @Test("With Nevis failing, its breaker opens: the strip's Nevis box is red and says so, the section too")
    func breakerOpen() async throws {
        try await TestRelay.run(
            socket: true, flags: ["breaker-failures": ["2"], "breaker-cooldown": ["30"], "limits": ["off"]]
        ) { relay in
            let fault = try await relay.request(
                .PUT, "/sandbox/nevis/faults/approval", body: #"{"status":503}"#)
            #expect(fault.status == 200 || fault.status == 204, "\(fault.body)")
            let create = #"{"flow":"nevis","username":"dave"}"#
            for _ in 0..<3 { #expect(try await relay.api(.POST, "/v1/sessions", body: create).status == 503) }
            let page = try await OpsStatusTests.opsPage(relay)
            let box = try #require(OpsStatusTests.box(page, "nevis"))
            #expect(box.level == "bad", "\(box)")
            #expect(box.detail.contains("breaker open: calls refused (503)"), "\(box)")
            #expect(OpsPageTests.figure(page, section: "nevis", "Breaker") == "open")
            #expect(OpsPageTests.figure(page, section: "nevis", "Refused by the breaker (503), last hour") == "1")
            #expect(OpsStatusTests.box(page, "breaker")?.value == "closed", "Prove's breaker is another")
        }
    }

    @Test("Without --nevis the page shows nothing of Nevis")
    func withoutNevis() async throws {
        let relay = try await TestRelay.unstarted(
            flags: ["prove": ["uat"]], environment: ["PROVE_CLIENT_ID": "id", "PROVE_CLIENT_SECRET": "secret"])
        #expect(relay.configuration.nevis == nil)
        let page = try await Self.opsPage(relay)
        #expect(page.contains(#"id="prove""#), "the page is there")
        #expect(!page.contains(#"id="nevis""#) && !page.contains(#"id="status-nevis""#))
        #expect(!page.contains("Nevis"))

        let nevis = try await Self.opsPage(try await TestRelay.unstarted())
        #expect(nevis.contains(#"<section class="ops-section" id="nevis""#) && nevis.contains(#"id="status-nevis""#))
    }
}
