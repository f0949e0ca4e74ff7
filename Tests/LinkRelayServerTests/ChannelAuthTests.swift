import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import LinkRelayServer

private struct ChannelProblem: Decodable {
    var title: String
    var status: Int
    var detail: String
}

/// What a desktop channel request carries besides its URL.
enum AuthChannelRoute: String, CaseIterable, Sendable {
    case events
    case poll

    /// The query a successful request needs so that it answers at once (the session is terminal,
    /// or the poll does not wait).
    var quickQuery: String { self == .poll ? "timeout=0" : "" }
}

extension TestRelay {
    fileprivate func channel(
        _ route: AuthChannelRoute, session: String, query: String = "", headers: [(String, String)] = []
    ) async throws -> HTTPAnswer {
        let query = [query, route.quickQuery].filter { !$0.isEmpty }.joined(separator: "&")
        return try await request(
            .GET, "/v1/sessions/\(session)/\(route.rawValue)" + (query.isEmpty ? "" : "?" + query), headers: headers)
    }

    /// The session's events as the integrator's backend reads them.
    fileprivate func eventTypes(_ id: String) async throws -> [String] {
        try await session(id).events.map(\.type)
    }
}

private func expectChannelProblem(
    _ answer: HTTPAnswer, status: Int, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    #expect(answer.status == status, "answered \(answer.status): \(answer.body)", sourceLocation: sourceLocation)
    #expect(answer.header("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
    #expect(try answer.json(ChannelProblem.self).status == status, sourceLocation: sourceLocation)
    #expect(!answer.body.contains("\"seq\""), "no event in a refusal", sourceLocation: sourceLocation)
}

@Suite("Channel authorization", .timeLimit(.minutes(1)))
struct ChannelAuthTests {
    static let evil = "https://evil.example"

    // MARK: - SSE and long-poll

