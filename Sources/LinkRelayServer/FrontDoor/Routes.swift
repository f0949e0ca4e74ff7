import Foundation
import LinkRelayCore
import NIOCore
import NIOHTTP1
import ProveSandbox

/// Every route of the relay, in one table: read it first. Each line is a method and a path pattern
/// (`{name}` is one path segment, read by name as `request.parameters["name"]`; `**` any rest), whom its
/// errors are written for (`.person`: a page; else problem+json), who may call it (`guard:`, checked on
/// the head alone by `Route.admit`, before the handler), how much body it reads and of which types
/// (`body:`, `accepts:`), and which pages may read its answers (`cors:`).
///
/// A request goes to the first line whose method and pattern match. Every GET line answers HEAD too (the
/// GET's head, no body: the handler sees `HEAD`); no HEAD line is written. A path that some line matches
/// under other methods answers 405 with `Allow`; a path none matches, 404. `linkrelay routes` prints the
/// table.
struct Routes: Sendable {
    let all: [Route]

    /// `metricsElsewhere`: `/metrics` is served on a listener of its own (`--metrics-listen`), not here.
    init(
        guards: Guards, landing: LandingController, channels: ChannelsController, sessions: SessionsController,
        webhooks: WebhooksController, operations: OpsController, opsPage: OpsPage, pages: Pages,
        demo: DemoController?, sandbox: SandboxController?, apiDescription: ETaggedDocument,
        deepLinks: DeepLinks = DeepLinks(), publicPath: String = "", metricsElsewhere: Bool = false
    ) {
        let apple = deepLinks.appleAssociation(publicPath: publicPath)
        let android = deepLinks.androidAssociation()
        let form = LandingController.maximumFormSize
        let json = ["application/json"]
        let step = CreateSessionRequest.maximumBodySize
        let errorsPage = pages.page("errors", ["codes": ErrorCode.pageEntries])
        var all: [Route] = [
            // The phone: the Instant Link's redirect lands here (the hot path, first).
            Route(.GET, "/l/{key}", .person, landing.visit)
        ]
        // The confirm page's buttons, with `--confirm-on-phone` only.
        if landing.confirmOnPhone { all.append(Route(.POST, "/l/{key}", .person, body: form, landing.confirm)) }
        all += [
            // The desktop's channels: the connection becomes the channel's.
            Route(.GET, "/v1/sessions/{id}/events", guard: .channelToken, cors: .tenantOrigins, channels.open(.sse)),
            Route(.GET, "/v1/sessions/{id}/poll", guard: .channelToken, cors: .tenantOrigins, channels.open(.longpoll)),
            Route(.GET, "/v1/sessions/{id}/ws", guard: .channelToken, cors: .tenantOrigins, channels.open(.websocket)),
            Route(.OPTIONS, "/v1/sessions/{id}/events", channels.preflight),
            Route(.OPTIONS, "/v1/sessions/{id}/poll", channels.preflight),
            // The integrator's backend.
            Route(.POST, "/v1/sessions", guard: .apiKey, body: step, accepts: json, sessions.create),
            Route(.GET, "/v1/sessions/{id}", guard: .apiKey, sessions.show),
            Route(.POST, "/v1/sessions/{id}/cancel", guard: .apiKey, sessions.cancel),
            // The client SDK's finish (AuthFinish, finishInstantLink), from a page, an app or the backend.
            Route(
                .POST, "/v1/sessions/{id}/finish", guard: .apiKeyOrChannelToken,
                body: SessionsController.maximumFinishBody, accepts: json, cors: .tenantOrigins, sessions.finish),
            Route(.OPTIONS, "/v1/sessions/{id}/finish", channels.preflight),
            // Customer-supplied possession: the integrator's own check passed (possessionType none).
            Route(.POST, "/v1/sessions/{id}/bind", guard: .apiKey, body: 256, accepts: json, sessions.bind),
            // Pre-Fill's steps after the result, as Prove's `next` offers them.
            Route(.POST, "/v1/sessions/{id}/challenge", guard: .apiKey, body: step, accepts: json, sessions.challenge),
            Route(.POST, "/v1/sessions/{id}/complete", guard: .apiKey, body: step, accepts: json, sessions.complete),
            // The webhook outbox (API.md v1.1 "Webhooks").
            Route(.GET, "/v1/webhooks/messages", guard: .apiKey, webhooks.list),
            Route(.POST, "/v1/webhooks/messages/{id}/retry", guard: .apiKey, webhooks.retry),
            // Operators.
            Route(.GET, "/healthz", operations.health),
            Route(.GET, "/readyz", operations.readiness),
            // The operators' live page (HTTP Basic, an API key as the password), its style and its refresh.
            Route(.GET, "/ops", .person, guard: .opsBasic, opsPage.show),
            Route(.GET, "/assets/ops.css") { _ in
                .now(.asset(pages.opsStylesheet, contentType: "text/css; charset=utf-8"))
            },
            Route(.GET, "/assets/ops.js") { _ in
                .now(.asset(pages.opsScript, contentType: "text/javascript; charset=utf-8"))
            },
            // The apps' association files (API.md v1.1 "Deep links"): 404 until an app is configured.
            Route(.GET, "/.well-known/apple-app-site-association") { _ in try Self.association(apple) },
            Route(.GET, "/.well-known/assetlinks.json") { _ in try Self.association(android) },
            // The API description (API.md v1.1), `templates/openapi.json`: every route above is in it.
            Route(.GET, "/openapi.json") { request in .now(apiDescription.answer(to: request)) },
            // The pages' style sheet, and their icon where browsers look for it.
            Route(.GET, "/assets/relay.css") { _ in
                .now(.asset(pages.stylesheet, contentType: "text/css; charset=utf-8"))
            },
            Route(.GET, "/favicon.ico") { _ in .now(.asset(pages.favicon, contentType: "image/svg+xml")) },
            // The browser client that integrators' pages (and the demo) wait with.
            Route(.GET, "/v1/client.js") { request in .now(pages.clientScript.answer(to: request)) },
            // Every problem's `code` with what to do: its `type` is `{public-url}/errors#{code}`.
            Route(.GET, "/errors", .person) { _ in .now(errorsPage) },
        ]
        if !metricsElsewhere { all.append(Route(.GET, "/metrics", operations.metrics)) }
        if let demo, let sandbox {
            // The demo and the embedded Prove sandbox (`--prove sandbox` only).
            let demoForm = DemoController.maximumFormSize
            all += [
                Route(.GET, "/", .person, demo.home),
                Route(.POST, "/demo", .person, body: demoForm, demo.start),
                Route(.POST, "/demo/prefill", .person, body: demoForm, demo.startPrefill),
                Route(.POST, "/demo/prefill/challenge", .person, body: demoForm, demo.prefillChallenge),
                Route(
                    .POST, "/demo/prefill/complete", .person, body: DemoController.maximumConfirmFormSize,
                    demo.prefillComplete),
                Route(.POST, "/demo/nevis", .person, body: demoForm, demo.startNevis),
                Route(.POST, "/demo/nevis/result", .person, body: demoForm, demo.nevisResult),
                Route(.GET, "/sandbox/phone", .person, demo.phone),
                Route(.POST, "/demo/resend", .person, body: demoForm, demo.resend),
                Route(.POST, "/demo/change-number", .person, body: demoForm, demo.changeNumber),
                Route(.GET, "/assets/demo.js") { _ in
                    .now(.asset(pages.demoScript, contentType: "text/javascript; charset=utf-8"))
                },
            ]
            all += Self.sandbox(sandbox)
        } else {
            all.append(Route(.GET, "/", .person) { _ in .now(pages.page("demo")) })
        }
        self.init(all.map { $0.checked(by: guards) })
    }

