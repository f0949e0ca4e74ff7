import Foundation
import NevisAPI
import Testing

@testable import NevisSandbox

/// The Access App page: opening a link or a payload, answering, the pending list, the notices.
@Suite struct AccessAppPageTests {
    static let hostileMessage = #"Pay <script>alert("x")</script> & co's "fee""#
    static let escapedMessage = "Pay &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co&#39;s &quot;fee&quot;"

    @Test func daveApprovesOnThePage() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(dispatcher: "link", username: "dave", message: Self.hostileMessage)
        let sessionId = try #require(dispatched.sessionId)
        let link = try #require(dispatched.dispatcherInformation?.response)

        let page = try await client.open(link)
        #expect(page.status == 200)
        #expect(page.contentType == "text/html; charset=utf-8")
        #expect(page.text.contains(Self.escapedMessage))
        #expect(!page.text.contains("<script>"))
        #expect(page.text.contains(#"action="\#(publicBase)/sandbox/nevis/app/answer""#))
        #expect(page.text.contains(#"name="answer" value="approve""#) && page.text.contains(#"value="deny""#))
        #expect(page.header("Content-Security-Policy")?.contains("default-src 'none'") == true)
        #expect(page.header("Cache-Control") == "no-store")
        // Opening is the app redeeming the token.
        #expect(try await client.fidoStatus(sessionId).status == "clientAuthenticating")

        let answered = try await client.answer(token: try #require(dispatched.token), "approve")
        #expect(answered.status == 200 && answered.text.contains("Approved"))
        let status = try await client.fidoStatus(sessionId)
        #expect(status.status == "succeeded" && status.userId == dave.userId)

        let again = try await client.answer(token: try #require(dispatched.token), "deny")
        #expect(again.status == 409 && again.text.contains("already approved"))
        #expect(try await client.open(link).status == 409)
    }

    @Test func daveDeniesAPushFromHisPendingList() async throws {
        let client = NevisTestClient()
        let first = try await client.approval(
            AuthCloudApprovalRequest(channel: "push", username: "dave", prompt: true, message: "Pay <b>CHF 1</b>"))
        client.clock.advance(1)
        let second = try await client.approval(
            AuthCloudApprovalRequest(channel: "push", username: "dave", prompt: true, message: "Pay CHF 2"))
        _ = try await client.approval(AuthCloudApprovalRequest(channel: "push", username: "alice", message: "Alice's"))

        let list = try await client.page("user=dave")
        #expect(list.status == 200)
        #expect(list.text.contains("Pay &lt;b&gt;CHF 1&lt;/b&gt;") && list.text.contains("Pay CHF 2"))
        #expect(!list.text.contains("Alice"))
        let newest = try #require(list.text.range(of: "Pay CHF 2"))
        #expect(newest.lowerBound < list.text.range(of: "CHF 1")!.lowerBound)
        // Listing redeems nothing: Auth Cloud says pending either way, the operation stays open.
        #expect(try await client.authStatus(first.statusToken).status == "pending")

        let token = try #require(client.sandbox.pendingOperations(of: dave).last?.token)
        let denied = try await client.answer(token: token, "deny", user: "dave")
        #expect(denied.status == 200 && denied.text.contains("Denied"))
        #expect(denied.text.contains("\(publicBase)/sandbox/nevis/app?user=dave"))
        #expect(try await client.authStatus(first.statusToken).status == "failed")
        #expect(try await client.authStatus(second.statusToken).status == "pending")
        let after = try await client.page("user=dave")
        #expect(!after.text.contains("CHF 1") && after.text.contains("Pay CHF 2"))
    }

    @Test func opensAPastedPayload() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(dispatcher: "png-qr-code", username: "dave", message: "Scanned")
        let token = try #require(dispatched.token)
        let payload = client.sandbox.encodedPayload(token: token)
        #expect(!payload.contains("=") && !payload.contains("+") && !payload.contains("/"))
        let page = try await client.page("payload=\(payload)")
        #expect(page.status == 200 && page.text.contains("Scanned"))
        let sessionId = try #require(dispatched.sessionId)
        #expect(try await client.fidoStatus(sessionId).status == "clientAuthenticating")
    }

