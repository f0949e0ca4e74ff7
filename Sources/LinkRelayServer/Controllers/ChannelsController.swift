import Foundation
import Hummingbird

/// The CORS preflight of the desktop channels. The channels themselves (`GET …/events`, `…/poll` and
/// `…/ws`) are served on the event loop by `RelayConnectionHandler`, before Hummingbird's router.
struct ChannelsController {
    let gate: ChannelGate

    func addRoutes(to router: Router<RelayContext>) {
        for path in ["v1/sessions/:id/events", "v1/sessions/:id/poll"] {
            router.on(RouterPath(stringLiteral: path), method: .options, use: preflight)
        }
    }

    @Sendable func preflight(_ request: Request, context: RelayContext) async throws -> Response {
        guard let origin = request.headers[.origin], gate.allowedOrigins.contains(origin) else {
            throw Problem(status: .forbidden, title: "Forbidden", detail: "This origin may not open channels.")
        }
        var headers = gate.corsHeaders(origin)
        headers[.accessControlAllowMethods] = "GET, OPTIONS"
        headers[.accessControlAllowHeaders] = "Authorization, Last-Event-ID"
        headers[.accessControlMaxAge] = "600"
        return Response(status: .noContent, headers: headers)
    }
}
