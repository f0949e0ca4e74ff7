extension NevisStatus {
    /// Auth Cloud's answer. A status the reference does not name counts as pending: the hold's end settles it.
    public init(_ answer: AuthCloudStatusResponse) {
        let progress: Progress =
            switch answer.status {
            case "succeeded": .succeeded
            case "failed": .failed
            case "unknown": .unknown
            default: .pending
            }
        self.init(
            progress: progress, status: answer.status, transactionId: answer.transactionId, userId: answer.userId,
            username: answer.username)
    }

    /// nevisFIDO's answer. `clientAuthenticating` is the app having redeemed the token; a token that was
    /// never redeemed in time (`tokenTimedOut`) is a failure, whatever `status` says.
    public init(_ answer: FidoStatusResponse) {
        let progress: Progress =
            switch answer.status {
            case _ where answer.tokenInformation?.tokenResult == "tokenTimedOut" && answer.status != "succeeded":
                .failed
            case "clientAuthenticating": .redeemed
            case "succeeded": .succeeded
            case "failed": .failed
            case "unknown": .unknown
            default: .pending
            }
        self.init(progress: progress, status: answer.status, userId: answer.userId)
    }
}
