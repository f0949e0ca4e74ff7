import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// What the demo's wait page shows before its script runs, and the pages' icon. What the script does
/// after the tap, in a real browser: Tests/browser/test_demo.py and test_demo_prefill.py.
@Suite("Demo pages", .timeLimit(.minutes(1)))
struct DemoPageTests {
    @Test("The wait page shows the number masked as the sandbox phone does, and a plainly named finish button")
    func waitPage() async throws {
        let demo = DemoPrefillTests.Demo(relay: try await TestRelay.unstarted())
        let page = try await demo.post("/demo", [("phoneNumber", "2001004014")])
        #expect(page.status == 200)
        #expect(page.body.contains(#"<strong id="phone">******4014</strong>"#))
        #expect(Secrets.maskedPhone("2001004014") == "******4014", "as the sandbox phone's messages show it")
        // The whole number is only where the page's script and the sandbox phone's link need it.
        let shown = page.body.replacing(/<[^>]*>/, with: "")
        #expect(!shown.contains("2001004014"), "no text on the page shows the whole number")
        #expect(page.body.contains(#">I finished on this device</button>"#))
        #expect(!page.body.contains("Finish (as Prove"))
        #expect(page.body.contains("AuthFinish"), "the detail stays, as a hint")
        #expect(page.body.contains(#"<input type="tel" id="to""#))

        let prefill = try await demo.post("/demo/prefill", [("phoneNumber", DemoPrefillTests.marcia)])
        #expect(
            prefill.body.contains(#"<form method="post" action="/demo/prefill/challenge" id="prefill-next" hidden>"#))
        #expect(!prefill.body.contains("Continue once verified"))
        #expect(prefill.body.contains("<noscript>"), "without a script the form shows")
    }

    @Test("/favicon.ico answers a small SVG icon, which every page names")
    func favicon() async throws {
        try await TestRelay.run { relay in
            let icon = try await relay.request(.GET, "/favicon.ico")
            #expect(icon.status == 200)
            #expect(icon.header("Content-Type") == "image/svg+xml")
            #expect(SVGElements.parse(icon.body)?.elements.first?.name == "svg", "well-formed SVG")
            #expect(icon.body.utf8.count < 1024)
            let home = try await relay.request(.GET, "/")
            #expect(home.body.contains(#"<link rel="icon" href="/favicon.ico" type="image/svg+xml">"#))
        }
    }
}