    /// A table of `all`, as written: HEAD comes from GET, so no line may be a HEAD.
    init(_ all: [Route]) {
        precondition(!all.contains { $0.method == .HEAD }, "HEAD is answered by the GET line")
        self.all = all
    }

    /// The operators' own listener (`--metrics-listen`): metrics, health and readiness only.
    init(operations: OpsController) {
        self.init([
            Route(.GET, "/metrics", operations.metrics), Route(.GET, "/healthz", operations.health),
            Route(.GET, "/readyz", operations.readiness),
        ])
    }

    /// The standalone sandbox (`linkrelay sandbox`): the sandbox's own routes only.
    init(sandbox: SandboxController) {
        self.init(Self.sandbox(sandbox))
    }

    /// The sandbox's own routes (`ProveSandbox.respond`): Prove's API, the outbox, the link page, faults.
    /// Prove's API is also at the root (`/token`, `/v3/…`): Prove's server SDKs resolve the token path
    /// against the server's root, so pointed at `…/sandbox/prove` they would ask `/token`. They read up to
    /// `ProveSandbox.maxReadBytes`, so that the sandbox answers a body of 4 KB or more as Prove does (8001).
    private static func sandbox(_ sandbox: SandboxController) -> [Route] {
        [HTTPMethod.GET, .POST, .PUT, .DELETE].map { method in
            Route(
                method, sandboxPatterns[0], body: ProveSandbox.maxReadBytes, cancelledWhenClientLeaves: true,
                sandbox.answer)
        }
            + sandboxPatterns.dropFirst().map { path in
                Route(.POST, path, body: ProveSandbox.maxReadBytes, cancelledWhenClientLeaves: true, sandbox.answer)
            }
    }

