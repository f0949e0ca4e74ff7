import Foundation
import LinkRelayCore
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

/// Gives memory back once the relay has gone quiet: `release` lets go of what the relay keeps only for
/// speed (the store's caches, stale timer entries, grown dictionaries), and with `tunesGlibc`
/// (`--malloc-tuning`, on by default) glibc then returns its free pages (`malloc_trim`). How each part
/// pays off is in docs/memory.md.
///
/// A pass holds writes, the hub and glibc's heaps for a moment, and under load the memory would be taken
/// again at once. So every `interval` it looks at `activity` (which grows with the relay's work) and
/// passes only when that grew by less than `quiet` since the last look: within `2 × interval` of a
/// burst's end, not during one. Under load that never lets up, it still passes every `longest`, so that
/// what a burst left comes back.
struct MemoryTrim: Service {
    var clock: any RelayClock = EventLoopClock()
    var interval: TimeInterval = 10
    /// Whether glibc's thresholds are fixed at start and `malloc_trim` runs after each release.
    var tunesGlibc = false
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
    /// The free room at the top of a thread's heap from which a `free` gives memory back at once: twice
    /// glibc's starting value, so that a heap whose top hovers there does not give back and take again a
    /// few pages at nearly every request.
    static let trimThreshold: Int32 = 256 * 1024

    /// Keeps glibc's thresholds where they start. Left alone, glibc raises them after the first large
    /// block is freed, and then cuts large blocks from its heaps, where the small ones that outlive them
    /// keep the pages resident. Returns whether glibc took both.
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
        if tunesGlibc { Self.fixThresholds() }
        try? await cancelWhenGracefulShutdown {
            var seen = activity()
            var passed = clock.now()
            while true {
                try await clock.sleep(until: clock.now().addingTimeInterval(interval))
                let now = activity()
                if now - seen < quiet || clock.now().timeIntervalSince(passed) >= longest {
                    await release()
                    if tunesGlibc { _ = Self.trim?(0) }
                    passed = clock.now()
                }
                seen = now
            }
        }
    }
}
