import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// The strict landing rules of API.md: every input gets its status, and a rejected one changes nothing.
@Suite("Landing", .timeLimit(.minutes(1)))
struct LandingTests {
    static let uuid = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    static let long = String(repeating: "a", count: 8192)

    static let cases: [(query: String, status: Int)] = [
        ("asc=true&authId=\(uuid)", 200),
        ("asc=false&authId=\(uuid)", 200),
        ("asc=true&authId=\(uuid.uppercased())", 200),
        ("authId=\(uuid)&asc=true", 200),
        ("asc=true&authId=\(uuid)&next=https://evil.example", 200),
        ("asc=true&authId=\(uuid)&url=//evil.example&redirect=https://evil.example", 200),
        ("asc=true&authId=\(uuid)&extra=\(long)", 200),
        ("asc=TRUE&authId=\(uuid)", 400),
        ("asc=True&authId=\(uuid)", 400),
        ("asc=1&authId=\(uuid)", 400),
        ("asc=yes&authId=\(uuid)", 400),
        ("asc=&authId=\(uuid)", 400),
        ("asc&authId=\(uuid)", 400),
        ("asc=%74rue&authId=\(uuid)", 400),
        ("asc=true%00&authId=\(uuid)", 400),
        ("asc=true%20&authId=\(uuid)", 400),
        ("asc=true+&authId=\(uuid)", 400),
        ("asc=true&authId=%7B\(uuid)%7D", 400),
        ("asc=true&authId=urn:uuid:\(uuid)", 400),
        ("asc=true&authId=\(uuid.dropLast())", 400),
        ("asc=true&authId=\(uuid)0", 400),
        ("asc=true&authId=\(uuid.replacingOccurrences(of: "f", with: "g"))", 400),
        ("asc=true&authId=\(uuid.replacingOccurrences(of: "-", with: ""))", 400),
        ("asc=true&authId=\(uuid.replacingOccurrences(of: "-", with: "%2D"))", 400),
        ("asc=true&asc=true&authId=\(uuid)", 400),
        ("asc=true&asc=false&authId=\(uuid)", 400),
        ("asc=true&authId=\(uuid)&authId=\(uuid)", 400),
        ("authId=\(uuid)", 400),
        ("asc=true", 400),
        ("", 400),
        ("ASC=true&AUTHID=\(uuid)", 400),
        ("asc=\(long)&authId=\(uuid)", 400),
        ("asc=true&authId=\(long)", 400),
    ]

    /// The table through the route table and the landing's controller, on a relay that is built but not
    /// started: no socket, no server per case.
    @Test("Landing inputs", arguments: cases)
    func landing(query: String, status: Int) async throws {
        let relay = try await TestRelay.unstarted()
        let session = try await relay.service.create(
            CreateSessionRequest(phoneNumber: "2001004014"), idempotencyKey: nil)
        let target = "/l/\(session.linkKey)" + (query.isEmpty ? "" : "?" + query)
        let answer = try #require(await relay.respond(to: RelayRequest(.GET, target)))
        let body = String(buffer: answer.body)
        #expect(Int(answer.status.code) == status, "\(query.prefix(80)) answered \(answer.status)")
        #expect(answer.headers["Location"].isEmpty, "a landing never redirects")
        #expect(!body.contains("evil.example"))
        #expect(answer.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
        let events = try await relay.store.events(sessionID: session.id, after: 0).map(\.kind.type)
        if status == 200 {
            #expect(events == ["waiting", "tapped"])
        } else {
            #expect(events == ["waiting"], "a rejected landing changes nothing")
            #expect(try await relay.store.session(id: session.id)?.state == .waiting)
            #expect(body.contains("not valid"))
        }
    }

    @Test("End to end, a landing's answer is the controller's: a valid one, a bad asc, a repeated authId")
    func landingOverHTTP() async throws {
        try await TestRelay.run { relay in
            for (query, status) in [Self.cases[0], Self.cases[7], Self.cases[26]] {
                let created = try await relay.createSession()
                let answer = try await relay.request(.GET, created.finalTargetUrl + "?" + query)
                #expect(answer.status == status, "\(query.prefix(80)) answered \(answer.status)")
                #expect(answer.header("Content-Type") == "text/html; charset=utf-8")
                let events = try await relay.session(created.sessionId).events.map(\.type)
                #expect(events.prefix(2) == (status == 200 ? ["waiting", "tapped"] : ["waiting"]))
            }
        }
    }