    /// The patterns of the sandboxes' own routes: `/sandbox/**` for every method, the rest for POST.
    private static let sandboxPatterns: [PathPattern] = ["/sandbox/**", "/token", "/v3/{endpoint}"]

    /// Those patterns as answers are counted by: the simulators' answers, not the relay's, are counted apart
    /// (`RelayMetrics.httpResponse`).
    static let sandboxRoutes = Set(sandboxPatterns.map(\.description))

    /// An association file as Apple and Google fetch it: 200, JSON, no redirect.
    private static func association(_ bytes: [UInt8]?) throws -> Reply {
        guard let bytes else { throw Problem.notFound("No app is configured.") }
        return .now(Answer(status: .ok, headers: ["Content-Type": "application/json"], body: ByteBuffer(bytes: bytes)))
    }

    /// The first route for `method` and `path` (a HEAD's is the GET's), with what its pattern captured.
    func match(_ method: HTTPMethod, _ path: Substring) -> (route: Route, parameters: RouteParameters)? {
        let method = method == .HEAD ? .GET : method
        for route in all where route.method == method {
            if let values = route.pattern.match(path) {
                return (route, RouteParameters(names: route.pattern.parameterNames, values: values))
            }
        }
        return nil
    }

    /// The methods some line takes `path` under, in the table's order (HEAD after GET); empty for a path
    /// no line knows.
    func allowed(_ path: Substring) -> [HTTPMethod] {
        var methods: [HTTPMethod] = []
        for route in all where !methods.contains(route.method) && route.pattern.match(path) != nil {
            methods.append(route.method)
            if route.method == .GET { methods.append(.HEAD) }
        }
        return methods
    }

    /// A request no route takes: 405 with `Allow` for a path known under other methods, written for the
    /// audience of the path's first line; else 404, as a page for a landing's path, else as problem+json.
    func unmatched(_ request: RelayRequest, errors: ErrorMapping) -> Answer {
        let methods = allowed(request.path)
        guard let first = all.first(where: { $0.pattern.match(request.path) != nil }) else {
            return errors.answer(for: Problem.notFound(), audience: request.path.hasPrefix("/l/") ? .person : .api)
        }
        let allow = methods.map(\.rawValue).joined(separator: ", ")
        let problem = Problem(.methodNotAllowed, "\(request.path) takes \(allow).", headers: ["Allow": allow])
        return errors.answer(for: problem, audience: first.audience)
    }

    /// The table as `linkrelay routes` prints it: one line per method and path (HEAD after its GET), with
    /// the guard and the body limit, in columns.
    func printed() -> String {
        var rows = [["METHOD", "PATH", "GUARD", "BODY", "ACCEPTS", "CORS"]]
        for route in all {
            let body = route.maximumBody == 0 ? "none" : String(route.maximumBody)
            let accepts = route.accepts.isEmpty ? "-" : route.accepts.joined(separator: ",")
            let cors = route.cors == .none ? "-" : route.cors.rawValue
            for method in route.method == .GET ? [HTTPMethod.GET, .HEAD] : [route.method] {
                rows.append(
                    [method.rawValue, route.pattern.description, route.guard.rawValue, body, accepts, cors])
            }
        }
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.indices.map { column in
                column == row.count - 1
                    ? row[column] : row[column].padding(toLength: widths[column] + 2, withPad: " ", startingAt: 0)
            }.joined()
        }.joined(separator: "\n") + "\n"
    }
}
