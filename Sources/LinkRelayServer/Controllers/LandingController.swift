import Foundation
import Hummingbird
import LinkRelayCore

/// `GET /l/{key}?asc=…&authId=…`: where the phone's browser lands after the Instant Link.
struct LandingController {
    let service: SessionService
    let pages: Pages

    func addRoutes(to router: Router<RelayContext>) {
        router.get("l/:key", use: land)
    }

    @Sendable func land(_ request: Request, context: RelayContext) async throws -> Response {
        let metrics = service.metrics
        let parameters: LandingParameters
        switch LandingParameters.parse(query: request.uri.query) {
        case .success(let parsed):
            parameters = parsed
        case .failure:
            metrics.landingRejected(.badLink)
            return pages.render("error-bad-link", status: .badRequest)
        }
        let key = try context.parameters.require("key")
        guard key.utf8.count == SessionService.linkKeyLength else {
            metrics.landingRejected(.unknown)
            return pages.render("error-unknown", status: .notFound)
        }
        switch try await service.land(linkKey: key, parameters: parameters) {
        case .accepted:
            metrics.landingAccepted()
            return pages.render("landing")
        case .finalPage:
            metrics.landingRepeated()
            return pages.render("final")
        case .unknown:
            metrics.landingRejected(.unknown)
            return pages.render("error-unknown", status: .notFound)
        case .expired:
            metrics.landingRejected(.expired)
            return pages.render("error-expired", status: .gone)
        case .alreadyUsed:
            metrics.landingRejected(.alreadyUsed)
            return pages.render("error-used", status: .conflict)
        }
    }
}
