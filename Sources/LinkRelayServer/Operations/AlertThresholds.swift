/// The numbers of the alert rules in `deploy/prometheus/linkrelay-alerts.yml`, for the ops page: a figure
/// over one of them is coloured as the alert would fire on it, so the page and the pager agree.
/// `AlertThresholdsTests` reads the rules file and fails when a number here and there differ.
enum AlertThresholds {
    /// `LinkRelayExpiryRatioHigh`: expired / ended over 15 minutes, once at least `expiryMinimumEnded` ended.
    static let expiryRatio = 0.5
    static let expiryMinimumEnded = 20
    /// `LinkRelayProveErrorRateHigh`: an endpoint's share of 5xx, 429, timeouts and errors over 5 minutes.
    static let proveErrorRate = 0.05
    static let proveErrorWindowMinutes = 5
    /// `LinkRelayProveSlow`: an endpoint's 99th percentile, in seconds.
    static let proveSlowQuantile = 0.99
    static let proveSlowSeconds = 2.0
    /// `LinkRelayNevisErrorRateHigh`: an endpoint's share of 5xx, 429, timeouts and errors over 5 minutes.
    static let nevisErrorRate = 0.05
    static let nevisErrorWindowMinutes = 5
    /// `LinkRelayWebhookBacklog`: the oldest pending message's age, in seconds.
    static let webhookOldestPendingSeconds = 900.0
    /// `LinkRelayWebhookQueueDeep`: messages pending.
    static let webhookQueueDepth = 1000
    /// `LinkRelayConnectionsNearCap`: open connections / `--max-connections`.
    static let connectionsRatio = 0.8
    /// `LinkRelayServerErrorRatioHigh`: 5xx / every answer over 5 minutes, once at least
    /// `serverErrorMinimumAnswers` were given.
    static let serverErrorRatio = 0.05
    static let serverErrorMinimumAnswers = 20
    static let serverErrorWindowMinutes = 5
}
