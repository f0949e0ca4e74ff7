import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

/// Each rate and connection limit trips at its configured number with a bare 429 that changes
/// nothing, and recovers (rates after a minute on the relay's clock, connections when one closes).
@Suite("Rate and connection limits", .timeLimit(.minutes(1)))
struct LimitsTests {
    static let validQuery = "?asc=true&authId=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    /// The test client connects from 127.0.0.1; trusting it lets each request name its client.
    static let viaProxy: [String: [String]] = ["trusted-proxy": ["127.0.0.1"]]

    private func land(_ relay: TestRelay, _ url: String, from client: String? = nil) async throws -> HTTPAnswer {
        try await relay.request(.GET, url, headers: client.map { [("X-Forwarded-For", $0)] } ?? [])
    }

    @Test("Landings per client IP trip at the limit and recover after a minute")
    func landingPerIP() async throws {
        let clock = ManualClock()
        try await TestRelay.run(
            socket: true, clock: clock, flags: Self.viaProxy.merging(["limit-landing-per-ip": ["3"]]) { $1 }
        ) {
            relay in
            let unknown = "/l/" + String(repeating: "x", count: 32) + Self.validQuery
            for _ in 0..<3 { #expect(try await land(relay, unknown, from: "198.51.100.7").status == 404) }
            let tripped = try await land(relay, unknown, from: "198.51.100.7")
            #expect(tripped.status == 429)
            #expect(tripped.header("Retry-After") == nil, "no precise Retry-After (R1.9)")
            #expect(try await land(relay, unknown, from: "198.51.100.8").status == 404, "another client is unaffected")
            clock.advance(by: 60)
            #expect(try await land(relay, unknown, from: "198.51.100.7").status == 404)
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_limit_trips_total{limit=\"landing_per_ip\"} 1"))
        }
    }

