import Foundation
import NevisAPI
import Testing

@testable import NevisSandbox

/// nevisFIDO's dispatch, status and redeem services, through the routes.
@Suite struct FidoSandboxTests {
    @Test func aliceApprovesAtTheThirdStatusQuestion() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(username: "alice", message: "Pay CHF 120.00")
        #expect(dispatched.dispatchResult == "dispatched")
        #expect(dispatched.dispatcherInformation?.name == "link-png-qr-code")
        let png = try #require(dispatched.dispatcherInformation?.response.flatMap { Data(base64Encoded: $0) })
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        let sessionId = try #require(dispatched.sessionId)
        let answers = try await (1...4).asyncMap { _ in try await client.fidoStatus(sessionId) }
        #expect(answers.map(\.status) == ["tokenCreated", "clientAuthenticating", "succeeded", "succeeded"])
        #expect(
            answers.map(\.tokenInformation?.tokenResult) == [nil, "tokenRedeemed", "tokenRedeemed", "tokenRedeemed"])
        #expect(answers.allSatisfy { $0.userId == alice.userId && $0.timestamp != nil })
        #expect(answers.map { NevisStatus($0).progress } == [.pending, .redeemed, .succeeded, .succeeded])
        #expect(answers[2].uafStatusCode == 1200)
    }

    @Test func bobDeniesAtTheThirdStatusQuestion() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(dispatcher: "link", username: "bob")
        let sessionId = try #require(dispatched.sessionId)
        let answers = try await (1...3).asyncMap { _ in try await client.fidoStatus(sessionId).status }
        #expect(answers == ["tokenCreated", "clientAuthenticating", "failed"])
    }

    @Test func saysWhyADispatchDidNotGo() async throws {
        let client = NevisTestClient()
        #expect(try await client.dispatch(username: "carol").dispatchResult == "dispatchTargetNotFound")
        #expect(try await client.dispatch(username: "mallory").dispatchResult == "userNotFound")
        let unknown = try await client.dispatch(dispatcher: "carrier-pigeon", username: "alice")
        #expect(unknown.dispatchResult == "dispatcherNotFound" && unknown.sessionId == nil && unknown.token == nil)
        // A push goes to a registered device, named by the user's id.
        let push = "firebase-cloud-messaging"
        #expect(
            try await client.dispatch(dispatcher: push, username: "dave").dispatchResult == "dispatchTargetNotFound")
        #expect(
            try await client.dispatch(dispatcher: push, username: "dave", target: alice.userId).dispatchResult
                == "dispatchTargetNotFound")
        #expect(
            try await client.dispatch(dispatcher: push, target: "ca401000-0000-4000-8000-000000000003").dispatchResult
                == "dispatchTargetNotFound")
        let pushed = try await client.dispatch(dispatcher: push, username: "dave", target: dave.userId)
        #expect(pushed.dispatchResult == "dispatched" && pushed.dispatcherInformation?.response == nil)
        #expect(client.sandbox.storedOperations == 1)
    }

    @Test func theLinkDispatcherAnswersTheLink() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(dispatcher: "link", username: "dave")
        let link = try #require(dispatched.dispatcherInformation?.response)
        #expect(link.hasPrefix("\(publicBase)/sandbox/nevis/open?dispatchTokenResponse="))
        #expect(try token(in: link) == dispatched.token)
    }

    @Test func wantsJSON() async throws {
        let client = NevisTestClient()
        let path = "/sandbox/nevis/nevisfido/token/dispatch/authentication"
        let body = #"{"dispatcher":"link","getUafRequest":{"op":"Auth"}}"#
        #expect(try await client.send("POST", path, body: body, accept: "text/html").status == 406)
        #expect(try await client.send("POST", path, body: body, contentType: "text/plain").status == 415)
        #expect(try await client.send("POST", path, body: body, contentType: nil).status == 415)
        let fine = try await client.send(
            "POST", path, body: body, accept: nil, contentType: "application/json;charset=UTF-8")
        #expect(fine.status == 200)
        #expect(try decode(DispatchTokenResponse.self, fine).dispatchResult == "dispatched")
        let status = try await client.send(
            "POST", "/sandbox/nevis/nevisfido/status", body: #"{"sessionId":"x"}"#, accept: "text/plain")
        #expect(status.status == 406)
        #expect(try await client.send("POST", path, body: #"{"dispatcher":"link"}"#).status == 400)
        let register = #"{"dispatcher":"link","getUafRequest":{"op":"Reg"}}"#
        #expect(try await client.send("POST", path, body: register).status == 400)
        let badContext = #"{"dispatcher":"link","getUafRequest":{"op":"Auth","context":"{nope"}}"#
        #expect(try await client.send("POST", path, body: badContext).status == 400)
    }

    @Test func theAppRedeemsTheTokenOnce() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(username: "dave", message: "Pay")
        let sessionId = try #require(dispatched.sessionId)
        #expect(try await client.fidoStatus(sessionId).status == "tokenCreated")
        let redeemed = try await client.redeem(try #require(dispatched.token))
        #expect(redeemed.status == 200)
        let uaf = try decode(ReturnUAFRequest.self, redeemed)
        #expect(uaf.statusCode == 1200 && uaf.op == "Auth" && uaf.lifetimeMillis == 300_000)
        #expect(uaf.uafRequest.contains(#""challenge""#))
        let status = try await client.fidoStatus(sessionId)
        #expect(status.status == "clientAuthenticating" && status.tokenInformation?.tokenResult == "tokenRedeemed")
        #expect(try await client.redeem(dispatched.token ?? "").status == 410)
        #expect(try await client.redeem("not-a-token").status == 404)
        let html = try await client.send(
            "POST", "/sandbox/nevis/nevisfido/token/redeem/authentication", body: "{}", accept: "text/html")
        #expect(html.status == 406)
    }

    @Test func unknownSessionsAreUnknown() async throws {
        let client = NevisTestClient()
        let status = try await client.fidoStatus("00000000-0000-4000-8000-000000000000")
        #expect(status.status == "unknown" && NevisStatus(status).progress == .unknown)
        // An Auth Cloud status token is no session id.
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "push", username: "alice"))
        #expect(try await client.fidoStatus(started.statusToken).status == "unknown")
    }

    @Test func anUnredeemedTokenTimesOut() async throws {
        let client = NevisTestClient(tokenLifetime: 60)
        let dispatched = try await client.dispatch(username: "dave")
        let sessionId = try #require(dispatched.sessionId)
        client.clock.advance(59)
        #expect(try await client.fidoStatus(sessionId).tokenInformation?.tokenResult == nil)
        client.clock.advance(1)
        let status = try await client.fidoStatus(sessionId)
        #expect(status.status == "tokenCreated" && status.tokenInformation?.tokenResult == "tokenTimedOut")
        #expect(NevisStatus(status).progress == .failed)
        #expect(try await client.redeem(dispatched.token ?? "").status == 410)
    }

    @Test func aRedeemedButUnansweredOperationFailsAfterItsLifetime() async throws {
        let client = NevisTestClient(tokenLifetime: 60)
        let dispatched = try await client.dispatch(username: "dave")
        _ = try await client.redeem(try #require(dispatched.token))
        client.clock.advance(60)
        let status = try await client.fidoStatus(try #require(dispatched.sessionId))
        #expect(status.status == "failed" && status.tokenInformation?.tokenResult == "tokenRedeemed")
    }

    @Test func usernamelessNamesTheUserOnlyOnceSucceeded() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(dispatcher: "link")
        let sessionId = try #require(dispatched.sessionId)
        #expect(try await client.fidoStatus(sessionId).userId == nil)
        let link = try #require(dispatched.dispatcherInformation?.response)
        _ = try await client.open(link)
        let authenticating = try await client.fidoStatus(sessionId)
        #expect(authenticating.status == "clientAuthenticating" && authenticating.userId == nil)
        #expect(try await client.answer(token: try token(in: link), "approve").status == 200)
        let done = try await client.fidoStatus(sessionId)
        #expect(done.status == "succeeded" && done.userId == erin.userId)
    }
}
