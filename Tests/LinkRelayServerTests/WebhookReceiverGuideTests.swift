import Crypto
import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// docs/webhook-receivers.md shows what the relay sends: each sample body is what a running relay sent
/// for its type (but for ids and times), and its signed example verifies.
@Suite("docs/webhook-receivers.md shows what the relay sends", .timeLimit(.minutes(2)))
struct WebhookReceiverGuideTests {
    static let guide = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appending(path: "docs/webhook-receivers.md")

    static let types = [
        "session.tapped", "session.verified", "session.failed", "session.possession_required", "session.expired",
        "session.cancelled", "session.bound",
    ]

    /// The guide's code blocks of `language`, in order.
    static func blocks(_ language: String) throws -> [String] {
        let markdown = try String(contentsOf: guide, encoding: .utf8)
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// The guide's sample bodies, by type.
    static func samples() throws -> [String: Any] {
        var samples: [String: Any] = [:]
        for block in try blocks("json") {
            guard let body = try JSONSerialization.jsonObject(with: Data(block.utf8)) as? [String: Any],
                let type = body["type"] as? String, body["data"] != nil
            else { continue }
            #expect(samples[type] == nil, "two samples of \(type)")
            samples[type] = body
        }
        return samples
    }

    /// What differs from one run to the next: the ids and the times.
    static func normalized(_ value: Any) -> Any {
        switch value {
        case let object as [String: Any]:
            return Dictionary(
                uniqueKeysWithValues: object.map { key, value in
                    (key, ["sessionId", "clientRequestId", "deviceId"].contains(key) ? "<id>" : normalized(value))
                })
        case let array as [Any]: return array.map(normalized)
        case let text as String:
            if text.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"#, options: .regularExpression) != nil {
                return "<time>"
            }
            return text
        default: return value
        }
    }

    static func pretty(_ value: Any) -> String {
        let data = try? JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data ?? Data(), as: UTF8.self)
    }

    @Test("Each type's sample is the body a running relay sent for it, but for ids and times")
    func samplesAreWhatIsSent() async throws {
        let receiver = WebhookReceiver()
        try await receiver.serve { url in
            let flags = ["webhook-url": [url], "webhook-secret": [WebhookFixtures.secret]]
            try await TestRelay.run(flags: flags) { relay in
                let verified = try await relay.createSession()
                _ = try await relay.tap()
                _ = try await relay.pollUntilDone(verified)
                let declined = try await relay.createSession()
                _ = try await relay.tap(decline: true)
                _ = try await relay.pollUntilDone(declined)
                let cancelled = try await relay.createSession()
                #expect(try await relay.api(.POST, "/v1/sessions/\(cancelled.sessionId)/cancel").status == 200)
                let none = try await relay.api(
                    .POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","possessionType":"none"}"#
                ).json(Created.self)
                _ = try await relay.pollUntilDone(none)
                #expect(try await relay.api(.POST, "/v1/sessions/\(none.sessionId)/bind").status == 200)
                // tapped, verified; tapped, failed; cancelled; possession_required, bound
                await receiver.waitFor(7)
            }
            let clock = ManualClock()
            try await TestRelay.run(clock: clock, flags: flags) { relay in
                let created = try await relay.createSession(extra: ",\"holdSeconds\":60")
                async let done = relay.pollUntilDone(created)
                clock.advance(by: 61)
                _ = try await done
                await receiver.waitFor(8)
            }
        }
        var sent: [String: Any] = [:]
        for request in await receiver.received {
            let body = try request.json()
            let type = try #require(body["type"] as? String)
            if sent[type] == nil { sent[type] = body }
        }
        #expect(Set(sent.keys) == Set(Self.types))
        let samples = try Self.samples()
        #expect(Set(samples.keys) == Set(Self.types), "one sample per type")
        for (type, body) in sent {
            let expected = Self.normalized(body) as? NSDictionary
            let shown = samples[type].map(Self.normalized) as? NSDictionary
            #expect(shown == expected, "docs/webhook-receivers.md's \(type), as sent:\n\(Self.pretty(body))")
        }
    }

    @Test("The signed example's signature is the HMAC of its id, timestamp and body with its secret")
    func signedExample() throws {
        let http = try #require(try Self.blocks("http").first)
        var headers: [String: String] = [:]
        let parts = http.components(separatedBy: "\n\n")
        for line in parts[0].split(separator: "\n").dropFirst() {
            let pair = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            headers[pair[0].lowercased()] = pair[1]
        }
        let body = try #require(parts.dropFirst().first)
        let markdown = try String(contentsOf: Self.guide, encoding: .utf8)
        let secret = try #require(
            markdown.range(of: #"whsec_[A-Za-z0-9+/=]+"#, options: .regularExpression).map { String(markdown[$0]) })
        let settings = try WebhookSettings(url: "https://backend.example/hook", secret: secret)
        let id = try #require(headers["webhook-id"])
        let timestamp = try #require(headers["webhook-timestamp"].flatMap { Int($0) })
        #expect(
            headers["webhook-signature"] == settings.signature(id: id, timestamp: timestamp, body: Array(body.utf8)))
        #expect(headers["content-length"] == String(body.utf8.count))
        #expect(try JSONSerialization.jsonObject(with: Data(body.utf8)) is [String: Any])
    }
}
