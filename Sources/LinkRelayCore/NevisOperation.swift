import Foundation

/// A Nevis session's operation at Nevis. `handle`, `qrCode` and `appLink` are bearer secrets for the hold:
/// the handle stays in the store, the other two go to the desktop page only; none reaches a log.
public struct NevisOperation: Codable, Sendable, Equatable {
    /// What Nevis's status question takes (Auth Cloud's `statusToken`, nevisFIDO's `sessionId`); empty until
    /// Nevis answered the start.
    public var handle: String
    /// `app` (QR code and link) or `push`.
    public var channel: String
    public var username: String?
    public var userId: String?
    public var transactionId: String?
    public var qrCode: String?
    public var appLink: String?
    /// nevisFIDO's `dispatchResult` when the dispatch failed (HTTP said 200): the session fails with it.
    public var dispatchFailure: String?

    /// Nevis has answered the start.
    public var isStarted: Bool { !handle.isEmpty || dispatchFailure != nil }

    public init(
        handle: String = "", channel: String, username: String? = nil, userId: String? = nil,
        transactionId: String? = nil, qrCode: String? = nil, appLink: String? = nil, dispatchFailure: String? = nil
    ) {
        self.dispatchFailure = dispatchFailure
        self.handle = handle
        self.channel = channel
        self.username = username
        self.userId = userId
        self.transactionId = transactionId
        self.qrCode = qrCode
        self.appLink = appLink
    }
}

/// What Nevis said of a finished operation (`result.nevis`).
public struct NevisResult: Codable, Sendable, Equatable {
    public var transactionId: String?
    public var userId: String?
    public var username: String?
    /// Nevis's last `status` (`succeeded`, `failed`, `unknown`, …), or the dispatch's failure.
    public var status: String

    public init(transactionId: String? = nil, userId: String? = nil, username: String? = nil, status: String) {
        self.transactionId = transactionId
        self.userId = userId
        self.username = username
        self.status = status
    }
}
