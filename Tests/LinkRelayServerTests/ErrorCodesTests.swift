import Foundation
import NIOHTTP1
import ProveAPI
import Testing

@testable import LinkRelayServer

/// Every problem+json answer names its kind (`code`) and links to what to do about it (`type`, an anchor
/// of `GET /errors`). API.md v1.2 "Results say what they mean".
@Suite("Error codes and the errors page", .timeLimit(.minutes(1)))
struct ErrorCodesTests {
    @Test("GET /errors lists every code with its status and what to do, each under its own anchor; HEAD too")
    func page() async throws {
        try await TestRelay.run { relay in
            let page = try await relay.request(.GET, "/errors")
            #expect(page.status == 200)
            #expect(page.header("Content-Type") == "text/html; charset=utf-8")
            #expect(page.body.contains(#"<link rel="stylesheet" href="/assets/relay.css">"#))
            for code in ErrorCode.allCases {
                let entry = try #require(
                    page.body.firstRange(of: #"<dt id="\#(code.rawValue)">"#), "\(code.rawValue) is on the page")
                let rest = page.body[entry.upperBound...]
                let end = try #require(rest.firstRange(of: "</dd>"))
                let text = rest[..<end.lowerBound]
                #expect(text.contains("\(code.status.code) \(code.status.reasonPhrase)"), "\(code.rawValue)")
                #expect(text.contains("<dd>"), "\(code.rawValue) says what to do")
            }
            #expect(Set(ErrorCode.allCases.map(\.rawValue)).count == ErrorCode.allCases.count)
            #expect(ErrorCode.allCases.allSatisfy { $0.rawValue.allSatisfy { $0.isLowercase || $0 == "_" } })
            let head = try await relay.request(.HEAD, "/errors")
            #expect(head.status == 200 && head.body.isEmpty)
            #expect(head.header("Content-Length") == String(page.body.utf8.count))
        }
    }

    @Test("A problem's type is {public-url}/errors#{code}, and that anchor is on the page it names")
    func typeLandsOnTheEntry() async throws {
        try await TestRelay.run(socket: true) { relay in
            let publicURL = relay.relay.configuration.publicURL
            let created = try await relay.createSession()
            let answers = [
                (try await relay.request(.GET, "/v1/sessions/\(created.sessionId)"), "unauthorized"),
                (try await relay.api(.GET, "/v1/sessions/ses_unknown0123456789abcd"), "session_not_found"),
                (
                    try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","x":1}"#),
                    "malformed_request"
                ),
                (
                    try await relay.api(.POST, "/v1/sessions", body: #"{"phoneNumber":"2001004014","holdSeconds":-1}"#),
                    "invalid_request"
                ),
                (try await relay.api(.DELETE, "/v1/sessions"), "method_not_allowed"),
            ]
            for (answer, code) in answers {
                #expect(answer.header("Content-Type") == "application/problem+json")
                let problem = try answer.problem()
                #expect(problem.code == code, "\(answer.body)")
                #expect(problem.status == answer.status)
                #expect(problem.type == publicURL + "/errors#" + code)
                // The page the type names, fetched as a developer's browser would follow it.
                let url = try #require(URL(string: problem.type))
                let page = try await TestRelay.fetch(.GET, publicURL + url.path)
                #expect(page.status == 200)
                #expect(page.body.contains(#"id="\#(try #require(url.fragment))""#))
            }
        }
    }

    @Test(
        "A JSON route's body with no Content-Type is 415 on every route; a bodiless POST is read, whatever type it names"
    )
    func oneContentTypeRule() async throws {
        try await TestRelay.run(socket: true) { relay in
            let created = try await relay.createSession()
            let key = [("Authorization", "Bearer \(TestRelay.apiKey)")]
            let person = #"{"individual":{"firstName":"Marcia","lastName":"Longo"}}"#
            for (path, body) in [
                ("/v1/sessions", #"{"phoneNumber":"2001004014"}"#),
                ("/v1/sessions/\(created.sessionId)/complete", person),
                ("/v1/sessions/\(created.sessionId)/challenge", #"{"ssn":"6227"}"#),
                ("/v1/sessions/\(created.sessionId)/bind", #"{"phoneNumber":"2001004014"}"#),
                ("/v1/sessions/\(created.sessionId)/finish", "{}"),
            ] {
                let untyped = try await relay.request(.POST, path, headers: key, body: body)
                #expect(untyped.status == 415, "\(path): \(untyped.body)")
                #expect(try untyped.problem().code == "unsupported_media_type", "\(path)")
                // What `curl -d` sends by default is no JSON either.
                let form = try await relay.request(
                    .POST, path, headers: key + [("Content-Type", "application/x-www-form-urlencoded")], body: body)
                #expect(form.status == 415, "\(path)")
            }
            #expect(try await relay.session(created.sessionId).state == "waiting", "nothing changed")
            // What aiohttp sends for a bodiless POST: an empty body that names application/octet-stream.
            let aiohttp = [("Content-Type", "application/octet-stream"), ("Content-Length", "0")]
            let cancel = try await relay.request(
                .POST, "/v1/sessions/\(created.sessionId)/cancel", headers: key + aiohttp)
            #expect(cancel.status == 200)
            let finish = try await relay.request(
                .POST, "/v1/sessions/\(created.sessionId)/finish",
                headers: [("Authorization", "Bearer \(created.channel.token)")] + aiohttp)
            #expect(finish.status == 200, "the finish hook of an ended session: \(finish.body)")
        }
    }

    @Test("openapi.json lists the same codes, and each of its example problems is as the relay writes one")
    func described() async throws {
        try await TestRelay.run { relay in
            let document = try APIDescriptionTests.json(Array(try await relay.request(.GET, "/openapi.json").body.utf8))
            let schemas = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])
            let codes = try #require((schemas["ErrorCode"] as? [String: Any])?["enum"] as? [String])
            #expect(codes == ErrorCode.allCases.map(\.rawValue))
            // Every object with a `type` and a `code` is an example problem, wherever it sits.
            var examples: [[String: Any]] = []
            func collect(_ value: Any) {
                if let object = value as? [String: Any] {
                    if object["code"] is String, object["type"] is String { examples.append(object) }
                    object.values.forEach(collect)
                } else if let array = value as? [Any] {
                    array.forEach(collect)
                }
            }
            collect(document["paths"] as Any)
            collect(document["components"] as Any)
            #expect(examples.count >= 25)
            for example in examples {
                let code = try #require(ErrorCode(rawValue: example["code"] as? String ?? ""), "\(example)")
                #expect(example["type"] as? String == "http://127.0.0.1:8080/errors#" + code.rawValue)
                #expect(example["title"] as? String == code.title, "\(code)")
                #expect(example["status"] as? Int == Int(code.status.code), "\(code)")
            }
        }
    }

    @Test("Prove's refusals: the caller's 422, a step out of order 409, credentials the operator's, the rest 502")
    func proveRefusals() throws {
        func problem(_ status: Int, _ code: Int?, _ message: String) -> Problem {
            ErrorMapping.problem(
                ProveClientError.rejected(status: status, body: ProveErrorBody(code: code, message: message)))
        }
        // As the sandbox and Prove answer them (ProveSandbox, reference/prove-api.md "API error codes").
        let unknown = problem(400, 8007, "no test user found matching the phone number")
        #expect(unknown.code == .phoneNumberNotSupported && unknown.status == .unprocessableEntity)
        #expect(unknown.detail.contains("code 8007"))
        let invalidPhone = problem(400, 8001, "phoneNumber is invalid")
        #expect(invalidPhone.code == .phoneNumberNotSupported)
        let field = problem(400, 8001, "ssn is invalid")
        #expect(field.code == .rejectedByProve && field.status == .unprocessableEntity)
        #expect(field.detail == "Prove answered 400 (code 8001): ssn is invalid")
        let outOfOrder = problem(403, 8003, "step called out of order")
        #expect(outOfOrder.code == .stepOutOfOrder && outOfOrder.status == .conflict)
        #expect(outOfOrder.detail.contains("code 8003"))
        #expect(problem(403, 1003, "step not allowed").code == .stepOutOfOrder)
        let otherProduct = problem(403, 8009, "test user access denied")
        #expect(otherProduct.code == .proveCredentials && otherProduct.status == .badGateway)
        #expect(otherProduct.detail.contains("another Prove product") && otherProduct.detail.contains("operator"))
        let credentials = problem(401, 8002, "not authorized")
        #expect(credentials.code == .proveCredentials && credentials.detail.contains("operator"))
        #expect(problem(403, nil, "forbidden").code == .proveCredentials)
        // Prove's own failures stay 502.
        #expect(problem(400, 8000, "internal error").code == .proveFailed)
        #expect(problem(400, 8008, "invalid correlation ID").code == .proveFailed)
        #expect(problem(404, 8011, "Identity Not Found").status == .badGateway)
        let outage = ErrorMapping.problem(ProveClientError.unavailable(reason: "timeout"))
        #expect(outage.code == .proveUnavailable && outage.headers.first(name: "Retry-After") == "5")
    }
}
