import Foundation

/// Where the relay's log lines go: a file descriptor (standard error), written by a thread of its own.
///
/// A line is appended to a buffer and the caller goes on; the thread writes what has gathered, many
/// lines to a `write`. So a log line costs a request no system call, and a write that waits (a
/// file while the disk syncs, a pipe its reader has stopped reading) holds up no request.
///
/// After each write the thread lets lines gather for `gathering` before it looks again. A line that
/// finds it waiting wakes it at once, but under load the lines go out in a write every `gathering`,
/// not one each: waking the thread for every line costs a system call on both sides of each wake-up,
/// on the event loops' cores. It sleeps rather than waits with a deadline, so that a step of the wall
/// clock cannot stretch the pause.
///
/// The buffer holds at most `capacity` bytes. Lines that find it full are dropped and counted, and the
/// count is written in their place as soon as there is room: the relay never waits for its log.
public final class LogOutput: TextOutputStream, @unchecked Sendable {
    /// Standard error, as the `linkrelay` command logs.
    public static let standardError = LogOutput(fileDescriptor: STDERR_FILENO)

    private let output: FileHandle
    private let capacity: Int
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var dropped = 0
    private var writing = false
    private static let gathering: TimeInterval = 0.01

    /// `capacity`: the bytes that may wait to be written before lines are dropped.
    /// The output and its thread last as long as the process.
    public init(fileDescriptor: Int32, capacity: Int = 4 << 20) {
        self.output = FileHandle(fileDescriptor: fileDescriptor, closeOnDealloc: false)
        self.capacity = capacity
        let thread = Thread { self.writeForever() }
        thread.name = "log output"
        thread.start()
    }

    public func write(_ string: String) {
        condition.lock()
        defer { condition.unlock() }
        guard pending.count + string.utf8.count <= capacity else {
            dropped += 1
            return
        }
        // The thread, and any `flush`, share the condition. While the thread pauses after a write it is
        // not waiting, and a broadcast with no one waiting makes no system call.
        if pending.isEmpty { condition.broadcast() }
        pending.append(contentsOf: string.utf8)
    }

    /// Returns once every line written before the call is out of the buffer, so that the last lines
    /// before the process exits are not lost; or after `timeout` seconds, so that an output that takes
    /// nothing does not keep the process from exiting. False then.
    @discardableResult
    public func flush(timeout: TimeInterval = 2) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !pending.isEmpty || writing || dropped > 0 {
            guard condition.wait(until: deadline) else { return false }
        }
        return true
    }

    private func writeForever() {
        var batch: [UInt8] = []
        while true {
            condition.lock()
            while pending.isEmpty && dropped == 0 { condition.wait() }
            swap(&batch, &pending)
            if dropped > 0 {
                batch.append(
                    contentsOf: "linkrelay: \(dropped) log lines dropped: the log output was not keeping up\n".utf8)
                dropped = 0
            }
            writing = true
            condition.unlock()
            // Partial and interrupted writes are written on; on a closed or failing output a log line
            // has nowhere better to go.
            try? output.write(contentsOf: batch)
            batch.removeAll(keepingCapacity: batch.count <= 64 << 10)
            condition.lock()
            writing = false
            condition.broadcast()  // wakes `flush`
            condition.unlock()
            Thread.sleep(forTimeInterval: Self.gathering)
        }
    }
}
