import LinkRelayCore
import NIOCore
import NIOHTTP1
import ProveSandbox

/// Every route of the relay, in one table: read it first. A request goes to the first line whose method
/// and path pattern match (`{name}` is one path segment, `**` any rest); none is a 404.
struct Routes: Sendable {
    let all: [Route]

    /// `metricsElsewhere`: `/metrics` is served on a listener of its own (`--metrics-listen`), not here.
    init(
        landing: LandingController, channels: ChannelsController, sessions: SessionsController,
        webhooks: WebhooksController, operations: OpsController, opsPage: OpsPage, pages: Pages,
        demo: DemoController?, sandbox: SandboxController?, apiDescription: ETaggedDocument,
        deepLinks: DeepLinks = DeepLinks(), publicPath: String = "", metricsElsewhere: Bool = false
    ) {
        let apple = deepLinks.appleAssociation(publicPath: publicPath)
        let android = deepLinks.androidAssociation()
        let form = LandingController.maximumFormSize
        var all: [Route] = [
            // The phone: the Instant Link's redirect lands here (the hot path, first).
            Route(.GET, "/l/{key}", .person, landing.visit),
            Route(.HEAD, "/l/{key}", .person, landing.visit),
            Route(.POST, "/l/{key}", .person, body: form, landing.confirm),
            // The desktop's channels: the connection becomes the channel's.
            Route(.GET, "/v1/sessions/{id}/events", channels.open(.sse)),
            Route(.GET, "/v1/sessions/{id}/poll", channels.open(.longpoll)),
            Route(.GET, "/v1/sessions/{id}/ws", channels.open(.websocket)),
            Route(.OPTIONS, "/v1/sessions/{id}/events", channels.preflight),
            Route(.OPTIONS, "/v1/sessions/{id}/poll", channels.preflight),
            // The integrator's backend.
            Route(.POST, "/v1/sessions", body: CreateSessionRequest.maximumBodySize, sessions.create),
            Route(.GET, "/v1/sessions/{id}", sessions.show),
            Route(.POST, "/v1/sessions/{id}/cancel", sessions.cancel),
            // The client SDK's finish (AuthFinish, finishInstantLink), from a page, an app or the backend.
            Route(.POST, "/v1/sessions/{id}/finish", body: SessionsController.maximumFinishBody, sessions.finish),
            Route(.OPTIONS, "/v1/sessions/{id}/finish", channels.preflight),
            // Customer-supplied possession: the integrator's own check passed (possessionType none).
            Route(.POST, "/v1/sessions/{id}/bind", body: 256, sessions.bind),
            // Pre-Fill's steps after the result, as Prove's `next` offers them.
            Route(.POST, "/v1/sessions/{id}/challenge", body: CreateSessionRequest.maximumBodySize, sessions.challenge),
            Route(.POST, "/v1/sessions/{id}/complete", body: CreateSessionRequest.maximumBodySize, sessions.complete),
            // The webhook outbox (API.md v1.1 "Webhooks").
            Route(.GET, "/v1/webhooks/messages", webhooks.list),
            Route(.POST, "/v1/webhooks/messages/{id}/retry", webhooks.retry),
            // Operators.
            Route(.GET, "/healthz", operations.health),
            Route(.HEAD, "/healthz", operations.health),
            Route(.GET, "/readyz", operations.readiness),
            Route(.HEAD, "/readyz", operations.readiness),
            // The operators' live page (HTTP Basic, an API key as the password), its style and its refresh.
            Route(.GET, "/ops", .person, opsPage.show),
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
            // The pages' style sheet.
            Route(.GET, "/assets/relay.css") { _ in
                .now(.asset(pages.stylesheet, contentType: "text/css; charset=utf-8"))
            },
            // The browser client that integrators' pages (and the demo) wait with.
            Route(.GET, "/v1/client.js") { request in .now(pages.clientScript.answer(to: request)) },
            Route(.HEAD, "/v1/client.js") { request in .now(pages.clientScript.answer(to: request)) },
        ]
        if !metricsElsewhere { all.append(Route(.GET, "/metrics", operations.metrics)) }
        if let demo, let sandbox {
            // The demo and the embedded Prove sandbox (`--prove sandbox` only).
            all += [
                Route(.GET, "/", .person, demo.home),
                Route(.POST, "/demo", .person, body: DemoController.maximumFormSize, demo.start),
                Route(.POST, "/demo/prefill", .person, body: DemoController.maximumFormSize, demo.startPrefill),
                Route(
                    .POST, "/demo/prefill/challenge", .person, body: DemoController.maximumFormSize,
                    demo.prefillChallenge),
                Route(
                    .POST, "/demo/prefill/complete", .person, body: DemoController.maximumConfirmFormSize,
                    demo.prefillComplete),
                Route(.GET, "/sandbox/phone", .person, demo.phone),
                Route(.POST, "/demo/resend", .person, body: DemoController.maximumFormSize, demo.resend),
                Route(.POST, "/demo/change-number", .person, body: DemoController.maximumFormSize, demo.changeNumber),
                Route(.GET, "/assets/demo.js") { _ in
                    .now(.asset(pages.demoScript, contentType: "text/javascript; charset=utf-8"))
                },
            ]
            all += Self.sandbox(sandbox)
        } else {
            all.append(Route(.GET, "/", .person) { _ in .now(pages.page("demo")) })
        }
        self.all = all
    }

    /// The operators' own listener (`--metrics-listen`): metrics, health and readiness only.
    init(operations: OpsController) {
        all = [
            Route(.GET, "/metrics", operations.metrics), Route(.GET, "/healthz", operations.health),
            Route(.GET, "/readyz", operations.readiness),
        ]
    }

    /// The standalone sandbox (`linkrelay sandbox`): the sandbox's own routes only.
    init(sandbox: SandboxController) {
        all = Self.sandbox(sandbox)
    }

    /// The sandbox's own routes (`ProveSandbox.respond`): Prove's API, the outbox, the link page, faults.
    private static func sandbox(_ sandbox: SandboxController) -> [Route] {
        [HTTPMethod.GET, .POST, .PUT, .DELETE].map { method in
            Route(
                method, "/sandbox/**", body: ProveSandbox.maxBodyBytes, cancelledWhenClientLeaves: true, sandbox.answer)
        }
    }

    /// An association file as Apple and Google fetch it: 200, JSON, no redirect.
    private static func association(_ bytes: [UInt8]?) throws -> Reply {
        guard let bytes else { throw Problem.notFound("No app is configured.") }
        return .now(Answer(status: .ok, headers: ["Content-Type": "application/json"], body: ByteBuffer(bytes: bytes)))
    }

    /// The first route for `method` and `path`, with what its pattern captured.
    func match(_ method: HTTPMethod, _ path: Substring) -> (route: Route, parameters: [Substring])? {
        for route in all where route.method == method {
            if let parameters = route.pattern.match(path) { return (route, parameters) }
        }
        return nil
    }

    /// A request no route takes: 404, as a page for a landing's path, else as problem+json.
    func unmatched(_ request: RelayRequest, errors: ErrorMapping) -> Answer {
        errors.answer(for: Problem.notFound(), audience: request.path.hasPrefix("/l/") ? .person : .api)
    }
}
