import Foundation
import NevisAPI
import ProveSandbox
import Testing

@testable import NevisSandbox

/// Faults per endpoint, set over the control routes and in code.
@Suite(.timeLimit(.minutes(1))) struct NevisFaultTests {
    @Test func anErrorForTheNextCalls() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(AuthCloudApprovalRequest(channel: "app", username: "alice"))
        let put = try await client.send(
            "PUT", "/sandbox/nevis/faults/status", body: #"{"status":503,"times":2,"retryAfter":1}"#)
        #expect(put.status == 204)
        let listed = try decode(NevisFaultList.self, try await client.send("GET", "/sandbox/nevis/faults"))
        #expect(listed.faults["status"] == NevisFault(SandboxFault(status: 503, retryAfter: 1), times: 2))

        let body = #"{"statusToken":"\#(started.statusToken)"}"#
        for _ in 1...2 {
            let failed = try await client.send("POST", "/sandbox/nevis/api/v1/status", body: body)
            #expect(failed.status == 503 && failed.retryAfter == 1)
            #expect(try decode(ErrorBody.self, failed).error == "Service Unavailable")
        }
        // The failing calls changed nothing: the script starts at the first answered question.
        #expect(try await client.authStatus(started.statusToken).status == "pending")
        #expect(client.sandbox.faults.isEmpty)
        #expect(client.sandbox.callCount("status") == 3)
        // Other endpoints were never faulted.
        #expect(try await client.approval(#"{"channel":"push","username":"bob"}"#).status == 200)
    }

    @Test func aDispatchErrorForTheNextDispatch() async throws {
        let client = NevisTestClient()
        #expect(
            try await client.send("PUT", "/sandbox/nevis/faults/dispatch", body: #"{"dispatchError":true,"times":1}"#)
                .status == 204)
        let failed = try await client.dispatch(username: "alice")
        #expect(failed.dispatchResult == "dispatchError" && failed.sessionId == nil && failed.token == nil)
        #expect(client.sandbox.storedOperations == 0)
        #expect(try await client.dispatch(username: "alice").dispatchResult == "dispatched")
    }

    @Test func aStarFaultAndItsOwnEndpoints() async throws {
        let client = NevisTestClient()
        try client.sandbox.setFault(.error(status: 500), for: .all)
        try client.sandbox.setFault(NevisFault(), for: .approval)  // empty: clears nothing of `*`
        #expect(try await client.approval(#"{"channel":"push","username":"bob"}"#).status == 500)
        #expect(
            try await client.send("POST", "/sandbox/nevis/nevisfido/status", body: #"{"sessionId":"x"}"#).status == 500)
        // The redeem service and the app page have no fault.
        #expect(try await client.redeem("x").status == 404)
        #expect(try await client.page("user=dave").status == 200)
        // A `*` dispatchError leaves the other endpoints alone.
        try client.sandbox.setFault(.dispatchError(times: nil), for: .all)
        #expect(try await client.dispatch(username: "alice").dispatchResult == "dispatchError")
        #expect(try await client.approval(#"{"channel":"push","username":"bob"}"#).status == 200)
        #expect(try await client.send("DELETE", "/sandbox/nevis/faults").status == 204)
        #expect(client.sandbox.faults.isEmpty)
    }

    @Test func refusesFaultsThatMakeNoSense() async throws {
        let client = NevisTestClient()
        for (endpoint, body) in [
            ("approval", #"{"dispatchError":true}"#), ("dispatch", #"{"dispatchError":true,"status":500}"#),
            ("status", #"{"times":0,"status":500}"#), ("status", #"{"status":200}"#), ("status", #"{"sparkle":true}"#),
            ("redeem", #"{"status":500}"#), ("status", "explode"),
        ] {
            let reply = try await client.send("PUT", "/sandbox/nevis/faults/\(endpoint)", body: body)
            #expect(reply.status == 400, "\(endpoint) \(body)")
        }
        #expect(client.sandbox.faults.isEmpty)
    }

    @Test func specItems() throws {
        let dispatch = try NevisSandbox.parseFault("dispatch:dispatch-error,times=1")
        #expect(dispatch.endpoint == "dispatch" && dispatch.fault == .dispatchError(times: 1))
        let status = try NevisSandbox.parseFault("fido-status:error=1,status=503,times=2")
        #expect(status.fault == NevisFault(SandboxFault(errorRate: 1, status: 503), times: 2))
        #expect(status.fault.description == "error=1.0,status=503,times=2")
        #expect(try NevisSandbox.parseFault("*:latency=250ms").fault == .latency(.milliseconds(250)))
        #expect(throws: SandboxFaultError.self) { try NevisSandbox.parseFault("unify:error=1") }
        #expect(throws: SandboxFaultError.self) { try NevisSandbox.parseFault("status:times=2") }
        #expect(throws: SandboxFaultError.self) { try NevisSandbox.parseFault("status") }
        // Items as a PUT body.
        #expect(try NevisSandbox.decodeFault(Array("drop".utf8)) == .drop)
    }

    @Test func theErrorRateRuleIsProves() throws {
        let half = NevisFault(SandboxFault(errorRate: 0.5, status: 502))
        #expect((1...4).map(half.fails(requestNumber:)) == [false, true, false, true])
        let halfDispatches = NevisFault(SandboxFault(errorRate: 0.5), dispatchError: true)
        try halfDispatches.validate()
        #expect(halfDispatches.failure == .dispatchError)
        #expect((1...4).map(halfDispatches.fails(requestNumber:)) == [false, true, false, true])
        #expect((1...2).map(NevisFault.dispatchError().fails(requestNumber:)) == [true, true])
    }

    @Test func dropsAndMalformedAnswers() async throws {
        let client = NevisTestClient()
        try client.sandbox.setFault(.drop, for: .approval)
        await #expect(throws: ConnectionDropped.self) { _ = try await client.approval(#"{"channel":"app"}"#) }
        try client.sandbox.setFault(NevisFault(.malformed), for: .approval)
        let malformed = try await client.approval(#"{"channel":"app"}"#)
        #expect(malformed.status == 200)
        #expect(throws: (any Error).self) { try decode(AuthCloudApprovalResponse.self, malformed) }
        #expect(try await client.send("DELETE", "/sandbox/nevis/faults/approval").status == 204)
        #expect(try await client.approval(#"{"channel":"app"}"#).status == 200)
    }

    @Test func aLatencyDelaysTheAnswer() async throws {
        let client = NevisTestClient()
        try client.sandbox.setFault(.latency(.milliseconds(100)), for: .fidoStatus)
        let began = ContinuousClock.now
        #expect(try await client.fidoStatus("x").status == "unknown")
        #expect(ContinuousClock.now - began >= .milliseconds(100))
    }

    @Test func aHangEndsWhenItsFaultIsCleared() async throws {
        let client = NevisTestClient()
        try client.sandbox.setFault(.hang, for: .status)
        let hanging = Task { try await client.authStatus("x") }
        while client.sandbox.hangingRequests == 0 { try await Task.sleep(for: .milliseconds(5)) }
        client.sandbox.clearFault(for: .status)
        await #expect(throws: ConnectionDropped.self) { _ = try await hanging.value }
        #expect(client.sandbox.hangingRequests == 0)
    }

    @Test func aHangEndsAtShutDown() async throws {
        let client = NevisTestClient()
        try client.sandbox.setFault(.hang, for: .dispatch)
        let hanging = Task { try await client.dispatch(username: "alice") }
        while client.sandbox.hangingRequests == 0 { try await Task.sleep(for: .milliseconds(5)) }
        client.sandbox.shutDown()
        await #expect(throws: ConnectionDropped.self) { _ = try await hanging.value }
        // After the shutdown nothing is held.
        try client.sandbox.setFault(.latency(.seconds(60)), for: .fidoStatus)
        #expect(try await client.fidoStatus("x").status == "unknown")
    }
}
