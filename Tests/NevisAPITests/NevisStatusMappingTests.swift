import NevisAPI
import Testing

/// How each backend's status answer reads as the relay's progress: what the desktop ends up showing.
@Suite struct NevisStatusMappingTests {
    typealias Progress = NevisStatus.Progress

    static let authCloudTable: [(String, Progress)] = [
        ("pending", .pending),
        ("succeeded", .succeeded),
        ("failed", .failed),
        ("unknown", .unknown),
        // A status the reference does not name waits for the hold's end rather than ending the session.
        ("somethingNew", .pending),
    ]

    @Test(arguments: authCloudTable)
    func authCloud(status: String, progress: Progress) {
        let answer = AuthCloudStatusResponse(transactionId: "tx-1", status: status, userId: "u-1", username: "alice")
        let mapped = NevisStatus(answer)
        #expect(mapped.progress == progress)
        #expect(mapped.status == status)
        #expect(mapped.transactionId == "tx-1")
        #expect(mapped.userId == "u-1")
        #expect(mapped.username == "alice")
    }

    /// (status, tokenResult, progress)
    static let fidoTable: [(String, String?, Progress)] = [
        ("tokenCreated", nil, .pending),
        ("clientRegistering", nil, .pending),
        ("clientAuthenticating", nil, .redeemed),
        ("succeeded", nil, .succeeded),
        ("failed", nil, .failed),
        ("unknown", nil, .unknown),
        ("somethingNew", nil, .pending),
        // A redeemed token says nothing new: the status decides.
        ("clientAuthenticating", "tokenRedeemed", .redeemed),
        ("succeeded", "tokenRedeemed", .succeeded),
        // A token nobody redeemed in time is a failure, whatever the status...
        ("tokenCreated", "tokenTimedOut", .failed),
        ("clientAuthenticating", "tokenTimedOut", .failed),
        ("unknown", "tokenTimedOut", .failed),
        // ...except a success.
        ("succeeded", "tokenTimedOut", .succeeded),
    ]

    @Test(arguments: fidoTable)
    func nevisFIDO(status: String, tokenResult: String?, progress: Progress) {
        let answer = FidoStatusResponse(
            status: status, userId: "u-1", tokenInformation: tokenResult.map { .init(tokenResult: $0) })
        let mapped = NevisStatus(answer)
        #expect(mapped.progress == progress)
        #expect(mapped.status == status)
        #expect(mapped.userId == "u-1")
    }
}
