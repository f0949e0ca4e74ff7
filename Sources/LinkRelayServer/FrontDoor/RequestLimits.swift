import Foundation
import LinkRelayCore
import LinkRelaySupport

/// The relay's rate and connection limits (`Limits`), as the controllers apply them. Over a limit a
/// request gets a bare 429 and changes nothing. With `--limits off` every check passes.
final class RequestLimits: Sendable {
    private struct Active: Sendable {
        let landingByIP: RateLimiter
        let landingByLink: RateLimiter
        let createByKey: RateLimiter
        let channelsBySession: ConnectionLimiter
        let channelsByIP: ConnectionLimiter
        let finishBySession: RateLimiter
        let opsByIP: RateLimiter
    }

    /// Requests for the ops page per client IP address, per minute: a page refreshing every 10 s in a
    /// few tabs fits; guessing an API key as its password does not get far.
    static let opsPerIP = 30

    private let active: Active?
    private let trustedProxies: [IPNetwork]
    private let clock: any RelayClock
    let securityEvents: SecurityEvents

    init(limits: Limits?, trustedProxies: [IPNetwork], clock: any RelayClock, securityEvents: SecurityEvents) {
        self.active = limits.map { limits in
            Active(
                landingByIP: RateLimiter(rule: .init(perMinute: limits.landingPerIP, burst: limits.landingPerIP)),
                landingByLink: RateLimiter(
                    rule: .init(perMinute: limits.landingPerLink, burst: limits.landingPerLink)),
                createByKey: RateLimiter(rule: .init(perMinute: limits.createPerKey, burst: limits.createPerKey)),
                channelsBySession: ConnectionLimiter(maximum: limits.channelsPerSession),
                channelsByIP: ConnectionLimiter(maximum: limits.channelsPerIP),
                finishBySession: RateLimiter(
                    rule: .init(perMinute: limits.finishPerSession, burst: limits.finishPerSession)),
                opsByIP: RateLimiter(rule: .init(perMinute: Self.opsPerIP, burst: Self.opsPerIP), maximumKeys: 10_000))
        }
        self.trustedProxies = trustedProxies
        self.clock = clock
        self.securityEvents = securityEvents
    }

    /// The client's address: the socket's peer, or the client `X-Forwarded-For` names when the peer
    /// is a `--trusted-proxy` (see `ClientAddress.resolve`).
    func client(_ request: RelayRequest) -> IPAddress? {
        let peer = request.peer.flatMap(IPAddress.init)
        guard !trustedProxies.isEmpty else { return peer }
        return ClientAddress.resolve(
            peer: peer, forwardedFor: request.headers["X-Forwarded-For"], trustedProxies: trustedProxies)
    }

    /// One landing (GET, HEAD or POST on `/l/{key}`): a token from the client's bucket, and from the
    /// link's when `linkKey` is given (only a request that can be the tap spends it). `client` is only
    /// worked out when limits are on.
    func allowLanding(linkKey: String?, client: () -> IPAddress?) -> Bool {
        guard let active else { return true }
        let now = clock.now()
        guard active.landingByIP.allow(client()?.rateLimitKey ?? "unknown", now: now) else {
            return trip(.landingPerIP)
        }
        if let linkKey, !active.landingByLink.allow(linkKey, now: now) { return trip(.landingPerLink) }
        return true
    }

    /// One `POST /v1/sessions` by the API key whose id (`APIKeys.keyID`) is `keyID`.
    func allowCreate(keyID: String) -> Bool {
        guard let active else { return true }
        return active.createByKey.allow(keyID, now: clock.now()) || trip(.createPerKey)
    }

    /// One `POST /v1/sessions/{id}/finish` on the session.
    func allowFinish(sessionID: String) -> Bool {
        guard let active else { return true }
        return active.finishBySession.allow(sessionID, now: clock.now()) || trip(.finishPerSession)
    }

    /// One request for the ops page, with or without the right password: every attempt spends a token,
    /// so a wrong password and a right one are turned away alike once the client's bucket is empty.
    func allowOps(client: IPAddress?) -> Bool {
        guard let active else { return true }
        return active.opsByIP.allow(client?.rateLimitKey ?? "unknown", now: clock.now()) || trip(.opsPerIP)
    }

    /// Takes a place for a channel, or nil when the session or the client has no place left.
    func openChannel(sessionID: String, client: IPAddress?) -> ChannelSlot? {
        guard let active else { return ChannelSlot(release: nil) }
        let ip = client?.rateLimitKey ?? "unknown"
        guard active.channelsBySession.acquire(sessionID) else {
            trip(.channelsPerSession)
            return nil
        }
        guard active.channelsByIP.acquire(ip) else {
            active.channelsBySession.release(sessionID)
            trip(.channelsPerIP)
            return nil
        }
        return ChannelSlot {
            active.channelsBySession.release(sessionID)
            active.channelsByIP.release(ip)
        }
    }

    /// Counts and logs the trip (a security event, security-anchors L7.4); always false, so a check can
    /// end with `|| trip(...)`.
    @discardableResult
    private func trip(_ kind: LimitKind) -> Bool {
        securityEvents.record(.limit(kind))
        return false
    }
}

/// A request over one of the limits: it changes nothing, and `ErrorMapping` answers a bare 429 (a page
/// for a person).
struct LimitExceeded: Error {}