    @Test("Unknown and malformed keys answer 404 with the friendly page")
    func unknownKey() async throws {
        try await TestRelay.run { relay in
            for path in ["/l/" + String(repeating: "A", count: 32), "/l/short", "/l/" + Self.long] {
                let answer = try await relay.request(.GET, path + "?asc=true&authId=\(Self.uuid)")
                #expect(answer.status == 404)
                #expect(answer.body.contains("recognise"))
            }
        }
    }

    @Test("Every landing page carries the security headers of API.md")
    func headers() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            for query in ["asc=true&authId=\(Self.uuid)", "asc=nope"] {
                let answer = try await relay.request(.GET, created.finalTargetUrl + "?" + query)
                #expect(answer.header("Cache-Control") == "no-store")
                #expect(answer.header("Referrer-Policy") == "no-referrer")
                #expect(answer.header("X-Content-Type-Options") == "nosniff")
                let csp = try #require(answer.header("Content-Security-Policy"))
                #expect(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"))
                #expect(!answer.body.contains("https://") && !answer.body.contains("http://"), "no third-party assets")
            }
        }
    }

    @Test("Each valid landing asks Prove again; only the first emits tapped")
    func repeatedLanding() async throws {
        let clock = ManualClock()
        try await TestRelay.run(clock: clock) { relay in
            let created = try await relay.createSession()
            // Land before the sandbox link is opened: Prove says pending, so the session stays tapped.
            let url = created.finalTargetUrl + "?asc=true&authId=\(Self.uuid)"
            #expect(try await relay.request(.GET, url).status == 200)
            #expect(try await relay.request(.GET, url).status == 200)
            // The verifier heard `pending` and waits on the clock (beside the expiry sweeper and the
            // channel heartbeat), so it cannot see the result before the phone's landing arrives.
            await clock.waitForSleepers(3)
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 200)
            clock.advance(by: 1)
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "tapped", "result"])
            #expect(events.last?.outcome == "verified")
        }
    }

    @Test("Reloading the landing after the result shows the final page each time, counted and under the limits")
    func reloadAfterResult() async throws {
        try await TestRelay.run(flags: ["limit-landing-per-link": ["4"]]) { relay in
            let created = try await relay.createSession()
            let (first, url) = try await relay.tap()
            #expect(first.status == 200)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "tapped", "result"])
            // The first reload reads the store; the next ones are answered from memory, the same way.
            let reload = try await relay.request(.GET, url)
            #expect(reload.status == 200)
            #expect(reload.body.contains("This step is already complete"))
            #expect(reload.header("Cache-Control") == "no-store")
            #expect(reload.header("Content-Security-Policy")?.hasPrefix("default-src 'none'") == true)
            #expect(reload.header("X-Content-Type-Options") == "nosniff")
            #expect(reload.header("Date") != nil)
            // Only the Date may differ, and the order of the headers.
            func headers(_ response: HTTPAnswer) -> [String] {
                response.headers.filter { $0.0.lowercased() != "date" }.map { "\($0.0.lowercased()): \($0.1)" }.sorted()
            }
            for _ in 0..<2 {
                let again = try await relay.request(.GET, url)
                #expect(again.status == 200)
                #expect(again.body == reload.body)
                #expect(headers(again) == headers(reload))
                #expect(again.header("Date") != nil)
            }
            let fifth = try await relay.request(.GET, url)
            #expect(fifth.status == 429, "the link's fifth landing in a minute")
            #expect(fifth.body.contains("<html"))
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_landings_total{result=\"final_page\"} 3"))
            #expect(try await relay.session(created.sessionId).events.count == 3, "reloads change nothing")
        }
    }

    @Test("A HEAD answers what the GET would, without a body, and changes nothing")
    func head() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let url = created.finalTargetUrl + "?asc=true&authId=\(Self.uuid)"
            let head = try await relay.request(.HEAD, url)
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(try await relay.session(created.sessionId).events.map(\.type) == ["waiting"])
            let get = try await relay.request(.GET, url)
            #expect(get.body.contains("we got your tap"))
            #expect(head.header("Content-Length") == String(get.body.utf8.count))
            func headers(_ answer: HTTPAnswer) -> [String] {
                answer.headers.filter { $0.0.lowercased() != "date" }.map { "\($0.0.lowercased()): \($0.1)" }.sorted()
            }
            #expect(headers(head) == headers(get))
            #expect(try await relay.request(.HEAD, created.finalTargetUrl + "?asc=maybe").status == 400)
            #expect(try await relay.request(.HEAD, "/l/short?asc=true&authId=\(Self.uuid)").status == 404)
        }
    }

    @Test("A landing between other requests on one connection is answered in its turn")
    func sharedConnection() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let port = try #require(URLComponents(string: relay.base)?.port)
            let landing = try #require(URLComponents(string: created.finalTargetUrl)).path
            let host = "Host: 127.0.0.1:\(port)\r\n"
            // Sent at once: the front door answers each in its turn.
            let answer = try await relay.rawExchange(
                "GET /healthz HTTP/1.1\r\n\(host)\r\n"
                    + "GET \(landing)?asc=true&authId=\(Self.uuid) HTTP/1.1\r\n\(host)\r\n"
                    + "GET /healthz HTTP/1.1\r\n\(host)Connection: close\r\n\r\n")
            let parts = answer.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(parts.map { $0.prefix(3) } == ["200", "200", "200"], "\(answer.prefix(200))")
            #expect(parts.map { $0.contains("we got your tap") } == [false, true, false])
            #expect(parts.map { $0.hasSuffix("\r\n\r\nok\n") } == [true, false, true])
            #expect(try await relay.session(created.sessionId).events.map(\.type).prefix(2) == ["waiting", "tapped"])
        }
    }

    @Test("A landing sent in absolute form (as through a forward proxy) is the same landing")
    func absoluteForm() async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            _ = try #require(URLComponents(string: relay.base)?.port)
            let answer = try await relay.rawExchange(
                "GET \(created.finalTargetUrl)?asc=true&authId=\(Self.uuid) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    + "Connection: close\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(40))")
            #expect(try await relay.session(created.sessionId).events.map(\.type).prefix(2) == ["waiting", "tapped"])
        }
    }

    @Test("A phone that closes its side after the request still gets its page; an HTTP/1.0 one is closed after it")
    func halfClosed() async throws {
        try await TestRelay.run { relay in
            _ = try #require(URLComponents(string: relay.base)?.port)
            for (version, halfClose) in [("1.1", true), ("1.0", false)] {
                let created = try await relay.createSession()
                let landing = try #require(URLComponents(string: created.finalTargetUrl)).path
                // rawExchange returns when the relay closes the connection.
                let answer = try await relay.rawExchange(
                    "GET \(landing)?asc=false&authId=\(Self.uuid) HTTP/\(version)\r\nHost: 127.0.0.1\r\n\r\n",
                    halfClose: halfClose)
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(40))")
                #expect(answer.contains("we got your tap"))
                let events = try await relay.session(created.sessionId).events.map(\.type)
                #expect(events.prefix(2) == ["waiting", "tapped"])
            }
        }
    }

    @Test("A landing the store cannot record gets the friendly page, and the relay goes on")
    func storeFailure() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("landing-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await TestRelay.run(store: "sqlite:" + path) { relay in
            let created = try await relay.createSession()
            try await relay.relay.store.close()
            let answer = try await relay.request(.GET, created.finalTargetUrl + "?asc=true&authId=\(Self.uuid)")
            #expect(answer.status == 503)
            #expect(answer.body.contains("Something went wrong on our side"))
            #expect(answer.header("Content-Security-Policy")?.hasPrefix("default-src 'none'") == true)
            #expect(try await relay.request(.GET, "/healthz").status == 200)
            #expect(relay.logs.all.contains { $0.contains("The store cannot take writes") })
        }
    }
}
