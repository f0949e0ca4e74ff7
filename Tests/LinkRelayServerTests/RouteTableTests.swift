import Foundation
import LinkRelayCore
import NIOCore
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// The route table, its guards and its error mapping, answered without a socket (`LinkRelay.respond(to:)`).
@Suite("Route table")
struct RouteTableTests {
    static let key = "Bearer \(TestRelay.apiKey)"
    static let page = "https://shop.example"

    /// A path each pattern of the table takes: `{name}` and `**` filled in.
    static func path(_ pattern: PathPattern) -> String {
        pattern.description.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part == "**" ? "outbox" : part.hasPrefix("{") ? "ses_unknown0123456789abcd" : String(part)
        }.joined(separator: "/")
    }

    /// The methods the table's lines take `path` under, HEAD with every GET.
    static func methods(_ routes: Routes, _ path: String) -> Set<String> {
        var methods = Set<String>()
        for route in routes.all where route.pattern.match(path[...]) != nil {
            methods.insert(route.method.rawValue)
            if route.method == .GET { methods.insert("HEAD") }
        }
        return methods
    }

    /// What a caller of `route` sends to get past its guard (a page's origin and an unknown session's
    /// token for a channel: the gate then answers 404).
    static func credentials(_ route: Route) -> HTTPHeaders {
        switch route.guard {
        case .none: [:]
        case .apiKey, .apiKeyOrChannelToken: ["Authorization": key]
        case .channelToken: ["Authorization": "Bearer some-channel-token"]
        case .opsBasic:
            ["Authorization": "Basic " + Data("ops:\(TestRelay.apiKey)".utf8).base64EncodedString()]
        }
    }

    static func relay(_ flags: [String: [String]] = [:]) async throws -> LinkRelay {
        try await TestRelay.unstarted(flags: flags.merging(["allowed-origin": [page]]) { $1 })
    }

    @Test(
        "A known path under any other method is 405 with Allow, as its audience reads errors", arguments: [false, true])
    func wrongMethod(confirmOnPhone: Bool) async throws {
        let relay = try await Self.relay(confirmOnPhone ? ["confirm-on-phone": ["on"]] : [:])
        let routes = relay.frontDoor.routes
        var checked = 0
        for route in routes.all {
            let path = Self.path(route.pattern)
            let allowed = Self.methods(routes, path)
            for method in [HTTPMethod.GET, .HEAD, .POST, .PUT, .DELETE, .PATCH, .OPTIONS]
            where !allowed.contains(method.rawValue) {
                let answer = try #require(await relay.respond(to: RelayRequest(method, path)))
                #expect(answer.status == .methodNotAllowed, "\(method) \(path)")
                let allow = try #require(answer.headers.first(name: "Allow"), "\(method) \(path)")
                #expect(Set(allow.components(separatedBy: ", ")) == allowed, "\(path)")
                let type = answer.headers.first(name: "Content-Type") ?? ""
                switch route.audience {
                case .api:
                    #expect(type == "application/problem+json", "\(method) \(path)")
                    if method != .HEAD { #expect(String(buffer: answer.body).contains("\"status\":405")) }
                case .person: #expect(type.hasPrefix("text/html"), "\(method) \(path)")
                }
                checked += 1
            }
        }
        #expect(checked > 50)
        // The landing takes POST only when taps are confirmed on the phone.
        let landing = try #require(await relay.respond(to: RelayRequest(.POST, "/l/abc", body: "choice=confirm")))
        if confirmOnPhone {
            #expect(landing.status != .methodNotAllowed)
        } else {
            #expect(landing.status == .methodNotAllowed)
            #expect(landing.headers.first(name: "Allow") == "GET, HEAD")
        }
        // A path no line knows stays 404.
        #expect(await relay.respond(to: RelayRequest(.DELETE, "/v1/nothing"))?.status == .notFound)
    }

    @Test("Every GET route answers HEAD: the GET's status and headers, no body")
    func headEverywhere() async throws {
        let relay = try await Self.relay()
        var checked: [String] = []
        // The embedded sandbox's own routes are the simulator's to answer.
        for route in relay.frontDoor.routes.all where route.method == .GET && route.pattern.description != "/sandbox/**"
        {
            let path = Self.path(route.pattern)
            let headers = Self.credentials(route)
            let get = try #require(await relay.respond(to: RelayRequest(.GET, path, headers: headers)), "GET \(path)")
            let head = try #require(
                await relay.respond(to: RelayRequest(.HEAD, path, headers: headers)), "HEAD \(path)")
            #expect(head.status == get.status, "\(path)")
            #expect(head.body.readableBytes == 0, "\(path)")
            #expect(head.headers.first(name: "Content-Length") == String(get.body.readableBytes), "\(path)")
            var expected = get.headers
            expected.replaceOrAdd(name: "Content-Length", value: String(get.body.readableBytes))
            #expect(
                head.headers.map { "\($0.name): \($0.value)" }.sorted()
                    == expected.map { "\($0.name): \($0.value)" }.sorted(), "\(path)")
            checked.append(path)
        }
        #expect(
            checked.contains("/l/ses_unknown0123456789abcd")
                && checked.contains("/v1/sessions/ses_unknown0123456789abcd"))
        #expect(checked.contains("/openapi.json") && checked.contains("/ops") && checked.contains("/metrics"))
        // A channel's HEAD passes the channel's checks and opens nothing: the head the stream starts with.
        let created = try await Self.create(relay)
        let events = RelayRequest(
            .HEAD, "/v1/sessions/\(created.sessionId)/events?token=\(created.channel.token)",
            headers: ["Origin": Self.page])
        let answer = try #require(await relay.respond(to: events))
        #expect(answer.status == .ok)
        #expect(answer.headers.first(name: "Content-Type") == "text/event-stream")
        #expect(answer.headers.first(name: "Access-Control-Allow-Origin") == Self.page)
        #expect(answer.body.readableBytes == 0)
    }

    static func create(_ relay: LinkRelay) async throws -> Created {
        let answer = try #require(
            await relay.respond(
                to: RelayRequest(
                    .POST, "/v1/sessions", headers: ["Authorization": key, "Content-Type": "application/json"],
                    body: #"{"phoneNumber":"2001004014"}"#)))
        #expect(answer.status == .created, "\(String(buffer: answer.body))")
        return try JSONDecoder().decode(Created.self, from: Data(answer.body.readableBytesView))
    }

    @Test("The API key's guard refuses every route it guards without a configured key: 401 problem+json")
    func apiKeyGuard() async throws {
        let relay = try await Self.relay()
        let guarded = relay.frontDoor.routes.all.filter { $0.guard == .apiKey }
        #expect(guarded.count == 8)
        for route in guarded {
            let path = Self.path(route.pattern)
            for headers: HTTPHeaders in [[:], ["Authorization": "Bearer not-a-key"], ["Authorization": "Basic eDp5"]] {
                let answer = try #require(await relay.respond(to: RelayRequest(route.method, path, headers: headers)))
                #expect(answer.status == .unauthorized, "\(route.method) \(path)")
                #expect(answer.headers.first(name: "WWW-Authenticate") == "Bearer")
                #expect(answer.headers.first(name: "Content-Type") == "application/problem+json")
            }
        }
        // With the key, the handler has the caller's tenant: an unknown session is its 404.
        let show = RelayRequest(.GET, "/v1/sessions/ses_unknown0123456789abcd", headers: ["Authorization": Self.key])
        #expect(await relay.respond(to: show)?.status == .notFound)
    }

    @Test("admit works on the head alone: it refuses, or stores what the guard established, before any body")
    func admitOnTheHead() async throws {
        let relay = try await TestRelay.unstarted(flags: [
            "api-key": [TestRelay.apiKey, "acme:acme-key-0123456789abcdef"]
        ])
        let routes = relay.frontDoor.routes
        let (show, _) = try #require(routes.match(.GET, "/v1/sessions/ses_x"))
        // No body yet: as the front door holds a request whose head has just been read.
        var bare = RelayRequest(.GET, "/v1/sessions/ses_x")
        bare.body = nil
        #expect(show.admit(&bare)?.status == .unauthorized)
        #expect(bare.credential == .none)
        var acme = RelayRequest(
            .GET, "/v1/sessions/ses_x", headers: ["Authorization": "Bearer acme-key-0123456789abcdef"])
        acme.body = nil
        #expect(show.admit(&acme) == nil)
        #expect(
            acme.credential
                == .apiKey(APIKeys.Caller(tenant: "acme", keyID: APIKeys.keyID("acme-key-0123456789abcdef"))))
        let (events, _) = try #require(routes.match(.GET, "/v1/sessions/ses_x/events"))
        var channel = RelayRequest(.GET, "/v1/sessions/ses_x/events?token=tok")
        #expect(events.admit(&channel) == nil)
        #expect(channel.credential == .channelToken("tok"))
        let (create, _) = try #require(routes.match(.POST, "/v1/sessions"))
        var form = RelayRequest(
            .POST, "/v1/sessions",
            headers: ["Authorization": Self.key, "Content-Type": "multipart/form-data", "Content-Length": "2"])
        form.body = nil
        #expect(create.admit(&form)?.status == .unsupportedMediaType)
        // A landing has neither a guard nor a type: nothing to check.
        let (landing, parameters) = try #require(routes.match(.HEAD, "/l/abc"))
        var visit = RelayRequest(.HEAD, "/l/abc")
        #expect(landing.method == .GET && parameters["key"] == "abc")
        #expect(landing.admit(&visit) == nil)
    }

    @Test(
        "The channel token's guard: a foreign origin 403 readable by any page, no token 401, a wrong one the unknown id's 404"
    )
    func channelTokenGuard() async throws {
        let relay = try await Self.relay()
        let created = try await Self.create(relay)
        let id = created.sessionId
        for transport in ["events", "poll", "ws"] {
            let foreign = RelayRequest(
                .GET, "/v1/sessions/\(id)/\(transport)?token=\(created.channel.token)",
                headers: ["Origin": "https://evil.example"])
            let refused = try #require(await relay.respond(to: foreign))
            #expect(refused.status == .forbidden, "\(transport)")
            #expect(refused.headers.first(name: "Access-Control-Allow-Origin") == "*")
            // No token at all is refused before any lookup; a wrong one is answered as an unknown id.
            let tokenless = try #require(
                await relay.respond(
                    to: RelayRequest(
                        .GET, "/v1/sessions/ses_unknown0123456789abcd/\(transport)", headers: ["Origin": Self.page])))
            #expect(tokenless.status == .unauthorized, "\(transport)")
            #expect(String(buffer: tokenless.body).contains(#""code":"channel_token_required""#))
            #expect(tokenless.headers.first(name: "Access-Control-Allow-Origin") == Self.page)
            let unknown = try #require(
                await relay.respond(
                    to: RelayRequest(
                        .GET, "/v1/sessions/ses_unknown0123456789abcd/\(transport)?token=wrong",
                        headers: ["Origin": Self.page])))
            let wrong = try #require(
                await relay.respond(
                    to: RelayRequest(
                        .GET, "/v1/sessions/\(id)/\(transport)?token=wrong", headers: ["Origin": Self.page])))
            #expect(unknown.status == .notFound && wrong.status == .notFound, "\(transport)")
            #expect(wrong.headers == unknown.headers && wrong.body == unknown.body, "\(transport)")
        }
        // The right token: the channel would open (nil: none opens without a socket).
        let poll = RelayRequest(.GET, "/v1/sessions/\(id)/poll?token=\(created.channel.token)&timeout=0")
        #expect(await relay.respond(to: poll) == nil)
    }

    @Test("The finish hook's guard: an API key or a channel token, from an origin some tenant allows")
    func finishGuard() async throws {
        let relay = try await Self.relay()
        let created = try await Self.create(relay)
        let path = "/v1/sessions/\(created.sessionId)/finish"
        let none = try #require(await relay.respond(to: RelayRequest(.POST, path, headers: ["Origin": Self.page])))
        #expect(none.status == .unauthorized)
        #expect(String(buffer: none.body).contains("The API key or the channel token is required."))
        #expect(none.headers.first(name: "Access-Control-Allow-Origin") == Self.page, "readable by the page")
        let foreign = try #require(
            await relay.respond(
                to: RelayRequest(
                    .POST, path + "?token=\(created.channel.token)", headers: ["Origin": "https://evil.example"])))
        #expect(foreign.status == .forbidden)
        #expect(foreign.headers.first(name: "Access-Control-Allow-Origin") == "*")
        let wrong = try #require(
            await relay.respond(to: RelayRequest(.POST, path + "?token=wrong", headers: ["Origin": Self.page])))
        #expect(wrong.status == .notFound, "as an unknown session")
        #expect(wrong.headers.first(name: "Access-Control-Allow-Origin") == Self.page)
        let token = RelayRequest(.POST, path + "?token=\(created.channel.token)", headers: ["Origin": Self.page])
        #expect(await relay.respond(to: token)?.status == .accepted)
        #expect(
            await relay.respond(to: RelayRequest(.POST, path, headers: ["Authorization": Self.key]))?.status
                == .accepted)
    }

    @Test("The ops guard: a sign-in page without a default tenant's key, 429 past the client's limit")
    func opsGuard() async throws {
        let relay = try await TestRelay.unstarted(flags: [
            "api-key": [TestRelay.apiKey, "acme:acme-key-0123456789abcdef"]
        ])
        func basic(_ password: String) -> HTTPHeaders {
            ["Authorization": "Basic " + Data("ops:\(password)".utf8).base64EncodedString()]
        }
        for headers in [[:], basic("wrong"), basic("acme-key-0123456789abcdef"), ["Authorization": Self.key]] {
            let answer = try #require(await relay.respond(to: RelayRequest(.GET, "/ops", headers: headers)))
            #expect(answer.status == .unauthorized)
            #expect(answer.headers.first(name: "WWW-Authenticate")?.hasPrefix("Basic realm=") == true)
            #expect(answer.headers.first(name: "Content-Type")?.hasPrefix("text/html") == true)
        }
        #expect(await relay.respond(to: RelayRequest(.GET, "/ops", headers: basic(TestRelay.apiKey)))?.status == .ok)
        // Wrong passwords spend the client's ops limit too: then even the right one waits.
        for _ in 0..<RequestLimits.opsPerIP {
            _ = await relay.respond(to: RelayRequest(.GET, "/ops", headers: basic("x")))
        }
        let busy = try #require(await relay.respond(to: RelayRequest(.GET, "/ops", headers: basic(TestRelay.apiKey))))
        #expect(busy.status == .tooManyRequests)
        #expect(busy.headers.first(name: "Content-Type")?.hasPrefix("text/html") == true)
    }

    @Test("A body type the route does not read, or a body with no type, is 415 after the guard; JSON is read")
    func contentTypes() async throws {
        let relay = try await Self.relay()
        let body = #"{"phoneNumber":"2001004014"}"#
        let plain = RelayRequest(
            .POST, "/v1/sessions", headers: ["Authorization": Self.key, "Content-Type": "text/plain"], body: body)
        let refused = try #require(await relay.respond(to: plain))
        #expect(refused.status == .unsupportedMediaType)
        #expect(refused.headers.first(name: "Content-Type") == "application/problem+json")
        #expect(String(buffer: refused.body).contains("application/json"))
        // Every route that reads JSON says so, past its guard.
        let reading = relay.frontDoor.routes.all.filter { !$0.accepts.isEmpty }
        #expect(
            reading.map(\.pattern.description).sorted() == [
                "/v1/sessions", "/v1/sessions/{id}/bind", "/v1/sessions/{id}/challenge", "/v1/sessions/{id}/complete",
                "/v1/sessions/{id}/finish",
            ])
        for route in reading {
            var headers = Self.credentials(route)
            headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            let answer = await relay.respond(
                to: RelayRequest(route.method, Self.path(route.pattern), headers: headers, body: "{}"))
            #expect(answer?.status == .unsupportedMediaType, "\(route.pattern)")
        }
        let anonymous = RelayRequest(.POST, "/v1/sessions", headers: ["Content-Type": "text/plain"], body: body)
        #expect(await relay.respond(to: anonymous)?.status == .unauthorized)
        for type in ["application/json; charset=utf-8", "Application/JSON"] {
            let headers: HTTPHeaders = ["Authorization": Self.key, "Content-Type": type]
            let answer = await relay.respond(to: RelayRequest(.POST, "/v1/sessions", headers: headers, body: body))
            #expect(answer?.status == .created, "\(type)")
        }
        // One rule for every JSON route: a body without a type is not taken for JSON; no body needs none.
        for route in reading {
            let untyped = RelayRequest(
                route.method, Self.path(route.pattern), headers: Self.credentials(route), body: "{}")
            let answer = try #require(await relay.respond(to: untyped))
            #expect(answer.status == .unsupportedMediaType, "\(route.pattern)")
            #expect(String(buffer: answer.body).contains(#""code":"unsupported_media_type""#), "\(route.pattern)")
        }
        let bodiless = RelayRequest(
            .POST, "/v1/sessions/ses_unknown0123456789abcd/bind", headers: ["Authorization": Self.key])
        #expect(await relay.respond(to: bodiless)?.status == .notFound, "read, and answered for the unknown session")
        // An empty body is no body whatever type it names: aiohttp names application/octet-stream.
        for route in reading {
            var headers = Self.credentials(route)
            headers.add(contentsOf: [("Content-Type", "application/octet-stream"), ("Content-Length", "0")])
            let answer = try #require(
                await relay.respond(to: RelayRequest(route.method, Self.path(route.pattern), headers: headers)))
            #expect(answer.status != .unsupportedMediaType, "\(route.pattern)")
        }
    }

    @Test("The printed table has every method and path with its guard and body limit, HEAD after GET")
    func printed() async throws {
        let relay = try await Self.relay()
        let lines = relay.routeTable.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(lines.first == ["METHOD", "PATH", "GUARD", "BODY", "ACCEPTS", "CORS"])
        let rows = lines.dropFirst()
        #expect(
            rows.count == relay.frontDoor.routes.all.count
                + relay.frontDoor.routes.all.filter { $0.method == .GET }.count)
        #expect(rows.contains(["GET", "/l/{key}", "none", "none", "-", "-"]))
        #expect(rows.contains(["HEAD", "/l/{key}", "none", "none", "-", "-"]))
        #expect(rows.contains(["POST", "/v1/sessions", "api-key", "4096", "application/json", "-"]))
        #expect(rows.contains(["GET", "/v1/sessions/{id}/events", "channel-token", "none", "-", "tenant-origins"]))
        #expect(
            rows.contains([
                "POST", "/v1/sessions/{id}/finish", "api-key|channel-token", "2048", "application/json",
                "tenant-origins",
            ]))
        #expect(rows.contains(["GET", "/ops", "ops-basic", "none", "-", "-"]))
        #expect(!rows.contains { $0.first == "POST" && $0.dropFirst().first == "/l/{key}" })
    }

    @Test("linkrelay routes prints the table serve would serve with the same flags")
    func command() async throws {
        func run(_ arguments: [String]) async throws -> (Int32?, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("linkrelay")
            process.arguments = ["routes"] + arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return (await PersistenceTests.Child.exited(process), text)
        }
        let (status, text) = try await run([])
        #expect(status == 0)
        #expect(text == (try await TestRelay.unstarted().routeTable))
        let (_, confirming) = try await run(["--confirm-on-phone", "--prove", "uat"])
        #expect(confirming.contains("POST  ") && confirming.contains("/l/{key}"))
        #expect(confirming.split(separator: "\n").contains { $0.hasPrefix("POST") && $0.contains("/l/{key}") })
        #expect(!confirming.contains("/sandbox/"), "no sandbox with a remote Prove")
        // The operators' own listener: its table after the public one's, which no longer has /metrics.
        let (_, split) = try await run(["--metrics-listen", "127.0.0.1:9464"])
        let parts = split.components(separatedBy: "\n--metrics-listen 127.0.0.1:9464\n")
        #expect(parts.count == 2)
        #expect(!parts[0].contains("/metrics"))
        #expect(
            parts.last?.split(separator: "\n").dropFirst().map {
                $0.split(separator: " ").prefix(2).joined(separator: " ")
            } == [
                "GET /metrics", "HEAD /metrics", "GET /healthz", "HEAD /healthz", "GET /readyz", "HEAD /readyz",
            ])
    }
}
