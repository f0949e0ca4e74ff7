/// The rate and connection limits (API.md `--limits`), each with its own flag. Rates are token
/// buckets: N per minute, with bursts of up to N.
public struct Limits: Sendable, Equatable {
    /// Landing requests (GET and POST) per client IP address, per minute.
    public var landingPerIP = 60
    /// Landing requests per link, per minute: a phone lands once or twice; more is a scanner or a guess.
    public var landingPerLink = 20
    /// `POST /v1/sessions` per API key, per minute.
    public var createPerKey = 600
    /// Channels open at once on one session.
    public var channelsPerSession = 4
    /// Channels open at once from one client IP address (IPv6: from one /64).
    public var channelsPerIP = 100
    /// `POST /v1/sessions/{id}/finish` per session, per minute: a page calls it once or twice.
    public var finishPerSession = 10

    public init() {}

    static var settings: [(flag: String, env: String, field: WritableKeyPath<Limits, Int>)] {
        [
            ("limit-landing-per-ip", "LINKRELAY_LIMIT_LANDING_PER_IP", \.landingPerIP),
            ("limit-landing-per-link", "LINKRELAY_LIMIT_LANDING_PER_LINK", \.landingPerLink),
            ("limit-create-per-key", "LINKRELAY_LIMIT_CREATE_PER_KEY", \.createPerKey),
            ("limit-channels-per-session", "LINKRELAY_LIMIT_CHANNELS_PER_SESSION", \.channelsPerSession),
            ("limit-channels-per-ip", "LINKRELAY_LIMIT_CHANNELS_PER_IP", \.channelsPerIP),
            ("limit-finish-per-session", "LINKRELAY_LIMIT_FINISH_PER_SESSION", \.finishPerSession),
        ]
    }
}
