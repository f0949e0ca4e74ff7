import Foundation
import NIOHTTP1
import Testing

@testable import LinkRelayServer

/// `GET /openapi.json` (API.md v1.1): the committed document, served with this relay's public URL, and
/// in step with the route table, so that a route added without a description fails here.
@Suite("API description")
struct APIDescriptionTests {
    /// Routes that are no part of the contract: the demo and the embedded sandbox (`--prove sandbox`
    /// only, standing in for Prove and a phone, its API at the root included: `/token`, `/v3/…`) and the
    /// pages' assets, their icon included.
    static func isOutsideContract(_ path: String) -> Bool {
        path == "/" || path.hasPrefix("/demo") || path.hasPrefix("/sandbox/") || path.hasPrefix("/assets/")
            || path == "/favicon.ico" || path == "/token" || path.hasPrefix("/v3/")
    }

    static let methods = ["get", "head", "post", "put", "delete", "options", "patch"]

    /// `METHOD /path` of every operation the document describes.
    static func operations(_ document: [String: Any]) throws -> Set<String> {
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        return Set(
            paths.flatMap { path, item in
                item.keys.filter(methods.contains).map { "\($0.uppercased()) \(path)" }
            })
    }

    static func json(_ text: some DataProtocol) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text)) as? [String: Any])
    }

    @Test("Served as OpenAPI 3.1 JSON with this relay's public URL, an ETag, and 304 for a current copy")
    func served() async throws {
        try await TestRelay.run { relay in
            let answer = try await relay.request(.GET, "/openapi.json")
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "application/json")
            let document = try Self.json(Data(answer.body.utf8))
            #expect((document["openapi"] as? String)?.hasPrefix("3.1.") == true)
            let servers = try #require(document["servers"] as? [[String: Any]])
            #expect(servers.map { $0["url"] as? String } == [relay.relay.configuration.publicURL])

            // The committed file, but for its server.
            var committed = try Self.json(
                try Data(contentsOf: URL(fileURLWithPath: try Pages.locateTemplates() + "/openapi.json")))
            var served = document
            committed["servers"] = nil
            served["servers"] = nil
            #expect(NSDictionary(dictionary: committed).isEqual(to: served))

            let etag = try #require(answer.header("ETag"))
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count > 2)
            for current in [etag, "W/" + etag, "\"other\", " + etag, "*"] {
                let again = try await relay.request(.GET, "/openapi.json", headers: [("If-None-Match", current)])
                #expect(again.status == 304, "If-None-Match: \(current)")
                #expect(again.body.isEmpty)
                #expect(again.header("ETag") == etag)
            }
            let stale = try await relay.request(.GET, "/openapi.json", headers: [("If-None-Match", "\"other\"")])
            #expect(stale.status == 200)
            #expect(stale.body == answer.body)
        }
    }

    @Test("Every route of the table is described, and every described route is served", arguments: [false, true])
    func everyRoute(sandbox: Bool) async throws {
        // Without the sandbox, Prove is remote: the relay is built (not started), so nothing calls it. Taps
        // confirmed on the phone: the landing's POST is a line of the table only then (else 405).
        var flags: [String: [String]] = sandbox ? [:] : ["prove": ["uat"]]
        flags["confirm-on-phone"] = ["on"]
        let environment = sandbox ? [:] : ["PROVE_CLIENT_ID": "id", "PROVE_CLIENT_SECRET": "secret"]
        let relay = try await TestRelay.unstarted(flags: flags, environment: environment)
        // Every GET line answers HEAD too (the table derives it); the document describes the HEADs that
        // clients send on purpose (a scanner's landing, health checks, the client's revalidation).
        let lines = relay.frontDoor.routes.all.filter { !Self.isOutsideContract($0.pattern.description) }
        let routes = Set(lines.map { "\($0.method.rawValue) \($0.pattern.description)" })
        let heads = Set(lines.filter { $0.method == .GET }.map { "HEAD \($0.pattern.description)" })
        let document = try Self.json(
            try Data(contentsOf: URL(fileURLWithPath: try Pages.locateTemplates() + "/openapi.json")))
        let described = try Self.operations(document)
        #expect(routes.subtracting(described).isEmpty, "routes without a description")
        #expect(described.subtracting(routes).subtracting(heads).isEmpty, "described, not served")
        #expect(described.filter { $0.hasPrefix("HEAD ") }.count == 4)
        #expect(!routes.isEmpty && routes.contains("POST /v1/sessions") && routes.contains("GET /openapi.json"))
    }

    @Test("A document that is not OpenAPI 3.1 stops the start")
    func refused() throws {
        for source in ["[]", "{\"openapi\":\"3.0.3\",\"paths\":{}}", "not json"] {
            #expect(throws: ConfigurationError.self) {
                try APIDescription.document(Data(source.utf8), publicURL: "http://127.0.0.1:8080")
            }
        }
    }
}
