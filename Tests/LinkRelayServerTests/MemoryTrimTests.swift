import Foundation
import LinkRelayCore
import LinkRelaySupport
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// Under ThreadSanitizer, memory comes from the sanitizer's own allocator, which `malloc_trim` does not manage.
private let underThreadSanitizer = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

/// One test at a time, the thresholds' first: glibc serves a block from free chunks of the same size
/// or larger before it maps one, and the other test leaves 64 MiB of them behind in its thread's heap.
@Suite("Memory trim", .serialized, .timeLimit(.minutes(1)))
struct MemoryTrimTests {
    /// Resident memory of this process, in KiB.
    private func residentKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return try #require(Int(line.split(separator: " ")[1]))
    }

    @Test(
        "Blocks of 512 KiB still get their own mappings after a 4 MiB one was freed",
        .enabled(if: MemoryTrim.mallopt != nil && !underThreadSanitizer))
    func thresholdsStayFixed() throws {
        #expect(MemoryTrim.fixThresholds())
        // Left to itself, glibc would now cut blocks of up to 4 MiB from its heaps.
        free(malloc(4 * 1024 * 1024))
        // glibc first serves a block from a free chunk that is big enough, and the suites running
        // meanwhile may have left some in this thread's heap; once those are used up, a block gets a
        // mapping of its own. Unfixed, glibc would grow the heap for every one.
        var blocks: [UnsafeMutableRawPointer] = []
        defer { for block in blocks { free(block) } }
        var mapped = false
        while !mapped && blocks.count < 256 {
            let block = try #require(malloc(512 * 1024))
            blocks.append(block)
            // glibc's chunk header, just before the block: the size's bit of value 2 (IS_MMAPPED)
            // marks a mapping of its own.
            mapped = (block - 8).load(as: UInt.self) & 2 != 0
        }
        #expect(mapped, "none of \(blocks.count) blocks of 512 KiB was mapped on its own")
    }

    @Test(
        "Memory freed inside the heap goes back to the system",
        .enabled(if: MemoryTrim.trim != nil && !underThreadSanitizer))
    func freedMemoryIsReturned() throws {
        // 64 MiB in blocks below glibc's mmap threshold, every other one freed: the heap keeps the
        // holes until trimmed.
        let size = 64 * 1024
        var blocks = (0..<1024).map { _ in UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16) }
        for block in blocks { block.initializeMemory(as: UInt8.self, repeating: 1, count: size) }
        for index in stride(from: 0, to: blocks.count, by: 2) { blocks[index].deallocate() }
        let trim = try #require(MemoryTrim.trim)
        let before = try residentKiB()
        _ = trim(0)
        let after = try residentKiB()
        #expect(before - after > 16 * 1024, "at least half of the 32 MiB freed went back (\(before) → \(after) KiB)")
        for index in stride(from: 1, to: blocks.count, by: 2) { blocks[index].deallocate() }
        blocks = []
    }

    @Test(
        "A pass comes at each look that finds the relay's work quiet, never while it is busy, and under endless load every 300 s"
    )
    func passesWhenQuiet() async throws {
        let clock = ManualClock()
        let work = Locked(0)
        let passes = Locked(0)
        let trim = MemoryTrim(
            clock: clock, interval: 10, activity: { work.withLock { $0 } }, quiet: 10,
            release: { passes.withLock { $0 += 1 } })
        let running = Task { try await trim.run() }
        defer { running.cancel() }

        /// Lets an interval go by with `units` of work in it; returns the passes so far once the trim
        /// has looked and gone back to sleep.
        func interval(working units: Int) async -> Int {
            await clock.waitForSleepers(1)
            work.withLock { $0 += units }
            clock.advance(by: 10)
            await clock.waitForSleepers(1)
            return passes.withLock { $0 }
        }
        #expect(await interval(working: 5_000) == 0)  // a burst
        #expect(await interval(working: 300) == 0)  // its tail
        #expect(await interval(working: 0) == 1)  // quiet: a pass
        #expect(await interval(working: 0) == 2)  // and one at every look while it stays quiet
        #expect(await interval(working: 3) == 3)  // a trickle counts as quiet
        #expect(await interval(working: 10) == 3)  // ten units in an interval do not
        #expect(await interval(working: 0) == 4)
        // Load that never lets up: a pass every 300 s all the same, counted from the last one.
        var passesUnderLoad: [Int] = []
        for _ in 1...60 { passesUnderLoad.append(await interval(working: 1_000)) }
        #expect(passesUnderLoad.firstIndex(of: 5) == 29)
        #expect(passesUnderLoad.firstIndex(of: 6) == 59)
    }

    @Test("The expiry queue forgets sessions that ended: never due, and dropped by compact")
    func expiryQueueCompaction() {
        let queue = ExpiryQueue()
        let start = Date(timeIntervalSinceReferenceDate: 0)
        for index in 0..<100 { queue.schedule(sessionID: "ses_\(index)", at: start + Double(index)) }
        for index in stride(from: 0, to: 100, by: 2) { queue.finished("ses_\(index)") }
        queue.schedule(sessionID: "ses_1", at: start + 500)  // again, later: the first entry is stale
        queue.compact()
        #expect(queue.count == 50)
        #expect(queue.due(at: start + 99) == stride(from: 3, to: 100, by: 2).map { "ses_\($0)" })
        #expect(queue.due(at: start + 500) == ["ses_1"])
        #expect(queue.count == 0)
    }

    @Test("The channel hub drops the wake-ups of channels that have gone")
    func hubCompaction() {
        let hub = ChannelHub()
        let start = Date()
        let ticks = Locked(0)
        let listeners = (0..<100).map { index in
            hub.listen(sessionID: "ses_\(index)", wakeAt: start + 10) { signal in
                if case .tick = signal { ticks.withLock { $0 += 1 } }
            }
        }
        for listener in listeners.dropFirst(10) { listener.finish() }
        #expect(hub.wakeCount == 100)
        hub.compact()
        #expect(hub.wakeCount == 10)
        hub.tick(now: start + 10)
        #expect(ticks.withLock { $0 } == 10)
        for listener in listeners.prefix(10) { listener.finish() }
    }

    @Test(
        "By default a relay process runs with glibc's per-thread caches off, added to the operator's GLIBC_TUNABLES unless those set the count",
        .timeLimit(.minutes(1)),
        arguments: [
            ("", "glibc.malloc.tcache_count=0"),
            ("glibc.malloc.arena_max=2", "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0"),
            ("glibc.malloc.tcache_count=7", "glibc.malloc.tcache_count=7"),
        ])
    func relayProcessTunables(preset: String, expected: String) async throws {
        let (relay, port) = try await PersistenceTests.start(
            ready: "GLIBC_TUNABLES=\(expected) [linkrelay]", "LinkRelay listening",
            environment: ["GLIBC_TUNABLES": preset]
        ) {
            [
                "serve", "--drain-delay", "0", "--port", String($0), "--store", "memory", "--api-key", TestRelay.apiKey,
            ]
        }
        defer { relay.stop() }
        let ready = try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/readyz")
        #expect(ready.status == 200)
    }

    @Test("--event-loops sets the threads that serve the connections, with the tuning kept and the process's name")
    func relayProcessEventLoops() async throws {
        let (relay, port) = try await PersistenceTests.start(ready: "event_loops=1", "LinkRelay listening") {
            [
                "serve", "--drain-delay", "0", "--port", String($0), "--store", "memory", "--api-key", TestRelay.apiKey,
                "--event-loops", "1",
            ]
        }
        defer { relay.stop() }
        #expect(try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/readyz").status == 200)
        let pid = relay.process.processIdentifier
        let environment = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        let variables = environment.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        #expect(variables.contains("NIO_SINGLETON_GROUP_LOOP_COUNT=1"))
        #expect(variables.contains { $0.hasPrefix("GLIBC_TUNABLES=") }, "one restart carries both settings")
        let name = try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
        #expect(name == "linkrelay\n", "named after its program, not /proc/self/exe")
    }

    @Test("With --malloc-tuning off a relay process runs as it was started: GLIBC_TUNABLES left alone")
    func relayProcessUntuned() async throws {
        let (relay, port) = try await PersistenceTests.start(
            ready: "LinkRelay listening", environment: ["GLIBC_TUNABLES": ""]
        ) {
            [
                "serve", "--drain-delay", "0", "--port", String($0), "--store", "memory", "--api-key", TestRelay.apiKey,
                "--malloc-tuning", "off",
            ]
        }
        defer { relay.stop() }
        #expect(try await TestRelay.fetch(.GET, "http://127.0.0.1:\(port)/readyz").status == 200)
        let environment = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(relay.process.processIdentifier)/environ"))
        let variables = environment.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        #expect(variables.filter { $0.hasPrefix("GLIBC_TUNABLES=") } == ["GLIBC_TUNABLES="])
    }
}
