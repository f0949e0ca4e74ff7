import Foundation
import NevisAPI
import Testing

@testable import NevisSandbox

/// Authentication Cloud's approval and status, through the routes.
@Suite struct AuthCloudSandboxTests {
    @Test func aliceApprovesAtTheThirdStatusQuestion() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(
            AuthCloudApprovalRequest(channel: "app", username: "alice", prompt: true, message: "Pay CHF 120.00"))
        #expect(!started.statusToken.isEmpty)
        #expect(started.transactionId.flatMap(UUID.init(uuidString:)) != nil)
        #expect(started.userId == alice.userId && started.username == "alice")
        #expect(started.qrCode?.dataUri.hasPrefix("data:image/png;base64,") == true)
        let link = try #require(started.appLinkUri)
        #expect(link.hasPrefix("\(publicBase)/sandbox/nevis/open?dispatchTokenResponse="))
        let payload = try #require(NevisSandbox.decodePayload(link))
        #expect(payload.data.redeemURL == "\(publicBase)/sandbox/nevis/nevisfido/token/redeem/authentication")
        #expect(payload.contentType == "application/json" && payload.version == "1")

        let answers = try await (1...4).asyncMap { _ in try await client.authStatus(started.statusToken) }
        #expect(answers.map(\.status) == ["pending", "pending", "succeeded", "succeeded"])
        #expect(answers.allSatisfy { $0.transactionId == started.transactionId && $0.userId == alice.userId })
        #expect(answers[2].username == "alice")
    }

    @Test func bobDeniesAtTheThirdStatusQuestion() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "push", username: "bob"))
        #expect(started.qrCode == nil && started.appLinkUri == nil)
        let answers = try await (1...3).asyncMap { _ in try await client.authStatus(started.statusToken) }
        #expect(answers.map(\.status) == ["pending", "pending", "failed"])
        #expect(NevisStatus(answers[2]).progress == .failed)
    }

    @Test func namesUsersByUserIdToo() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(
            AuthCloudApprovalRequest(channel: "push", userId: alice.userId.uppercased()))
        #expect(started.username == "alice")
        let mismatch = try await client.approval(#"{"channel":"push","username":"alice","userId":"\#(bob.userId)"}"#)
        #expect(mismatch.status == 400)
    }

    @Test func carolHasNoDeviceAndStrangersAreUnknown() async throws {
        let client = NevisTestClient()
        let carol = try await client.approval(#"{"channel":"app","username":"carol"}"#)
        #expect(carol.status == 400)
        #expect(carol.contentType == "application/json")
        #expect(try decode(ErrorBody.self, carol).message.contains("no registered authenticator"))
        let stranger = try await client.approval(#"{"channel":"app","username":"mallory"}"#)
        #expect(stranger.status == 404)
        #expect(try decode(ErrorBody.self, stranger).status == 404)
        let unknownId = try await client.approval(
            #"{"channel":"push","userId":"00000000-0000-4000-8000-000000000000"}"#)
        #expect(unknownId.status == 404)
        #expect(client.sandbox.storedOperations == 0)
    }

    @Test func wantsTheAccessKey() async throws {
        let client = NevisTestClient()
        for key in [nil, "wrong-key"] {
            let reply = try await client.approval(#"{"channel":"app","username":"alice"}"#, key: key)
            #expect(reply.status == 401)
            #expect(try decode(ErrorBody.self, reply).error == "Unauthorized")
        }
        // The status token is the status question's credential: no key needed.
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "app", username: "alice"))
        #expect(try await client.authStatus(started.statusToken).status == "pending")
    }

    @Test(arguments: [
        (#"{"channel":"app","username":"alice","prompt":true}"#, "message is required"),
        (#"{"channel":"app","username":"alice","prompt":true,"message":""}"#, "message is required"),
        (#"{"channel":"app","username":"alice","message":"<p>Pay</p>"}"#, "unsupported tag <p>"),
        (#"{"channel":"app","username":"alice","message":"<div>Pay</div>"}"#, "unsupported tag <div>"),
        (#"{"channel":"app","username":"alice","message":"<html>Pay <b class=\"x\">1</b></html>"}"#, "attributes"),
        (#"{"channel":"app","username":"alice","message":"Pay <!-- x --> 1"}"#, "comments"),
        (#"{"channel":"push","prompt":true,"message":"Pay"}"#, "username or userId is required"),
        (#"{"channel":"push","username":"alice","authenticatorId":"*"}"#, "channel app only"),
        (#"{"channel":"sms","username":"alice"}"#, "channel must be app or push"),
        (#"{"username":"alice"}"#, "channel is required"),
        (#"{"channel":"app""#, "not valid JSON"),
    ])
    func refusesWhatNevisRefuses(body: String, problem: String) async throws {
        let client = NevisTestClient()
        let reply = try await client.approval(body)
        #expect(reply.status == 400)
        let message = try decode(ErrorBody.self, reply).message
        #expect(message.contains(problem), "\(message)")
    }

    @Test(arguments: [
        "Pay CHF 120.00 to ACME", "<html>Pay <b>CHF 120.00</b> to ACME</html>", "1 < 2 and 3 > 2", "a<b",
        "<html>Line one<br>line two <i>now</i> <u>please</u><br/></html>",
    ])
    func takesPlainTextAndTheAllowedTags(message: String) async throws {
        let client = NevisTestClient()
        let body = String(
            decoding: try JSONEncoder().encode(
                AuthCloudApprovalRequest(channel: "app", username: "dave", prompt: true, message: message)),
            as: UTF8.self)
        let reply = try await client.approval(body)
        #expect(reply.status == 200, "\(reply.text)")
    }

    @Test func usernamelessNamesTheUserOnlyOnceSucceeded() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "app"))
        #expect(started.userId == nil && started.username == nil)
        let link = try #require(started.appLinkUri)
        for _ in 1...3 {
            let status = try await client.authStatus(started.statusToken)
            #expect(status.status == "pending" && status.userId == nil && status.username == nil)
        }
        // The app opens the link, then the person approves.
        #expect(try await client.open(link).status == 200)
        #expect(try await client.authStatus(started.statusToken).userId == nil)
        #expect(try await client.answer(token: try token(in: link), "approve").status == 200)
        let done = try await client.authStatus(started.statusToken)
        #expect(done.status == "succeeded" && done.userId == erin.userId && done.username == "erin")
    }

    @Test func usernamelessDenialNamesNobody() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "app"))
        let link = try #require(started.appLinkUri)
        #expect(try await client.answer(token: try token(in: link), "deny").status == 200)
        let done = try await client.authStatus(started.statusToken)
        #expect(done.status == "failed" && done.userId == nil && done.username == nil)
    }

    @Test func unknownStatusTokensAreUnknown() async throws {
        let client = NevisTestClient()
        let status = try await client.authStatus("eyJ-not-issued")
        #expect(status.status == "unknown" && status.transactionId == nil)
        #expect(NevisStatus(status).progress == .unknown)
        // A nevisFIDO session id is no status token.
        let dispatched = try await client.dispatch(username: "alice")
        let sessionId = try #require(dispatched.sessionId)
        #expect(try await client.authStatus(sessionId).status == "unknown")
    }

    @Test func anUnansweredOperationFailsAfterTheTokenLifetime() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "app", username: "dave"))
        client.clock.advance(NevisSandbox.defaultTokenLifetime - 1)
        #expect(try await client.authStatus(started.statusToken).status == "pending")
        client.clock.advance(1)
        #expect(try await client.authStatus(started.statusToken).status == "failed")
        // A scripted user past the lifetime times out as well, whatever the script would say.
        let alices = try await client.approval(AuthCloudApprovalRequest(channel: "app", username: "alice"))
        client.clock.advance(NevisSandbox.defaultTokenLifetime)
        let answers = try await (1...3).asyncMap { _ in try await client.authStatus(alices.statusToken).status }
        #expect(answers == ["failed", "failed", "failed"])
    }

    @Test func forgetsOperationsAfterTheRetention() async throws {
        let client = NevisTestClient()
        let old = try await client.approval(AuthCloudApprovalRequest(channel: "push", username: "alice"))
        client.clock.advance(NevisSandbox.retention + 1)
        #expect(try await client.authStatus(old.statusToken).status == "unknown")
        _ = try await client.approval(AuthCloudApprovalRequest(channel: "push", username: "alice"))
        #expect(client.sandbox.storedOperations == 1)
    }

    @Test func knowsNoOtherPathOrMethod() async throws {
        let client = NevisTestClient()
        await #expect(throws: NevisTestClient.NotRouted.self) {
            _ = try await client.send("POST", "/sandbox/nevis/api/v1/nothing")
        }
        await #expect(throws: NevisTestClient.NotRouted.self) {
            _ = try await client.send("POST", "/sandbox/prove/v3/unify")
        }
        #expect(try await client.send("GET", "/sandbox/nevis/api/v1/approval").status == 405)
    }
}

extension Sequence {
    /// `map` with an async transform, one element after the other.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