    @Test("Landings per link trip whatever the address, and a tripped landing changes nothing")
    func landingPerLink() async throws {
        let clock = ManualClock()
        try await TestRelay.run(
            socket: true,
            clock: clock, flags: Self.viaProxy.merging(["limit-landing-per-link": ["2"]]) { $1 }
        ) { relay in
            let created = try await relay.createSession()
            let (first, url) = try await relay.tap()
            #expect(first.status == 200)
            #expect(try await land(relay, url, from: "203.0.113.2").status == 200)
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "tapped", "result"])
            #expect(try await land(relay, url, from: "203.0.113.3").status == 429)
            #expect(try await relay.session(created.sessionId).events.count == 3)
            clock.advance(by: 30)
            #expect(try await land(relay, url, from: "203.0.113.3").status == 200, "half a minute refills one")
        }
    }

    @Test("Scanners' HEADs, from any addresses, never spend the link's budget: the phone's GET still lands")
    func headsSpareTheLink() async throws {
        try await TestRelay.run(
            socket: true,
            clock: ManualClock(), flags: Self.viaProxy.merging(["limit-landing-per-link": ["2"]]) { $1 }
        ) { relay in
            let created = try await relay.createSession()
            let link = try await relay.latestLink()
            let landing = try #require(try await relay.request(.GET, link).header("Location"))
            for scanner in 1...20 {
                let head = try await relay.request(.HEAD, landing, headers: [("X-Forwarded-For", "192.0.2.\(scanner)")])
                #expect(head.status == 200)
            }
            #expect(try await land(relay, landing, from: "203.0.113.9").status == 200, "the phone lands")
            #expect(try await relay.pollUntilDone(created).map(\.type) == ["waiting", "tapped", "result"])
        }
    }

    @Test("With taps confirmed on the phone, GETs of the page do not spend the link's budget either")
    func confirmPageGetsSpareTheLink() async throws {
        try await TestRelay.run(
            socket: true,
            clock: ManualClock(),
            flags: Self.viaProxy.merging(["limit-landing-per-link": ["2"], "confirm-on-phone": ["on"]]) { $1 }
        ) { relay in
            _ = try await relay.createSession()
            let link = try await relay.latestLink()
            let landing = try #require(try await relay.request(.GET, link).header("Location"))
            for scanner in 1...10 { #expect(try await land(relay, landing, from: "192.0.2.\(scanner)").status == 200) }
            let confirm = try await relay.request(
                .POST, landing,
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("X-Forwarded-For", "203.0.113.9")],
                body: "choice=confirm")
            #expect(confirm.status == 303, "the phone's confirm is not turned away")
        }
    }

    @Test("X-Forwarded-For is ignored unless the peer is a trusted proxy")
    func forwardedForFromUntrustedPeer() async throws {
        try await TestRelay.run(socket: true, flags: ["limit-landing-per-ip": ["2"]]) { relay async throws in
            let unknown = "/l/" + String(repeating: "y", count: 32) + Self.validQuery
            #expect(try await land(relay, unknown, from: "192.0.2.1").status == 404)
            #expect(try await land(relay, unknown, from: "192.0.2.2").status == 404)
            #expect(try await land(relay, unknown, from: "192.0.2.3").status == 429, "all three came from 127.0.0.1")
        }
    }

    @Test("Session creation per API key trips and recovers; a tripped create starts no Prove flow")
    func createPerKey() async throws {
        let clock = ManualClock()
        try await TestRelay.run(socket: true, clock: clock, flags: ["limit-create-per-key": ["2"]]) { relay in
            _ = try await relay.createSession()
            _ = try await relay.createSession()
            let sandbox = try #require(relay.relay.sandbox)
            let unifyCalls = await sandbox.callCount("unify")
            let tripped = try await relay.api(.POST, "/v1/sessions", body: "{\"phoneNumber\":\"2001004014\"}")
            #expect(tripped.status == 429)
            #expect(tripped.body.isEmpty)
            #expect(await sandbox.callCount("unify") == unifyCalls)
            clock.advance(by: 60)
            _ = try await relay.createSession()
        }
    }

    @Test("Channels per session: one too many is 429 until another closes")
    func channelsPerSession() async throws {
        try await TestRelay.run(socket: true, flags: ["limit-channels-per-session": ["2"]]) { relay in
            let created = try await relay.createSession()
            let url = created.channel.events + "?token=\(created.channel.token)"
            let first = ChannelClient.serverSentEvents(relay.http, url: url)
            var firstEvents = first.makeAsyncIterator()
            _ = try await firstEvents.next()
            let second = ChannelClient.serverSentEvents(relay.http, url: url)
            var secondEvents = second.makeAsyncIterator()
            _ = try await secondEvents.next()
            let poll = created.channel.poll + "?timeout=0&token=\(created.channel.token)"
            #expect(try await relay.request(.GET, poll).status == 429)
            #expect(try await relay.request(.GET, url).status == 429)
            // Both streams end with the session; then there is room again.
            _ = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel")
            while try await firstEvents.next() != nil {}
            while try await secondEvents.next() != nil {}
            let answer = try await relay.request(.GET, poll)
            #expect(answer.status == 200)
            #expect(try answer.json(PollAnswer.self).done)
        }
    }

    @Test("Channels per client IP count across sessions, and come back when one closes")
    func channelsPerIP() async throws {
        try await TestRelay.run(socket: true, flags: Self.viaProxy.merging(["limit-channels-per-ip": ["1"]]) { $1 }) {
            relay in
            let one = try await relay.createSession()
            let two = try await relay.createSession()
            let stream = ChannelClient.serverSentEvents(
                relay.http, url: one.channel.events + "?token=\(one.channel.token)",
                headers: [("X-Forwarded-For", "198.51.100.20")])
            var events = stream.makeAsyncIterator()
            _ = try await events.next()
            let poll = two.channel.poll + "?timeout=0&token=\(two.channel.token)"
            let same = try await relay.request(.GET, poll, headers: [("X-Forwarded-For", "198.51.100.20")])
            #expect(same.status == 429)
            let other = try await relay.request(.GET, poll, headers: [("X-Forwarded-For", "198.51.100.21")])
            #expect(other.status == 200)
            _ = try await relay.api(.POST, "/v1/sessions/\(one.sessionId)/cancel")
            while try await events.next() != nil {}
            let again = try await relay.request(.GET, poll, headers: [("X-Forwarded-For", "198.51.100.20")])
            #expect(again.status == 200, "the place came back when the first channel ended")
        }
    }

    @Test("--limits off lifts them all: 200 landings from one address")
    func limitsOff() async throws {
        try await TestRelay.run(socket: true, flags: ["limits": ["off"], "limit-landing-per-ip": ["1"]]) { relay in
            let created = try await relay.createSession()
            let url = created.finalTargetUrl + Self.validQuery
            for _ in 0..<200 { #expect(try await relay.request(.GET, url).status == 200) }
        }
    }
}
