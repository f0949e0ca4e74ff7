import Foundation
import Hummingbird
import LinkRelayCore

/// `/l/{key}?asc=…&authId=…`: where the phone's browser lands after the Instant Link.
///
/// Without `--confirm-on-phone` the GET counts as the tap (API.md). With it, the GET only shows who
/// is asking and two buttons, and the page's POST counts: link scanners and previews, which GET (and
/// HEAD) links, change nothing. A HEAD never changes anything in either mode.
///
/// GETs and HEADs are answered by the relay's own `LandingHandler` on the event loop; Hummingbird's
/// routes take the POST, and a GET or HEAD only in a form the handler leaves alone (an absolute URI).
struct LandingController {
    let service: SessionService
    let pages: Pages
    let limits: RequestLimits
    let repeatLandings: RepeatLandings
    let confirmOnPhone: Bool
    let integratorName: String
    let publicOrigin: String

    /// The largest confirm form the relay reads (`choice=confirm`).
    static let maximumFormSize = 256

    func addRoutes(to router: Router<RelayContext>) {
        router.get("l/:key") { request, context in try await visit(request, context).response }
        router.head("l/:key") { request, context in try await visit(request, context).response.withoutBody() }
        router.post("l/:key", use: answer)
    }

    private func visit(_ request: Request, _ context: RelayContext) async throws -> Page {
        await visit(
            key: try context.parameters.require("key"), query: request.uri.query, head: request.method == .head
        ) { limits.client(request, context) }
    }

    /// A landing's GET, or its HEAD (`head`): the page, and for a GET the tap unless taps are confirmed
    /// on the phone. `client` is asked only when limits are on.
    func visit(key: String, query: String?, head: Bool, client: () -> IPAddress?) async -> Page {
        await landing(key: key, query: query, client: client) { key, parameters in
            let result =
                confirmOnPhone || head
                ? try await service.inspectLanding(linkKey: key, parameters: parameters, confirming: confirmOnPhone)
                : try await service.land(linkKey: key, parameters: parameters)
            return page(for: result, parameters, get: !head)
        }
    }

    /// Runs `body` for a landing that passes the limits, the strict query and the key's shape (checked
    /// before any lookup); otherwise answers the page that turns it away.
    private func landing(
        key: String, query: String?, client: () -> IPAddress?,
        _ body: (_ key: String, _ parameters: LandingParameters) async throws -> Page
    ) async -> Page {
        guard limits.allowLanding(linkKey: key, client: client) else {
            return pages.page("error-busy", status: .tooManyRequests)
        }
        guard case .success(let parameters) = LandingParameters.parse(query: query) else {
            countRefusal(.badLink)
            return pages.page("error-bad-link", status: .badRequest)
        }
        guard key.utf8.count == SessionService.linkKeyLength else {
            countRefusal(.unknown)
            return pages.page("error-unknown", status: .notFound)
        }
        do {
            return try await body(key, parameters)
        } catch {
            return ErrorMiddleware.landingPage(for: ErrorMiddleware.problem(for: error, logger: service.logger), pages)
        }
    }

    /// The confirm page's buttons: `choice=confirm` counts as the tap, `choice=reject` ends the session.
    /// Either way the answer is a 303 back to the landing's GET, which shows where things stand.
    @Sendable func answer(_ request: Request, context: RelayContext) async throws -> Response {
        let key = try context.parameters.require("key")
        let client = { limits.client(request, context) }
        return await landing(key: key, query: request.uri.query, client: client) { key, parameters in
            guard confirmOnPhone else {
                return pages.page("error-bad-link", status: .methodNotAllowed, headers: [.allow: "GET, HEAD"])
            }
            // The form is the relay's own page; a browser posting it from anywhere else is refused.
            if let origin = request.headers[.origin], origin != publicOrigin {
                return pages.page("error-bad-link", status: .forbidden)
            }
            let form = try? await request.body.collect(upTo: Self.maximumFormSize)
            let result: SessionService.LandingResult
            switch form.map({ String(buffer: $0) }) {
            case "choice=confirm":
                result = try await service.land(linkKey: key, parameters: parameters, confirming: true)
            case "choice=reject":
                result = try await service.reject(linkKey: key, parameters: parameters)
            default:
                return pages.page("error-bad-link", status: .badRequest)
            }
            switch result {
            case .accepted, .finalPage, .awaitingConfirmation:
                if case .accepted = result { service.metrics.landingAccepted() }
                // 303, so that the browser GETs the landing again (R1.8), which shows where things stand.
                return Page(
                    status: .seeOther,
                    headers: [.location: Self.landingPath(key, parameters), .cacheControl: "no-store"])
            case .unknown, .expired, .alreadyUsed:
                return page(for: result, parameters, get: false)
            }
        }.response
    }

    /// `get`: the answer is to a GET, which counts an accepted or repeated landing.
    private func page(for result: SessionService.LandingResult, _ parameters: LandingParameters, get: Bool) -> Page {
        let metrics = service.metrics
        switch result {
        case .accepted:
            if get, !confirmOnPhone { metrics.landingAccepted() }
            return pages.page("landing")
        case .awaitingConfirmation(let session):
            return pages.page("confirm", confirmValues(session, parameters))
        case .finalPage(let session):
            if get {
                metrics.landingRepeated()
                repeatLandings.remember(session)
            }
            return pages.page("final", ["rejected": session.state == .cancelled])
        case .unknown:
            countRefusal(.unknown)
            return pages.page("error-unknown", status: .notFound)
        case .expired:
            countRefusal(.expired)
            return pages.page("error-expired", status: .gone)
        case .alreadyUsed:
            countRefusal(.alreadyUsed)
            return pages.page("error-used", status: .conflict)
        }
    }

    /// Counts and logs a refused landing (a security event, L7.4); never with the authId or the link.
    private func countRefusal(_ reason: LandingRejection) {
        service.metrics.landingRejected(reason)
        service.logger.info("Landing refused", metadata: ["reason": .string(reason.rawValue)])
    }

    /// The landing's own URL, built from the parsed values only, never from the raw request (R1.1).
    private static func landingPath(_ key: String, _ parameters: LandingParameters) -> String {
        "/l/\(key)?asc=\(parameters.asc)&authId=\(parameters.authId)"
    }

    private func confirmValues(_ session: Session, _ parameters: LandingParameters) -> [String: Any] {
        let started = session.createdAt
        let minutes = max(0, Int(service.clock.now().timeIntervalSince(started) / 60))
        var values: [String: Any] = [
            "integrator": integratorName,
            "startedAt": started.formatted(
                Date.VerbatimFormatStyle(
                    format:
                        "\(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits) UTC",
                    timeZone: .gmt, calendar: Calendar(identifier: .gregorian))),
            "ago": minutes == 0 ? "less than a minute ago" : minutes == 1 ? "1 minute ago" : "\(minutes) minutes ago",
            "action": Self.landingPath(session.linkKey, parameters),
        ]
        if let address = session.desktopIPAddress { values["from"] = address }
        return values
    }
}
