import Foundation
import LinkRelayCore
import NIOPosix
import Testing

@testable import LinkRelayServer

@Suite("The event loops' clock", .timeLimit(.minutes(1)))
struct EventLoopClockTests {
    let clock = EventLoopClock(MultiThreadedEventLoopGroup.singleton)

    @Test("A wait ends once its moment has come, not before")
    func waitsUntilTheDeadline() async throws {
        let deadline = Date().addingTimeInterval(0.05)
        try await clock.sleep(until: deadline)
        #expect(Date() >= deadline)
    }

    @Test("A moment already past returns at once")
    func pastDeadline() async throws {
        try await clock.sleep(until: Date(timeIntervalSince1970: 0))
    }

    @Test("Cancelling an hour's wait ends it with CancellationError, whether the wait had begun or not")
    func cancellation() async throws {
        let clock = clock
        let hour = Date().addingTimeInterval(3600)
        let waiting = Task { try await clock.sleep(until: hour) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }

        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: hour)
        }
        await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
    }
}
