import Foundation
import Testing

@testable import LinkRelayServer

/// Under ThreadSanitizer, memory comes from the sanitizer's own allocator, which `malloc_trim` does not manage.
private let underThreadSanitizer = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

@Suite("Memory trim")
struct MemoryTrimTests {
    /// Resident memory of this process, in KiB.
    private func residentKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        return try #require(Int(line.split(separator: " ")[1]))
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
}
