import Foundation
import LinkRelayTestSupport
import NIOHTTP1
import Testing

@testable import LinkRelayServer

@Suite("GET /v1/client.js", .timeLimit(.minutes(1)))
struct ClientScriptTests {
    @Test("The browser client is JavaScript with a strong ETag, revalidated on every load")
    func served() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, "/v1/client.js")
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "text/javascript; charset=utf-8")
            #expect(answer.header("Cache-Control") == "no-cache")
            #expect(answer.header("X-Content-Type-Options") == "nosniff")
            let etag = try #require(answer.header("ETag"))
            #expect(etag.wholeMatch(of: /"[0-9a-f]{32}"/) != nil, "a strong ETag: \(etag)")
            #expect(answer.body.contains("LinkRelay.wait") && answer.body.contains("function finish"))
            let onDisk = try String(contentsOfFile: try Pages.locateTemplates() + "/client.js", encoding: .utf8)
            #expect(answer.body == onDisk)
            #expect(!answer.body.contains("http://") && !answer.body.contains("https://"), "no third-party code")

            let again = try await relay.request(.GET, "/v1/client.js")
            #expect(again.header("ETag") == etag, "the ETag is the bytes', not the request's")
        }
    }

    @Test(
        "If-None-Match naming the current ETag (also weakly, in a list, or *) answers 304 without a body",
        arguments: ["{etag}", "W/{etag}", "\"older\", {etag}", "*"])
    func notModified(condition: String) async throws {
        try await TestRelay.run { relay in
            let etag = try #require(try await relay.request(.GET, "/v1/client.js").header("ETag"))
            let answer = try await relay.request(
                .GET, "/v1/client.js",
                headers: [("If-None-Match", condition.replacingOccurrences(of: "{etag}", with: etag))])
            #expect(answer.status == 304)
            #expect(answer.body.isEmpty)
            #expect(answer.header("ETag") == etag)
            #expect(answer.header("Cache-Control") == "no-cache")
        }
    }

    @Test("If-None-Match with another ETag answers the script whole")
    func modified() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, "/v1/client.js", headers: [("If-None-Match", "\"older\"")])
            #expect(answer.status == 200)
            #expect(answer.body.contains("LinkRelay"))
        }
    }

    @Test("HEAD answers the GET's head without the body")
    func head() async throws {
        try await TestRelay.run { relay in
            let get = try await relay.request(.GET, "/v1/client.js")
            let head = try await relay.request(.HEAD, "/v1/client.js")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(head.header("ETag") == get.header("ETag"))
            #expect(head.header("Content-Length") == String(get.body.utf8.count))
        }
    }

    @Test("A --templates directory without client.js stops the start with one line naming the file")
    func missingFromTemplates() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("templates-\(UUID())").path
        try FileManager.default.copyItem(atPath: try Pages.locateTemplates(), toPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.removeItem(atPath: directory + "/client.js")
        await #expect(
            throws: ConfigurationError(
                "\(directory)/client.js cannot be read; --templates needs every file of templates/")
        ) {
            _ = try await Pages.load(directory: directory, sandbox: true)
        }
    }

    @Test("The client is served when Prove is real too, not only with the sandbox")
    func withoutSandbox() async throws {
        let configuration = try RelayConfiguration.resolve(
            flags: ["port": ["8080"], "store": ["memory"], "api-key": [TestRelay.apiKey], "prove": ["uat"]],
            environment: ["PROVE_CLIENT_ID": "client-id", "PROVE_CLIENT_SECRET": "client-secret"])
        let relay = try await buildLinkRelay(configuration, logger: quietLogger(), clock: ManualClock())
        #expect(relay.sandbox == nil)
        let answer = try #require(await relay.respond(to: RelayRequest(.GET, "/v1/client.js")))
        #expect(answer.status == .ok)
        #expect(answer.headers.first(name: "ETag")?.hasPrefix("\"") == true)
        #expect(String(buffer: answer.body).contains("LinkRelay.wait"))
    }
}
