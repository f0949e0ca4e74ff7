import LinkRelayCore
import LinkRelaySupport
import Testing

@testable import LinkRelayServer

@Suite("The verifier's queue", .timeLimit(.minutes(1)))
struct VerificationQueueTests {
    /// Verifications that wait until the test lets them end, and what each saw.
    final class Verifications: Sendable {
        private struct State {
            var started: [String] = []
            var cancelled: [String] = []
            var gates: [String: CheckedContinuation<Void, Never>] = [:]
            var startWaiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?
        }
        private let state = Locked(State())

        var started: [String] { state.withLock { $0.started } }
        var cancelled: [String] { state.withLock { $0.cancelled } }

        func verify(_ id: String) async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { gate in
                    state.withLock { state in
                        state.started.append(id)
                        state.gates[id] = gate
                        if let waiter = state.startWaiter, state.started.count >= waiter.count {
                            state.startWaiter = nil
                            waiter.continuation.resume()
                        }
                    }
                }
            } onCancel: {
                // Only a verification still waiting counts as cancelled (one just let end may not have returned).
                let gate = state.withLock { state in
                    let gate = state.gates.removeValue(forKey: id)
                    if gate != nil { state.cancelled.append(id) }
                    return gate
                }
                gate?.resume()
            }
        }

        /// Returns once `count` verifications have started.
        func waitForStarts(_ count: Int) async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    guard state.started.count < count else { return true }
                    state.startWaiter = (count, continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        }

        func finish(_ id: String) { state.withLock { $0.gates.removeValue(forKey: id) }?.resume() }
    }

    @Test("Kicks before the verifier starts are kept; one task per session; stop cancels and waits")
    func lifecycle() async {
        let queue = VerificationQueue()
        let verifications = Verifications()
        queue.kick("a")
        queue.kick("b")
        queue.kick("a")
        queue.start { id in await verifications.verify(id) }
        await verifications.waitForStarts(2)
        // A kick while the session's verification runs starts nothing.
        queue.kick("a")
        queue.kick("c")
        await verifications.waitForStarts(3)
        #expect(verifications.started.sorted() == ["a", "b", "c"])

        verifications.finish("b")
        await queue.stop()
        #expect(verifications.cancelled.sorted() == ["a", "c"])

        // After the stop, kicks wait for the next start.
        queue.kick("d")
        #expect(verifications.started.count == 3)
        queue.start { id in await verifications.verify(id) }
        await verifications.waitForStarts(4)
        #expect(verifications.started.last == "d")
        await queue.stop()
    }
}