    @Test(
        "A missing channel token is 401 channel_token_required, decided before any lookup",
        arguments: AuthChannelRoute.allCases)
    func missingToken(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.channel(route, session: created.sessionId)
            try expectChannelProblem(answer, status: 401)
            #expect(answer.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            #expect(try answer.problem().code == "channel_token_required")
            let unknown = try await relay.channel(route, session: "ses_doesnotexist")
            #expect(unknown.status == 401 && unknown.body == answer.body)
        }
    }

    @Test(
        "A wrong channel token, as a query or a Bearer header, is the unknown session's 404",
        arguments: AuthChannelRoute.allCases)
    func wrongToken(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let unknown = try await relay.channel(route, session: "ses_doesnotexist", query: "token=x")
            try expectChannelProblem(unknown, status: 404)
            let wrong = "not-the-token-0123456789abcdefghij"
            let viaQuery = try await relay.channel(route, session: created.sessionId, query: "token=\(wrong)")
            let viaHeader = try await relay.channel(
                route, session: created.sessionId, headers: [("Authorization", "Bearer \(wrong)")])
            // The API key is not a channel token either.
            let apiKey = try await relay.channel(
                route, session: created.sessionId, headers: [("Authorization", "Bearer \(TestRelay.apiKey)")])
            for answer in [viaQuery, viaHeader, apiKey] {
                try expectChannelProblem(answer, status: 404)
                #expect(answer.body == unknown.body)
                #expect(answer.headers.map(\.0).sorted() == unknown.headers.map(\.0).sorted())
                #expect(!answer.body.contains(wrong))
            }
        }
    }

    @Test("Another session's token is 404, as an unknown session", arguments: AuthChannelRoute.allCases)
    func otherSessionsToken(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let mine = try await relay.createSession()
            let theirs = try await relay.createSession()
            let answer = try await relay.channel(route, session: mine.sessionId, query: "token=\(theirs.channel.token)")
            try expectChannelProblem(answer, status: 404)
        }
    }

    @Test("An unknown session is 404", arguments: AuthChannelRoute.allCases)
    func unknownSession(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.channel(
                route, session: "ses_doesnotexist", query: "token=\(created.channel.token)")
            try expectChannelProblem(answer, status: 404)
        }
    }

    @Test(
        "A foreign Origin is 403, readable by its page (Access-Control-Allow-Origin: *) and naming no session",
        arguments: AuthChannelRoute.allCases)
    func foreignOrigin(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.channel(
                route, session: created.sessionId, query: "token=\(created.channel.token)",
                headers: [("Origin", Self.evil)])
            try expectChannelProblem(answer, status: 403)
            #expect(answer.header("Access-Control-Allow-Origin") == "*")
            #expect(answer.header("Access-Control-Allow-Credentials") == nil)
            // The origin is checked before the session is read: an unknown session's 403 is the same.
            let unknown = try await relay.channel(
                route, session: "ses_doesnotexist", query: "token=wrong", headers: [("Origin", Self.evil)])
            try expectChannelProblem(unknown, status: 403)
            #expect(unknown.body == answer.body)
        }
    }

    @Test("The allowed Origin is answered with Access-Control-Allow-Origin", arguments: AuthChannelRoute.allCases)
    func allowedOrigin(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            // A cancelled session makes the SSE stream end after replaying, so the whole body can be read.
            #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
            let answer = try await relay.channel(
                route, session: created.sessionId, query: "token=\(created.channel.token)",
                headers: [("Origin", relay.base)])
            #expect(answer.status == 200)
            #expect(answer.header("Access-Control-Allow-Origin") == relay.base)
            #expect(answer.header("Access-Control-Allow-Origin") != "*")
            #expect(answer.body.contains("cancelled"))
        }
    }

    @Test("Without an Origin (not a browser), a valid token is enough and no CORS header is sent")
    func noOrigin() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.channel(
                .poll, session: created.sessionId, query: "token=\(created.channel.token)")
            #expect(answer.status == 200)
            #expect(answer.header("Access-Control-Allow-Origin") == nil)
            #expect(try answer.json(PollAnswer.self).events.map(\.type) == ["waiting"])
        }
    }

    @Test("A preflight from the allowed origin is 204 with the allow headers", arguments: AuthChannelRoute.allCases)
    func preflightAllowed(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.request(
                .OPTIONS, "/v1/sessions/\(created.sessionId)/\(route.rawValue)",
                headers: [
                    ("Origin", relay.base), ("Access-Control-Request-Method", "GET"),
                    ("Access-Control-Request-Headers", "authorization"),
                ])
            #expect(answer.status == 204)
            #expect(answer.header("Access-Control-Allow-Origin") == relay.base)
            #expect(answer.header("Access-Control-Allow-Methods")?.contains("GET") == true)
            #expect(answer.header("Access-Control-Allow-Headers")?.lowercased().contains("authorization") == true)
            #expect(answer.body.isEmpty)
        }
    }

    @Test("A preflight from a foreign origin is 403", arguments: AuthChannelRoute.allCases)
    func preflightForeign(route: AuthChannelRoute) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.request(
                .OPTIONS, "/v1/sessions/\(created.sessionId)/\(route.rawValue)",
                headers: [("Origin", Self.evil), ("Access-Control-Request-Method", "GET")])
            #expect(answer.status == 403)
            #expect(answer.header("Access-Control-Allow-Origin") == nil)
            #expect(answer.header("Access-Control-Allow-Methods") == nil)
        }
    }

    @Test(
        "Bad long-poll parameters are 400",
        arguments: ["timeout=56", "timeout=-1", "timeout=abc", "after=-1", "after=abc"])
    func badPollParameters(query: String) async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let answer = try await relay.request(
                .GET, created.channel.poll + "?\(query)&token=\(created.channel.token)")
            try expectChannelProblem(answer, status: 400)
        }
    }

    @Test("A bad SSE cursor is 400")
    func badEventsCursor() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let viaQuery = try await relay.request(
                .GET, created.channel.events + "?after=abc&token=\(created.channel.token)")
            try expectChannelProblem(viaQuery, status: 400)
            let viaHeader = try await relay.request(
                .GET, created.channel.events + "?token=\(created.channel.token)", headers: [("Last-Event-ID", "-3")])
            try expectChannelProblem(viaHeader, status: 400)
        }
    }

    // MARK: - WebSocket

    /// Opens a WebSocket and returns what it received and whether the upgrade was refused.
    /// Only for refused upgrades and ended sessions, which the server answers and closes at once.
    private func openWebSocket(_ url: String) async -> (events: [WireEvent], failed: Bool) {
        guard let socket = try? await RawWebSocket.open(url) else { return ([], true) }
        return (socket.events, !socket.upgraded)
    }

    @Test("A WebSocket with a wrong, missing or foreign token is refused before the upgrade")
    func webSocketBadToken() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let other = try await relay.createSession()
            for query in ["?token=wrong-token", "", "?token=\(other.channel.token)"] {
                let (events, failed) = await openWebSocket(created.channel.websocket + query)
                #expect(failed, "the upgrade with \(query.isEmpty ? "no token" : query) was refused")
                #expect(events.isEmpty)
            }
            #expect(try await relay.eventTypes(created.sessionId) == ["waiting"])
        }
    }

    @Test("A WebSocket for an unknown session is refused before the upgrade")
    func webSocketUnknownSession() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let url = created.channel.websocket.replacingOccurrences(of: created.sessionId, with: "ses_doesnotexist")
            let (events, failed) = await openWebSocket(url + "?token=\(created.channel.token)")
            #expect(failed)
            #expect(events.isEmpty)
        }
    }

    @Test("A WebSocket upgrade from a foreign Origin is refused with 403, no 101 and no event")
    func webSocketForeignOrigin() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let port = try #require(URLComponents(string: relay.base)?.port)
            // A raw request: HTTP client libraries do not send upgrade handshakes as they are.
            let answer = try await rawExchange(
                port: port,
                "GET /v1/sessions/\(created.sessionId)/ws?token=\(created.channel.token) HTTP/1.1\r\n"
                    + "Host: 127.0.0.1:\(port)\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                    + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    + "Origin: \(Self.evil)\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 403"), "answered \(answer.prefix(40))")
            #expect(!answer.contains("Sec-WebSocket-Accept"))
            #expect(!answer.contains("waiting"))
        }
    }

    @Test("A plain GET on /ws: 426 with a valid token, and the same checks as the other channels")
    func webSocketWithoutUpgrade() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let path = "/v1/sessions/\(created.sessionId)/ws"
            let valid = try await relay.request(.GET, path + "?token=\(created.channel.token)")
            try expectChannelProblem(valid, status: 426)
            #expect(valid.header("Upgrade")?.lowercased() == "websocket")
            try expectChannelProblem(try await relay.request(.GET, path + "?token=wrong"), status: 404)
            try expectChannelProblem(try await relay.request(.GET, path), status: 401)
            try expectChannelProblem(
                try await relay.request(
                    .GET, path + "?token=\(created.channel.token)", headers: [("Origin", Self.evil)]),
                status: 403)
            try expectChannelProblem(
                try await relay.request(.GET, "/v1/sessions/ses_nope/ws?token=\(created.channel.token)"), status: 404)
        }
    }

    @Test("After refused WebSockets, a valid one still gets every event")
    func webSocketValidAfterRefusals() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            _ = await openWebSocket(created.channel.websocket + "?token=wrong")
            #expect(try await relay.api(.POST, "/v1/sessions/\(created.sessionId)/cancel").status == 200)
            let url = created.channel.websocket + "?token=\(created.channel.token)"
            let (events, failed) = await openWebSocket(url)
            #expect(!failed)
            #expect(events.map(\.type) == ["waiting", "cancelled"])
        }
    }

    /// `DuplicateInputTests.channelQueries` for the WebSocket.
    static let duplicateQueries: [(query: String, name: String)] = [
        ("token=T&token=T", "token"),
        ("token=T&after=0&%61fter=5", "after"),
    ]

    @Test(
        "A WebSocket whose token or after is given twice is 400 and does not open; the refused upgrade's connection closes",
        arguments: duplicateQueries)
    func duplicateParameters(_ channel: (query: String, name: String)) async throws {
        try await TestRelay.run { relay in
            let created = try await relay.createSession()
            let query = channel.query.replacingOccurrences(of: "=T", with: "=" + created.channel.token)
            let path = "/v1/sessions/\(created.sessionId)/ws?\(query)"
            // Read until the relay closes: NIO's decoder reads nothing after an upgrade it did not make.
            let answer = try await relay.rawExchange(
                "GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                    + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            #expect(answer.contains("Connection: close"))
            #expect(answer.hasPrefix("HTTP/1.1 400"), "answered \(answer.prefix(40))")
            #expect(answer.contains("\(channel.name) appears more than once"))
            #expect(!answer.contains("Sec-WebSocket-Accept") && !answer.contains("waiting"))
            // The same channel with the parameter once opens.
            let once = try await relay.request(
                .GET, created.channel.poll + "?to%6Ben=\(created.channel.token)&timeout=0")
            #expect(once.status == 200)
            #expect(try once.json(PollAnswer.self).events.map(\.type) == ["waiting"])
        }
    }
}
