import Foundation
import LinkRelayCore
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

/// Gives memory back to the operating system once the relay has gone quiet: first `release` lets go
/// of what is kept only for speed (the store's caches, stale timer entries), then glibc returns free
/// pages.
///
/// glibc keeps what a burst of channels or sessions freed inside its heaps, so the relay's resident
/// memory stayed at its peak long after the load was gone (190 MiB after 5,000 long-polls had
/// finished, against 41 MiB idle); `malloc_trim` releases the free pages (77 MiB). At start it keeps
/// glibc's thresholds fixed (`fixThresholds`).
///
/// A pass is not free: with 15,000 channels open, `release` and `malloc_trim` took about 30 ms, during
/// which writes, the hub and glibc's heaps waited, and every landing in that time was late. Under load
/// the memory would be taken again at once anyway. So every `interval` it looks at `activity` (which
/// grows with the relay's work) and passes only when that grew by less than `quiet` since the last
/// look: within `2 × interval` of a burst's end, not during one. (The store's cache drops an ended
/// session at the second pass after it ended, so a quiet relay has it gone within `3 × interval`.)
/// Under load that never lets up, it still passes every `longest`, so that what a burst left comes back.
struct MemoryTrim: Service {
    var clock: any RelayClock = EventLoopClock()
    var interval: TimeInterval = 10
    var activity: @Sendable () -> Int = { 0 }
    var quiet = 10
    var longest: TimeInterval = 300
    var release: @Sendable () async -> Void = {}

    /// glibc's `malloc_trim`, or nil where there is none (`malloc.h` is not in Swift's Glibc module).
    static let trim = glibc("malloc_trim", as: (@convention(c) (Int) -> Int32).self)
    /// glibc's `mallopt`, or nil where there is none.
    static let mallopt = glibc("mallopt", as: (@convention(c) (Int32, Int32) -> Int32).self)

    /// The size from which glibc gives a block its own mapping: glibc's starting value.
    static let mmapThreshold: Int32 = 128 * 1024
    /// The free room at the top of a thread's heap from which a `free` gives memory back at once.
    /// Twice glibc's starting value: at 128 KiB, a heap whose top hovered at the threshold gave back
    /// and took again a few pages at nearly every request (7,494 `madvise` calls and 19,546 page faults
    /// for 5,000 sessions created and tapped, against 2 and 11,221 at 256 KiB), and memory after load
    /// stayed where it was (Benchmarks/HISTORY.md).
    static let trimThreshold: Int32 = 256 * 1024

    /// Keeps glibc's thresholds fixed. Left alone, glibc raises its mmap threshold to the largest mapped
    /// block freed so far (up to 32 MiB) and its trim threshold to twice that, so after a burst, large
    /// blocks (a grown dictionary, a long answer) are cut from the heaps, and small blocks that live on
    /// are later placed in the holes they leave, which keeps those pages resident. A 20,000-session soak
    /// ended about 1.5 MiB lower (Benchmarks/HISTORY.md). Returns whether glibc took both.
    @discardableResult
    static func fixThresholds() -> Bool {
        guard let mallopt else { return false }
        // M_TRIM_THRESHOLD is -1 and M_MMAP_THRESHOLD -3 in glibc's malloc.h.
        return mallopt(-3, mmapThreshold) == 1 && mallopt(-1, trimThreshold) == 1
    }

    private static func glibc<Function>(_ name: String, as type: Function.Type) -> Function? {
        #if canImport(Glibc)
            dlsym(dlopen(nil, RTLD_NOW), name).map { unsafeBitCast($0, to: type) }
        #else
            nil
        #endif
    }

    func run() async throws {
        Self.fixThresholds()
        try? await cancelWhenGracefulShutdown {
            var seen = activity()
            var passed = clock.now()
            while true {
                try await clock.sleep(until: clock.now().addingTimeInterval(interval))
                let now = activity()
                if now - seen < quiet || clock.now().timeIntervalSince(passed) >= longest {
                    await release()
                    _ = Self.trim?(0)
                    passed = clock.now()
                }
                seen = now
            }
        }
    }
}
