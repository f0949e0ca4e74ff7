import AsyncHTTPClient
import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import NevisSandbox
import Testing

@testable import LinkRelayServer

/// A Nevis session end to end on a live relay with the embedded Nevis sandbox: the desktop waits on its
/// channel, the customer answers in the sandbox's Access App (or a test user's device answers by itself),
/// and the relay's questions to Nevis bring the result to the desktop and to GET.
@Suite("Nevis sessions", .timeLimit(.minutes(1)))
struct NevisSessionTests {
    enum Transport: String, CaseIterable { case webSocket, serverSentEvents, longPoll }

    static let stores = ["memory", "sqlite"]

    @Test(
        "Approved in the Access App: waiting, then result verified, on every store and channel",
        arguments: stores, Transport.allCases)
    func approved(store: String, transport: Transport) async throws {
        try await Self.run(store: store) { relay in
            let created = try await relay.createNevis(#"{"flow":"nevis","username":"dave","message":"Pay CHF 12?"}"#)
            #expect(created.flow == "nevis" && created.finalTargetUrl == nil && created.correlationId == nil)
            #expect(created.approval.qrCode?.hasPrefix("data:image/png;base64,") == true)
            let link = try #require(created.approval.appLink)
            let events = relay.events(created, transport)
            // The app page shows the message the backend asked for.
            let page = try await TestRelay.fetch(.GET, link)
            #expect(page.status == 200 && page.body.contains("Pay CHF 12?"))
            #expect(try await NevisApp.answer(link: link, approve: true) == 200)
            #expect(try await events.value.map(\.type) == ["waiting", "result"])
            #expect(try await events.value.last?.outcome == "verified")

            let session = try await relay.nevisSession(created.sessionId)
            #expect(session.state == "verified" && session.result?.success == true)
            #expect(session.result?.nevis?.status == "succeeded")
            #expect(session.result?.nevis?.username == "dave" && session.result?.nevis?.transactionId != nil)
        }
    }

    @Test("Denied by the user's device: result failed, no reason but Nevis's status")
    func denied() async throws {
        try await Self.run { relay in
            let created = try await relay.createNevis(#"{"flow":"nevis","username":"bob"}"#)
            let events = try await relay.events(created, .longPoll).value
            #expect(events.map(\.type) == ["waiting", "result"] && events.last?.outcome == "failed")
            let session = try await relay.nevisSession(created.sessionId)
            #expect(session.result?.nevis?.status == "failed" && session.result?.reason == nil)
        }
    }

    @Test("Usernameless: the QR code's user is named only once Nevis says succeeded")
    func usernameless() async throws {
        try await Self.run { relay in
            let created = try await relay.createNevis(#"{"flow":"nevis"}"#)
            let events = relay.events(created, .webSocket)
            #expect(try await NevisApp.answer(link: try #require(created.approval.appLink), approve: true) == 200)
            #expect(try await events.value.last?.outcome == "verified")
            let nevis = try await relay.nevisSession(created.sessionId).result?.nevis
            #expect(nevis?.username == NevisTestUser.usernameless.username)
            #expect(nevis?.userId == NevisTestUser.usernameless.userId)
        }
    }

    @Test("A user without a device: 422 rejected_by_nevis, and no session")
    func noDevice() async throws {
        try await Self.run { relay in
            let answer = try await relay.api(.POST, "/v1/sessions", body: #"{"flow":"nevis","username":"carol"}"#)
            #expect(answer.status == 422)
            #expect(try answer.problem().code == "rejected_by_nevis")
        }
    }

    @Test("Push: no QR code or link; the app page lists the user's operation and answers it")
    func push() async throws {
        try await Self.run { relay in
            let created = try await relay.createNevis(#"{"flow":"nevis","username":"dave","channel":"push"}"#)
            #expect(created.approval.qrCode == nil && created.approval.appLink == nil)
            let events = relay.events(created, .serverSentEvents)
            let inbox = try await relay.request(.GET, "/sandbox/nevis/app?user=dave")
            let token = try #require(NevisApp.tokens(in: inbox.body).first)
            #expect(try await NevisApp.answer(base: relay.base, token: token, approve: false) == 200)
            #expect(try await events.value.last?.outcome == "failed")
        }
    }

    @Test("Cancel ends the session; the desktop gets cancelled")
    func cancel() async throws {
        try await Self.run { relay in
            let created = try await relay.createNevis(#"{"flow":"nevis","username":"dave"}"#)
            let events = relay.events(created, .webSocket)
            #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
            #expect(try await events.value.map(\.type) == ["waiting", "cancelled"])
        }
    }

    @Test("The hold's end: expired after one last question; an answer given before it still counts")
    func holdEnds() async throws {
        let clock = ManualClock()
        try await Self.run(clock: clock) { relay in
            let unanswered = try await relay.createNevis(#"{"flow":"nevis","username":"dave","holdSeconds":60}"#)
            let answered = try await relay.createNevis(#"{"flow":"nevis","username":"dave","holdSeconds":60}"#)
            // The relay's next question would come after the hold: only the last one can see this answer.
            #expect(try await NevisApp.answer(link: try #require(answered.approval.appLink), approve: true) == 200)
            let unansweredEvents = relay.events(unanswered, .longPoll)
            let answeredEvents = relay.events(answered, .longPoll)
            clock.advance(by: 61)
            #expect(try await unansweredEvents.value.map(\.type) == ["waiting", "expired"])
            #expect(try await answeredEvents.value.last?.outcome == "verified")
        }
    }

    @Test("Nevis's status answers 503 for a while: the relay keeps asking, and the session ends verified")
    func statusRecovers() async throws {
        try await Self.run { relay in
            // Eight failed answers: the first question's attempts and the next's, then Nevis is back.
            let fault = try await relay.request(
                .PUT, "/sandbox/nevis/faults/status", body: #"{"status":503,"times":8}"#)
            #expect(fault.status == 204)
            let created = try await relay.createNevis(#"{"flow":"nevis","username":"alice"}"#)
            let events = try await relay.events(created, .webSocket).value
            #expect(events.last?.outcome == "verified")
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains(#"linkrelay_nevis_calls_total{endpoint="status",status="503"} 8"#))
        }
    }

    @Test("A Nevis session at trace level logs no status token, link, payload, QR code or message")
    func noSecretsInLogs() async throws {
        try await Self.run { relay in
            let message = "Pay CHF 4711.00 to ACME?"
            let created = try await relay.createNevis(#"{"flow":"nevis","username":"dave","message":"\#(message)"}"#)
            let link = try #require(created.approval.appLink)
            let events = relay.events(created, .webSocket)
            _ = try await TestRelay.fetch(.GET, link)
            _ = try await NevisApp.answer(link: link, approve: true)
            _ = try await events.value
            let stored = try #require(try await relay.relay.store.session(id: created.sessionId)?.nevis)
            let dispatchToken = try #require(NevisSandbox.decodePayload(link)?.data.token)
            let payload = try #require(link.split(separator: "dispatchTokenResponse=").last.map(String.init))
            let qrCode = try #require(created.approval.qrCode)
            let logs = relay.logs.all.joined(separator: "\n")
            #expect(logs.contains("Session finished"), "the session's own lines were captured")
            for (name, secret) in [
                ("status token", stored.handle), ("dispatch token", dispatchToken), ("payload", payload),
                ("link", link), ("QR code", String(qrCode.suffix(64))), ("message", message),
                ("channel token", created.channel.token),
            ] {
                #expect(!logs.contains(secret), "the logs contain the \(name)")
            }
        }
    }

    /// A relay with the embedded sandboxes, listening.
    static func run(
        store: String = "memory", clock: any RelayClock = EventLoopClock(), _ body: (TestRelay) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "nevis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = store == "sqlite" ? "sqlite:" + directory.appending(path: "relay.sqlite").path : store
        try await TestRelay.run(socket: true, store: path, clock: clock, body)
    }
}

/// What the sandbox's Access App does for a person: open the operation, answer it.
enum NevisApp {
    /// Approve or Deny the operation a link opens, as the app page's form posts it; the answer's status.
    static func answer(link: String, approve: Bool) async throws -> Int {
        let token = try #require(NevisSandbox.decodePayload(link)?.data.token)
        let base = String(link.prefix { $0 != "?" }).replacingOccurrences(of: "/sandbox/nevis/open", with: "")
        return try await answer(base: base, token: token, approve: approve)
    }

    static func answer(base: String, token: String, approve: Bool) async throws -> Int {
        let form =
            "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token)
            + "&answer=" + (approve ? "approve" : "deny")
        return try await TestRelay.fetch(
            .POST, base + "/sandbox/nevis/app/answer",
            headers: [("Content-Type", "application/x-www-form-urlencoded")], body: form
        ).status
    }

    /// The tokens of the operations an app page lists (its answer forms' hidden fields).
    static func tokens(in page: String) -> [String] {
        page.components(separatedBy: #"name="token" value=""#).dropFirst().map { String($0.prefix { $0 != "\"" }) }
    }
}

extension NevisApp {
    /// Every event of a channel on `transport`, until the terminal one. A channel replays what came before
    /// it opened, so it may open after the events. `origin`: the page's, for a WebSocket (by default the
    /// WebSocket URL's own, which test relays allow).
    static func events(_ channel: Created.Channel, _ transport: NevisSessionTests.Transport, origin: String? = nil)
        -> Task<[WireEvent], any Error>
    {
        Task {
            var events: [WireEvent] = []
            switch transport {
            case .webSocket:
                let url = channel.websocket + "?token=\(channel.token)"
                let stream = origin.map { ChannelClient.webSocket(url, origin: $0) } ?? ChannelClient.webSocket(url)
                for try await event in stream { events.append(event) }
            case .serverSentEvents:
                let stream = ChannelClient.serverSentEvents(
                    TestRelay.client, url: channel.events, headers: [("Authorization", "Bearer \(channel.token)")])
                for try await message in stream {
                    events.append(try JSONDecoder().decode(WireEvent.self, from: Data(message.data.utf8)))
                }
            case .longPoll:
                var after = 0
                var done = false
                while !done {
                    let answer = try await TestRelay.fetch(
                        .GET, channel.poll + "?after=\(after)&timeout=10&token=\(channel.token)"
                    ).json(PollAnswer.self)
                    events += answer.events
                    (after, done) = (answer.after, answer.done)
                }
            }
            return events
        }
    }
}

struct NevisCreated: Decodable {
    struct Approval: Decodable {
        var qrCode: String?
        var appLink: String?
    }

    var sessionId: String
    var flow: String
    var finalTargetUrl: String?
    var correlationId: String?
    var approval: Approval
    var channel: Created.Channel
}

struct NevisSessionBody: Decodable {
    struct Result: Decodable {
        struct Nevis: Decodable {
            var transactionId: String?
            var userId: String?
            var username: String?
            var status: String
        }

        var outcome: String
        var success: Bool
        var reason: String?
        var nevis: Nevis?
    }

    var state: String
    var result: Result?
    var events: [WireEvent]
}

extension TestRelay {
    func createNevis(_ body: String) async throws -> NevisCreated {
        let answer = try await api(.POST, "/v1/sessions", body: body)
        #expect(answer.status == 201, "create answered \(answer.status): \(answer.body)")
        return try answer.json(NevisCreated.self)
    }

    func nevisSession(_ id: String) async throws -> NevisSessionBody {
        try await api(.GET, "/v1/sessions/\(id)").json(NevisSessionBody.self)
    }

    /// Every event of the session's channel on `transport`, until the terminal one.
    func events(_ created: NevisCreated, _ transport: NevisSessionTests.Transport) -> Task<[WireEvent], any Error> {
        NevisApp.events(created.channel, transport)
    }
}
