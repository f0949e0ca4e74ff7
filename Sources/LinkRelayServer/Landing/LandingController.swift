import Foundation
import LinkRelayCore
import Logging
import NIOHTTP1

/// `/l/{key}?asc=…&authId=…`: where the phone's browser lands after the Instant Link.
///
/// Without `--confirm-on-phone` the GET counts as the tap (API.md). With it, the GET only shows who
/// is asking and two buttons, and the page's POST counts: link scanners and previews, which GET (and
/// HEAD) links, change nothing. A HEAD never changes anything in either mode.
final class LandingController: Sendable {
    let service: SessionService
    let metrics: RelayMetrics
    let clock: any RelayClock
    let logger: Logger
    let pages: Pages
    let limits: RequestLimits
    let repeatLandings: RepeatLandings
    let confirmOnPhone: Bool
    let integratorName: String
    let publicURL: String
    let publicOrigin: String
    let deepLinks: DeepLinks

    init(
        service: SessionService, metrics: RelayMetrics, clock: any RelayClock, logger: Logger, pages: Pages,
        limits: RequestLimits, repeatLandings: RepeatLandings,
        confirmOnPhone: Bool, integratorName: String, publicURL: String, deepLinks: DeepLinks = DeepLinks()
    ) {
        self.service = service
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
        self.pages = pages
        self.limits = limits
        self.repeatLandings = repeatLandings
        self.confirmOnPhone = confirmOnPhone
        self.integratorName = integratorName
        self.publicURL = publicURL
        self.publicOrigin = RelayConfiguration.origin(of: publicURL)
        self.deepLinks = deepLinks
    }

    /// The largest confirm form the relay reads (`choice=confirm`).
    static let maximumFormSize = 256

    /// `GET` and `HEAD /l/{key}`: the page, and for a GET the tap unless taps are confirmed on the phone.
    /// A reload of an ended session's final page is answered at once, from memory (`RepeatLandings`):
    /// it is the request a phone repeats most.
    func visit(_ request: RelayRequest) throws -> Reply {
        let head = request.method == .HEAD
        // Only a request that can be the tap spends the link's budget: scanners' HEADs, and GETs that
        // only show the confirm page, cannot lock the phone out.
        return try landing(request, spendsLinkBudget: !head && !confirmOnPhone) { key, parameters in
            if !head, let rejected = repeatLandings.ended(key: key, authId: parameters.authId) {
                metrics.landingRepeated()
                return .now(pages.final(rejected: rejected))
            }
            return .later { [self] in
                let result =
                    confirmOnPhone || head
                    ? try await service.inspectLanding(linkKey: key, parameters: parameters, confirming: confirmOnPhone)
                    : try await service.land(linkKey: key, parameters: parameters)
                return try page(for: result, parameters, get: !head)
            }
        }
    }

    /// `POST /l/{key}`, the confirm page's buttons (a route only with `--confirm-on-phone`; without it
    /// the table answers 405): `choice=confirm` counts as the tap, `choice=reject` ends the session.
    /// Either way the answer is a 303 back to the landing's GET, which shows where things stand.
    func confirm(_ request: RelayRequest) throws -> Reply {
        try landing(request, spendsLinkBudget: true) { key, parameters in
            // The form is the relay's own page; a browser posting it from anywhere else is refused.
            if request.isPostedFromAnotherOrigin(than: publicOrigin) {
                limits.securityEvents.record(.confirmOrigin)
                throw Problem.forbidden("The confirm form comes from the relay's own page.")
            }
            let choice = request.body.map { String(buffer: $0) }
            guard choice == "choice=confirm" || choice == "choice=reject" else {
                throw Problem.badRequest("The form must be choice=confirm or choice=reject.")
            }
            return .later { [self] in
                let result =
                    choice == "choice=confirm"
                    ? try await service.land(linkKey: key, parameters: parameters, confirming: true)
                    : try await service.reject(linkKey: key, parameters: parameters)
                switch result {
                case .accepted, .finalPage, .awaitingConfirmation:
                    if case .accepted = result { metrics.landingAccepted() }
                    // 303, so that the browser GETs the landing again (R1.8), which shows where things stand.
                    return Answer(
                        status: .seeOther,
                        headers: ["Location": Self.landingPath(key, parameters), "Cache-Control": "no-store"])
                case .unknown, .expired, .alreadyUsed:
                    return try page(for: result, parameters, get: false)
                }
            }
        }
    }

    /// Runs `body` for a landing that passes the limits and the landing's rules (`LandingRedirect.check`:
    /// the strict query, then the key's shape, before any lookup); otherwise throws why it is turned away.
    private func landing(
        _ request: RelayRequest, spendsLinkBudget: Bool,
        _ body: (_ key: String, _ parameters: LandingParameters) throws -> Reply
    ) throws -> Reply {
        let key = request.parameters["key"] ?? ""
        guard
            limits.allowLanding(
                linkKey: spendsLinkBudget ? String(key) : nil, client: { limits.client(request) })
        else {
            throw LimitExceeded()
        }
        switch LandingRedirect.check(linkKey: key, query: request.query) {
        case .success(let redirect):
            return try body(redirect.linkKey, redirect.parameters)
        case .failure(let rejection):
            countRefusal(rejection == .notALink ? .unknown : .badLink)
            throw rejection
        }
    }

    /// `get`: the answer is to a GET, which counts an accepted or repeated landing. A landing the session
    /// turns away is thrown as the reason.
    private func page(for result: SessionService.LandingResult, _ parameters: LandingParameters, get: Bool) throws
        -> Answer
    {
        switch result {
        case .accepted(let session):
            if get, !confirmOnPhone { metrics.landingAccepted() }
            // With an app, the page offers it: the landing's own URL is the app's link.
            guard deepLinks.hasApp else { return pages.page("landing") }
            return pages.page(
                "landing",
                deepLinks.pageValues(landingURL: publicURL + Self.landingPath(session.linkKey, parameters)))
        case .awaitingConfirmation(let session):
            return pages.page("confirm", confirmValues(session, parameters))
        case .finalPage(let session):
            if get {
                metrics.landingRepeated()
                repeatLandings.remember(session)
            }
            return pages.final(rejected: session.state == .cancelled)
        case .unknown:
            countRefusal(.unknown)
            throw SessionError.notFound
        case .expired:
            countRefusal(.expired)
            throw SessionError.expired
        case .alreadyUsed:
            countRefusal(.alreadyUsed)
            throw SessionError.alreadyEnded
        }
    }

    /// Counts and logs a refused landing (a security event, L7.4); never with the authId or the link.
    private func countRefusal(_ reason: LandingRejection) {
        metrics.landingRejected(reason)
        logger.info("Landing refused", metadata: ["reason": .string(reason.rawValue)])
    }

    /// The landing's own URL, built from the parsed values only, never from the raw request (R1.1).
    private static func landingPath(_ key: String, _ parameters: LandingParameters) -> String {
        "/l/\(key)?asc=\(parameters.asc)&authId=\(parameters.authId)"
    }

    private func confirmValues(_ session: Session, _ parameters: LandingParameters) -> [String: Any] {
        let started = session.createdAt
        let minutes = max(0, Int(clock.now().timeIntervalSince(started) / 60))
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
