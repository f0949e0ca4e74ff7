import AsyncHTTPClient
import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// The relay's core loop on a live server: a desktop waits, the sandbox phone taps, the desktop
/// learns it, and the result comes from Prove (the embedded sandbox).
@Suite("End to end", .timeLimit(.minutes(1)))
struct EndToEndTests {
    @Test("WebSocket: waiting, tapped, then result verified")
    func webSocketVerified() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let events = ChannelClient.webSocket(
                created.channel.websocket + "?token=\(created.channel.token)")
            var iterator = events.makeAsyncIterator()
            let first = try await iterator.next()
            #expect(first?.type == "waiting")
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 200)
            var received = [first!]
            while let event = try await iterator.next() { received.append(event) }
            #expect(received.map(\.type) == ["waiting", "tapped", "result"])
            #expect(received.map(\.seq) == [1, 2, 3])
            #expect(received[1].asc == true)
            #expect(received[2].outcome == "verified")

            let details = try await relay.session(created.sessionId)
            #expect(details.state == "verified")
            #expect(details.result?.outcome == "verified")
            #expect(details.result?.success == true)
            #expect(details.result?.proveSuccess == "true")
            #expect(details.result?.phoneNumber == "2001004014")
            #expect(details.result?.proveId != nil)
            #expect(details.tappedAt != nil)
            #expect(details.events.map(\.type) == ["waiting", "tapped", "result"])
        }
    }

    @Test("Server-Sent Events: ids, event names, and the stream ends after the result")
    func serverSentEventsVerified() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let stream = ChannelClient.serverSentEvents(
                relay.http, url: created.channel.events, headers: [("Authorization", "Bearer \(created.channel.token)")]
            )
            var iterator = stream.makeAsyncIterator()
            let first = try #require(try await iterator.next())
            #expect(first.event == "waiting" && first.id == "1")
            _ = try await relay.tap()
            var messages = [first]
            while let message = try await iterator.next() { messages.append(message) }
            #expect(messages.map(\.event) == ["waiting", "tapped", "result"])
            #expect(messages.map(\.id) == ["1", "2", "3"])
            let result = try JSONDecoder().decode(WireEvent.self, from: Data(messages[2].data.utf8))
            #expect(result.outcome == "verified")
            #expect(!messages.contains { $0.data.contains("2001004014") }, "desktop events carry no phone number")
        }
    }

    @Test("Long-poll: a held poll answers with the tap, the next with the result")
    func longPollVerified() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let first = try await relay.poll(created)
            #expect(first.events.map(\.type) == ["waiting"])
            #expect(first.after == 1 && !first.done)
            async let held = relay.pollUntilDone(created, after: 1)
            // The held poll subscribes before it reads the store, so a tap at any moment reaches it.
            _ = try await relay.tap()
            let rest = try await held
            #expect(rest.map(\.type) == ["tapped", "result"])
            #expect(rest.last?.outcome == "verified")
        }
    }

    @Test("A channel that connects after the tap still gets every event")
    func lateChannel() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            _ = try await relay.tap()
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "tapped", "result"])
            // The server replays everything, then closes with 1000 after the terminal event.
            let socket = try await RawWebSocket.open(created.channel.websocket + "?token=\(created.channel.token)")
            #expect(socket.upgraded)
            #expect(socket.events == events)
            #expect(socket.closeCode == 1000)
        }
    }

    @Test("Replay after a cursor: ?after=, Last-Event-ID, and a poll past the end")
    func replayAfterCursor() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            _ = try await relay.tap()
            _ = try await relay.pollUntilDone(created)

            let afterOne = try await relay.poll(created, after: 1)
            #expect(afterOne.events.map(\.seq) == [2, 3])
            #expect(afterOne.done)

            var sse: [ChannelClient.SSEMessage] = []
            for try await message in ChannelClient.serverSentEvents(
                relay.http, url: created.channel.events + "?token=\(created.channel.token)",
                headers: [("Last-Event-ID", "2")])
            {
                sse.append(message)
            }
            #expect(sse.map(\.id) == ["3"])

            let socket = try await RawWebSocket.open(
                created.channel.websocket + "?token=\(created.channel.token)&after=2")
            #expect(socket.events.map(\.seq) == [3])
            #expect(socket.closeCode == 1000)

            let past = try await relay.poll(created, after: 3)
            #expect(past.events.isEmpty && past.done && past.after == 3)
        }
    }

    @Test("A channel that already has every event of an ended session ends at once: SSE 204, WebSocket 1000")
    func reconnectAfterTheEnd() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            _ = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel")
            let token = "?token=\(created.channel.token)"
            // What an EventSource sends when it reconnects after the stream ended: 204 makes it stop.
            let sse = try await relay.request(.GET, created.channel.events + token, headers: [("Last-Event-ID", "2")])
            #expect(sse.status == 204)
            #expect(sse.body.isEmpty)
            let socket = try await RawWebSocket.open(created.channel.websocket + token + "&after=2")
            #expect(socket.upgraded)
            #expect(socket.events.isEmpty)
            #expect(socket.closeCode == 1000)
            // Before the end, the stream still replays from the cursor.
            var replayed: [ChannelClient.SSEMessage] = []
            for try await message in ChannelClient.serverSentEvents(
                relay.http, url: created.channel.events + token, headers: [("Last-Event-ID", "1")])
            {
                replayed.append(message)
            }
            #expect(replayed.map(\.event) == ["cancelled"])
        }
    }

    @Test("Decline on the phone: asc=false in tapped, and Prove's answer makes it failed")
    func declined() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let (landing, _) = try await relay.tap(decline: true)
            #expect(landing.status == 200)
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "tapped", "result"])
            #expect(events[1].asc == false)
            #expect(events[2].outcome == "failed")
            #expect(try await relay.session(created.sessionId).state == "failed")
        }
    }

    @Test("A session whose hold ends without a tap expires; its link then answers 410")
    func expires() async throws {
        let clock = ManualClock()
        try await TestRelay.run(socket: true, clock: clock) { relay in
            // The hold also bounds the create's call to Prove in real time, so it is long enough for a
            // busy machine; the manual clock ends it.
            let created = try await relay.createSession(extra: ",\"holdSeconds\":60")
            let first = try await relay.poll(created)
            #expect(first.events.map(\.type) == ["waiting"])
            async let rest = relay.pollUntilDone(created, after: 1)
            clock.advance(by: 61)
            #expect(try await rest.map(\.type) == ["expired"])
            #expect(try await relay.session(created.sessionId).state == "expired")
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 410)
            #expect(landing.body.contains("expired"))
            #expect(try await relay.session(created.sessionId).events.count == 2, "a late tap changes nothing")
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_expirations_total 1"))
        }
    }

    @Test("Cancel ends a session with cancelled; a second cancel is 409")
    func cancel() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel")
            #expect(answer.status == 200)
            #expect(try answer.json(SessionBody.self).state == "cancelled")
            let again = try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel")
            #expect(again.status == 409)
            #expect(again.header("Content-Type") == "application/problem+json")
            let events = try await relay.pollUntilDone(created)
            #expect(events.map(\.type) == ["waiting", "cancelled"])
            let unknown = try await relay.api(.POST, "/v1/sessions/ses_nope/cancel")
            #expect(unknown.status == 404)
            // The phone's link is now used up.
            let (landing, _) = try await relay.tap()
            #expect(landing.status == 409)
        }
    }

    @Test("After the result, the same authId shows the final page; another authId is 409")
    func landingAfterTerminal() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let (_, landingURL) = try await relay.tap()
            _ = try await relay.pollUntilDone(created)
            let again = try await relay.request(.GET, landingURL)
            #expect(again.status == 200)
            let other = landingURL.replacingOccurrences(
                of: #"authId=[0-9a-f-]+"#, with: "authId=00000000-0000-4000-8000-000000000000",
                options: .regularExpression)
            #expect(try await relay.request(.GET, other).status == 409)
            #expect(try await relay.session(created.sessionId).events.count == 3, "no event from either")
        }
    }

    @Test("The short-term sandbox user passes without a tap once the relay asks")
    func shortTermUser() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession(phone: "2001004018")
            // No SMS for this user; landing on the link as if tapped asks Prove, which says true.
            let landing = try await relay.request(
                .GET, created.finalTargetUrl + "?asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c3301")
            #expect(landing.status == 200)
            let events = try await relay.pollUntilDone(created)
            #expect(events.last?.outcome == "verified")
        }
    }
}
