import NIOCore
import NIOPosix

/// An event loop as a task's executor. A handler's task runs on the loop that reads and writes its
/// connection: each step between two awaits (the store's answer, Prove's) is queued on that loop
/// instead of on Swift's global pool, which saves two thread switches per request.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let (job, executor) = (UnownedJob(job), asUnownedTaskExecutor())
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}

extension EventLoopTaskExecutor {
    /// One executor per loop of NIO's shared group, made once: a task's executor preference does not
    /// keep its executor alive, and these live as long as the process.
    private static let shared = MultiThreadedEventLoopGroup.singleton.makeIterator().map(EventLoopTaskExecutor.init)

    /// The executor of the shared group's loop this thread runs, else of one of its loops.
    ///
    /// A task that prefers it runs its steps on that loop as the task's own executor. Without a
    /// preference the steps would run on the loop too (NIO is Swift's global executor here), but as
    /// the loop's serial executor, which every call into a `nonisolated` async function must leave and
    /// come back to: a job queued on the loop each time, several per verification.
    static var current: EventLoopTaskExecutor {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        return shared.first { $0.eventLoop === loop } ?? shared[0]
    }
}