    @Test func decodesWhatThePhoneIsGiven() throws {
        let json =
            #"{"nma_data":{"token":"b4b07559-f934-4597-a1c5-44d89f691e8f","redeem_url":"https://fido.example/nevisfido/token/redeem/authentication"},"nma_data_content_type":"application/json","nma_data_version":"1"}"#
        let encoded = NevisSandbox.base64URL(Array(json.utf8))
        let expected = NevisAppPayload(
            token: "b4b07559-f934-4597-a1c5-44d89f691e8f",
            redeemURL: "https://fido.example/nevisfido/token/redeem/authentication")
        #expect(NevisSandbox.decodePayload(encoded) == expected)
        #expect(NevisSandbox.decodePayload(" \(encoded)\n") == expected)
        #expect(NevisSandbox.decodePayload(json) == expected)
        #expect(NevisSandbox.decodePayload("https://x.example/open?dispatchTokenResponse=\(encoded)") == expected)
        #expect(NevisSandbox.decodePayload("nevisaccess://x?dispatchTokenResponse=\(encoded)&other=1") == expected)
        let padded = Data(json.utf8).base64EncodedString()
        #expect(NevisSandbox.decodePayload(padded) == expected)
        #expect(NevisSandbox.decodePayload("not a payload") == nil)
        #expect(NevisSandbox.decodePayload(NevisSandbox.base64URL(Array(#"{"token":"x"}"#.utf8))) == nil)
    }

    @Test func saysWhenThereIsNothingToAnswer() async throws {
        let client = NevisTestClient(tokenLifetime: 60)
        let unknown = try await client.open(
            "\(publicBase)/sandbox/nevis/open?dispatchTokenResponse=" + client.sandbox.encodedPayload(token: "nope"))
        #expect(unknown.status == 404 && unknown.text.contains("Unknown operation"))
        let garbage = try await client.page("payload=%3Cscript%3E")
        #expect(garbage.status == 400 && !garbage.text.contains("<script>"))
        #expect(try await client.answer(token: "nope", "approve").status == 404)
        #expect(try await client.answer(token: "nope", "maybe").status == 400)

        let expiring = try await client.approval(AuthCloudApprovalRequest(channel: "app", username: "dave"))
        client.clock.advance(60)
        let expired = try await client.open(try #require(expiring.appLinkUri))
        #expect(expired.status == 410 && expired.text.contains("expired"))
        let late = try await client.answer(token: try token(in: try #require(expiring.appLinkUri)), "approve")
        #expect(late.status == 410)
        #expect(try await client.authStatus(expiring.statusToken).status == "failed")
    }

    @Test func scriptedUsersAnswerByThemselves() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "app", username: "alice"))
        let link = try #require(started.appLinkUri)
        let page = try await client.open(link)
        #expect(page.status == 200 && page.text.contains("answers by itself") && !page.text.contains("Approve"))
        #expect(try await client.answer(token: try token(in: link), "deny").status == 409)
        let answers = try await (1...3).asyncMap { _ in try await client.authStatus(started.statusToken).status }
        #expect(answers == ["pending", "pending", "succeeded"])
    }

    @Test func aHeadRedeemsNothing() async throws {
        let client = NevisTestClient()
        let dispatched = try await client.dispatch(dispatcher: "link", username: "dave")
        let link = try #require(dispatched.dispatcherInformation?.response)
        let head = try await client.send("HEAD", String(link.dropFirst(publicBase.count)), contentType: nil)
        #expect(head.status == 200)
        let sessionId = try #require(dispatched.sessionId)
        #expect(try await client.fidoStatus(sessionId).status == "tokenCreated")
    }

    @Test func theHomePageOpensCodesAndListsTheTestUsers() async throws {
        let client = NevisTestClient()
        let home = try await client.send("GET", "/sandbox/nevis/app", accept: "text/html", contentType: nil)
        #expect(home.status == 200)
        #expect(home.text.contains(#"<textarea id="payload" name="payload""#))
        for user in NevisTestUser.all { #expect(home.text.contains(user.userId)) }
        let stranger = try await client.page("user=%3Cb%3Emallory")
        #expect(stranger.status == 404 && stranger.text.contains("&lt;b&gt;mallory"))
        #expect(try await client.page("user=carol").text.contains("no registered device"))
    }
}
