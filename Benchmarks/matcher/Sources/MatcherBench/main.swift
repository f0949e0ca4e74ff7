// Times one route lookup, as the front door does it per request, with the relay's hand-made matcher
// (`PathPattern`, a first-match scan of the table) and with routing-kit's `TrieRouter` (as Vapor uses
// it: the method and the path's segments as `[String]`, parameters by name), on the relay's table with
// the sandbox (`linkrelay routes`). Each lookup also reads the route's parameter, as a handler does.
//
//   swift run -c release --package-path Benchmarks/matcher MatcherBench [ITERATIONS] [ROUNDS]
import Foundation
import Logging
import RoutingKit

/// The relay's table (`Routes`, with `--prove sandbox` and `--confirm-on-phone`), in its order.
let table: [(method: String, pattern: String)] = [
    ("GET", "/l/{key}"), ("POST", "/l/{key}"),
    ("GET", "/v1/sessions/{id}/events"), ("GET", "/v1/sessions/{id}/poll"), ("GET", "/v1/sessions/{id}/ws"),
    ("OPTIONS", "/v1/sessions/{id}/events"), ("OPTIONS", "/v1/sessions/{id}/poll"),
    ("POST", "/v1/sessions"), ("GET", "/v1/sessions/{id}"), ("POST", "/v1/sessions/{id}/cancel"),
    ("POST", "/v1/sessions/{id}/finish"), ("OPTIONS", "/v1/sessions/{id}/finish"),
    ("POST", "/v1/sessions/{id}/bind"), ("POST", "/v1/sessions/{id}/challenge"),
    ("POST", "/v1/sessions/{id}/complete"), ("GET", "/v1/webhooks/messages"),
    ("POST", "/v1/webhooks/messages/{id}/retry"), ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/ops"),
    ("GET", "/assets/ops.css"), ("GET", "/assets/ops.js"), ("GET", "/.well-known/apple-app-site-association"),
    ("GET", "/.well-known/assetlinks.json"), ("GET", "/openapi.json"), ("GET", "/assets/relay.css"),
    ("GET", "/v1/client.js"), ("GET", "/metrics"), ("GET", "/"), ("POST", "/demo"), ("POST", "/demo/prefill"),
    ("POST", "/demo/prefill/challenge"), ("POST", "/demo/prefill/complete"), ("GET", "/sandbox/phone"),
    ("POST", "/demo/resend"), ("POST", "/demo/change-number"), ("GET", "/assets/demo.js"),
    ("GET", "/sandbox/**"), ("POST", "/sandbox/**"), ("PUT", "/sandbox/**"), ("DELETE", "/sandbox/**"),
]

/// What each lookup asks, with the parameter its handler reads.
let requests: [(name: String, method: String, path: String, parameter: String)] = [
    ("repeat landing", "GET", "/l/Xk3vR9mQ2pL7tW4nB8cY6dF1gH5jK0sZ", "key"),
    ("GET session", "GET", "/v1/sessions/ses_4f2a9c1e7b3d5a8f0c6e2b", "id"),
    ("client.js", "GET", "/v1/client.js", ""),
    ("unknown", "GET", "/v1/nothing/here", ""),
]

// The hand-made matcher, as `Routes.match`: the first line of the method whose pattern matches. The
// method is an enum, as NIO's `HTTPMethod` is.
enum Method: String {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
    case delete = "DELETE"
    case options = "OPTIONS"
}
let lines = table.map { (method: Method(rawValue: $0.method)!, pattern: PathPattern(stringLiteral: $0.pattern)) }
@inline(never) func handMade(_ name: String, _ path: Substring, _ parameter: String) -> Int {
    // NIO parses the method once per request; so does this.
    guard let method = Method(rawValue: name) else { return -1 }
    for (index, line) in lines.enumerated() where line.method == method {
        guard let values = line.pattern.match(path) else { continue }
        let position = line.pattern.parameterNames.firstIndex(of: parameter)
        return index + (position.map { values[$0].utf8.count } ?? 0)
    }
    return -1
}

// routing-kit, as Vapor routes: the method, then the path's segments.
let router = TrieRouter(Int.self)
for (index, line) in table.enumerated() {
    let components = line.pattern.split(separator: "/").map { part -> PathComponent in
        if part == "**" { return .catchall }
        if part.hasPrefix("{") { return .parameter(String(part.dropFirst().dropLast())) }
        return .constant(String(part))
    }
    router.register(index, at: [.constant(line.method)] + components)
}
let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
@inline(never) func trie(_ method: String, _ path: Substring, _ parameter: String) -> Int {
    var parameters = Parameters(logger)
    let segments = [method] + path.split(separator: "/").map(String.init)
    guard let index = router.route(path: segments, parameters: &parameters) else { return -1 }
    return index + (parameters.get(parameter)?.utf8.count ?? 0)
}

let iterations = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1])! : 1_000_000
let rounds = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2])! : 5
/// Nanoseconds per lookup, the median of the rounds.
func time(_ lookup: (String, Substring, String) -> Int, _ request: (String, String, String)) -> (Double, Int) {
    var sink = 0
    var samples: [Double] = []
    // A request's path arrives as a new string each time: one per round keeps it out of the loop.
    for _ in 0..<rounds {
        let path = String(request.1.utf8)[...]
        let start = ContinuousClock.now
        for _ in 0..<iterations { sink &+= lookup(request.0, path, request.2) }
        let elapsed = ContinuousClock.now - start
        samples.append(
            Double(elapsed.components.attoseconds / 1_000_000_000 + elapsed.components.seconds * 1_000_000_000)
                / Double(iterations))
    }
    return (samples.sorted()[rounds / 2], sink)
}

print("lookup                hand-made ns   routing-kit ns   (median of \(rounds) rounds of \(iterations))")
var check = 0
for request in requests {
    // Both find the same line and the same parameter.
    let path = request.path[...]
    precondition(handMade(request.method, path, request.parameter) == trie(request.method, path, request.parameter))
    let (hand, a) = time(handMade, (request.method, request.path, request.parameter))
    let (kit, b) = time(trie, (request.method, request.path, request.parameter))
    check &+= a &+ b
    let name = request.name.padding(toLength: 20, withPad: " ", startingAt: 0)
    print(name, String(format: "%12.1f   %14.1f", hand, kit))
}
if check == 42 { print("") }  // keeps the sums alive
