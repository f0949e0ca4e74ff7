import NIOCore
import NIOPosix
import Testing

@testable import LinkRelayServer

@Suite("A connection's task on its event loop", .timeLimit(.minutes(1)))
struct EventLoopTaskExecutorTests {
    @Test("Every step of the task runs on the loop, before and after awaits that resume elsewhere")
    func stepsRunOnTheLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let (loop, other) = (group.next(), group.next())
        let executor = EventLoopTaskExecutor(loop)
        let steps = await Task(executorPreference: executor) {
            var onLoop = [loop.inEventLoop]
            // A future completed on another loop, and a child task: both come back to this loop.
            _ = try? await other.submit { 1 }.get()
            onLoop.append(loop.inEventLoop)
            async let child = loop.inEventLoop
            onLoop.append(await child)
            await Task.yield()
            onLoop.append(loop.inEventLoop)
            return onLoop
        }.value
        #expect(steps == [true, true, true, true])
        try await group.shutdownGracefully()
    }
}
