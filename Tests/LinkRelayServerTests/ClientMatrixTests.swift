import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// AsyncHTTPClient in the client matrix (Tests/clients, docs/tests.md): the README's walkthrough with
/// the client's natural defaults (`HTTPClient.shared`: redirects followed, a bodiless POST as it sends
/// one), against a relay on a real socket, each step held to the same table as every other client
/// (Tests/clients/expectations.json).
@Suite("Client matrix: AsyncHTTPClient", .timeLimit(.minutes(1)))
struct ClientMatrixTests {
    /// The matrix's one table: step → what every client gets.
    /// Read once, never changed: safe to share across tasks.
    nonisolated(unsafe) static let expected: [String: [String: Any]] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../clients/expectations.json")
        guard let data = try? Data(contentsOf: url),
            let table = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return table.compactMapValues { $0 as? [String: Any] }
    }()

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var url: URL?

        var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
        var text: String { String(decoding: body, as: UTF8.self) }
        var mediaType: String? {
            headers.first(name: "content-type")?.split(separator: ";").first
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        }
    }

    /// One request as an integrator's code writes it: the shared client, its defaults.
    static func send(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], json: String? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return Answer(
            status: Int(response.status.code), headers: response.headers, body: Data(body.readableBytesView),
            url: response.url)
    }

    /// The value at a dotted path of a JSON object.
    static func value(_ body: [String: Any]?, _ path: String) -> Any? {
        var current: Any? = body
        for part in path.split(separator: ".") { current = (current as? [String: Any])?[String(part)] }
        return current
    }

    /// Checks `answer` against the table's entry for `step`: status, media type, code, keys, fields.
    static func expectTable(_ step: String, _ answer: Answer, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let entry = expected[step] else {
            Issue.record("expectations.json has no \(step)", sourceLocation: sourceLocation)
            return
        }
        let body = answer.json
        if let status = entry["status"] as? Int {
            #expect(answer.status == status, "\(step): \(answer.text)", sourceLocation: sourceLocation)
        }
        if let type = entry["type"] as? String {
            #expect(answer.mediaType == type, "\(step)", sourceLocation: sourceLocation)
        }
        if let code = entry["code"] as? String {
            #expect(body?["code"] as? String == code, "\(step): \(answer.text)", sourceLocation: sourceLocation)
        }
        for path in entry["keys"] as? [String] ?? [] {
            #expect(value(body, path) != nil, "\(step): no \(path) in \(answer.text)", sourceLocation: sourceLocation)
        }
        for (path, want) in entry["fields"] as? [String: Any] ?? [:] {
            let got = value(body, path)
            #expect(
                (got as? NSObject)?.isEqual(want) == true, "\(step): \(path) is \(String(describing: got))",
                sourceLocation: sourceLocation)
        }
    }

    /// The answer's header names, but `Date`.
    static func headerNames(_ answer: Answer) -> Set<String> {
        Set(answer.headers.map { $0.name.lowercased() }.filter { $0 != "date" })
    }

    static func events(_ answer: Answer) -> [String] {
        (answer.json?["events"] as? [[String: Any]] ?? []).map { event in
            let name = "\(event["seq"] ?? "?"):\(event["type"] ?? "?")"
            return event["type"] as? String == "result" ? name + ":\(event["outcome"] ?? "?")" : name
        }
    }

    @Test("The README's walkthrough: every step answered as for every other client")
    func walkthrough() async throws {
        #expect(!Self.expected.isEmpty, "Tests/clients/expectations.json is read")
        try await TestRelay.run(socket: true) { relay in
            let api = [("Authorization", "Bearer \(TestRelay.apiKey)")]
            let create = [("Idempotency-Key", "order-ahc-\(UUID().uuidString)")] + api
            let created = try await Self.send(
                .POST, relay.base + "/v1/sessions", headers: create, json: #"{"phoneNumber":"2001004014"}"#)
            Self.expectTable("create", created)
            let session = try #require(created.json)
            let id = try #require(session["sessionId"] as? String)
            let channel = try #require(session["channel"] as? [String: Any])
            let token = try #require(channel["token"] as? String)
            let poll = try #require(channel["poll"] as? String)
            let again = try await Self.send(
                .POST, relay.base + "/v1/sessions", headers: create, json: #"{"phoneNumber":"2001004014"}"#)
            Self.expectTable("create_again", again)
            #expect(again.json?["sessionId"] as? String == id, "the same Idempotency-Key answers the same session")

            // The desktop waits by long-poll; the phone follows the outbox's link through Prove's redirect.
            var seen = Self.events(try await Self.send(.GET, poll + "?after=0&timeout=5&token=\(token)"))
            let outbox = try await Self.send(.GET, relay.base + "/sandbox/outbox?phoneNumber=2001004014")
            Self.expectTable("outbox", outbox)
            let messages = try #require(outbox.json?["messages"] as? [[String: Any]])
            let link = try #require(messages.last?["link"] as? String)
            let landed = try await Self.send(.GET, link)
            Self.expectTable("tap", landed)
            let landing = try #require(landed.url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false) })
            let asc = landing.queryItems?.first { $0.name == "asc" }?.value
            #expect(landing.path.hasPrefix("/l/") && asc == "true", "landed on \(landing)")
            var done = false
            for _ in 0..<10 where !done {
                let answer = try await Self.send(.GET, poll + "?after=\(seen.count)&timeout=25&token=\(token)")
                seen += Self.events(answer)
                done = answer.json?["done"] as? Bool == true
            }
            #expect(seen == Self.expected["wait_poll"]?["events"] as? [String])
            #expect(done)

            Self.expectTable("read", try await Self.send(.GET, relay.base + "/v1/sessions/\(id)", headers: api))
            let finish = relay.base + "/v1/sessions/\(id)/finish"
            Self.expectTable(
                "finish_ended_token",
                try await Self.send(.POST, finish, headers: [("Authorization", "Bearer \(token)")]))
            Self.expectTable("finish_ended_key", try await Self.send(.POST, finish, headers: api))

            // Another session, which waits: finish asks Prove, cancel ends it, a second cancel is refused.
            let other = try await Self.send(
                .POST, relay.base + "/v1/sessions", headers: api, json: #"{"phoneNumber":"2001004014"}"#)
            let otherID = try #require(other.json?["sessionId"] as? String)
            let otherToken = try #require(Self.value(other.json, "channel.token") as? String)
            let base = relay.base + "/v1/sessions/\(otherID)"
            Self.expectTable(
                "finish_waiting_token",
                try await Self.send(.POST, base + "/finish", headers: [("Authorization", "Bearer \(otherToken)")]))
            Self.expectTable("finish_waiting_key", try await Self.send(.POST, base + "/finish", headers: api))
            let wrong = String(repeating: "x", count: token.count)
            Self.expectTable(
                "finish_wrong_token",
                try await Self.send(.POST, base + "/finish", headers: [("Authorization", "Bearer \(wrong)")]))
            Self.expectTable("cancel", try await Self.send(.POST, base + "/cancel", headers: api))
            Self.expectTable("cancel_again", try await Self.send(.POST, base + "/cancel", headers: api))

            // Refusals: a wrong token answers exactly as an id no session has.
            let unknownID = "ses_" + String(repeating: "Q", count: id.count - 4)
            let unknown = try await Self.send(
                .GET, poll.replacingOccurrences(of: id, with: unknownID) + "?token=\(wrong)&timeout=0")
            Self.expectTable("poll_unknown", unknown)
            let refused = try await Self.send(.GET, poll + "?token=\(wrong)&timeout=0")
            Self.expectTable("poll_wrong_token", refused)
            #expect(refused.status == unknown.status && refused.body == unknown.body)
            #expect(Self.headerNames(refused) == Self.headerNames(unknown))
            Self.expectTable("poll_no_token", try await Self.send(.GET, poll + "?timeout=0"))
        }
    }
}
