import Foundation
import Logging
import Testing

@testable import LinkRelayServer

/// A temporary file with a `LogOutput` writing to it.
struct LogFile {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID().uuidString)").path
    let descriptor: Int32
    let output: LogOutput

    init() throws {
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        output = LogOutput(fileDescriptor: descriptor)
    }

    func remove() {
        close(descriptor)
        unlink(path)
    }
}

@Suite("Log output", .timeLimit(.minutes(1)))
struct LogOutputTests {
    @Test("Lines from several threads come out whole and each thread's in order, all of them by the time flush returns")
    func linesComeOutWholeAndInOrder() async throws {
        let file = try LogFile()
        defer { file.remove() }
        let (output, path) = (file.output, file.path)
        await withTaskGroup { group in
            for writer in 0..<4 {
                group.addTask {
                    for line in 0..<2_000 { output.write("writer \(writer) line \(line)\n") }
                }
            }
        }
        #expect(output.flush(timeout: 30))  // generous: the whole suite runs at once, under ThreadSanitizer too

        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 8_000)
        for writer in 0..<4 {
            let own = lines.filter { $0.hasPrefix("writer \(writer) ") }
            #expect(own == (0..<2_000).map { "writer \(writer) line \($0)"[...] })
        }
    }

    @Test(
        "An output nobody reads never holds up the writer: lines past the capacity are dropped, then counted; a flush gives up"
    )
    func stuckOutputDropsAndCounts() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        // Fill the pipe, so that the output's first write already waits for a reader.
        let flags = fcntl(ends[1], F_GETFL)
        _ = fcntl(ends[1], F_SETFL, flags | O_NONBLOCK)
        while write(ends[1], "filler\n", 7) == 7 {}
        _ = fcntl(ends[1], F_SETFL, flags)
        let output = LogOutput(fileDescriptor: ends[1], capacity: 1024)

        // 20,000 bytes: far more than the batch being written and the 1 KiB buffer hold. Were a
        // write to wait for the reader, this loop would never end (there is none yet).
        let sent = (0..<200).map { String(format: "line %03d ", $0) + String(repeating: "x", count: 90) + "\n" }
        for line in sent { output.write(line) }

        // Nor does a flush keep the process waiting for it.
        #expect(!output.flush(timeout: 0.05))

        // Read until every line sent is accounted for: written out, or counted in a note.
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var delivered: [String] = []
        var dropped = 0
        let note = /linkrelay: (\d+) log lines dropped: the log output was not keeping up/
        while delivered.count + dropped < sent.count {
            let count = read(ends[0], &chunk, chunk.count)
            try #require(count > 0)
            received += chunk[..<count]
            let whole = received.lastIndex(of: UInt8(ascii: "\n")).map { received[...$0] } ?? []
            delivered = []
            dropped = 0
            for line in String(decoding: whole, as: UTF8.self).split(separator: "\n") {
                if let match = try note.wholeMatch(in: line) {
                    dropped += Int(match.1)!
                } else if line != "filler" {
                    delivered.append(String(line))
                }
            }
        }
        #expect(output.flush(timeout: 30))  // generous: the whole suite runs at once, under ThreadSanitizer too

        #expect(dropped > 0)
        #expect(delivered.count + dropped == sent.count)
        // What came out is whole lines that were sent, in the order they were sent.
        let positions = delivered.compactMap { line in sent.firstIndex(of: line + "\n") }
        #expect(positions.count == delivered.count)
        #expect(positions == positions.sorted())
    }
}

@Suite("Log lines", .timeLimit(.minutes(1)))
struct RelayLogHandlerTests {
    /// What `handler` wrote for one line.
    private func line(localTime: Bool) throws -> String {
        let file = try LogFile()
        defer { file.remove() }
        let (output, path) = (file.output, file.path)
        var logger = Logger(label: "linkrelay") { RelayLogHandler(label: $0, localTime: localTime, output: output) }
        logger[metadataKey: "session"] = "ses_1"
        logger.notice("Session created", metadata: ["hold": "180"])
        #expect(output.flush(timeout: 30))
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    @Test("A line is stamped in UTC, with milliseconds and Z, then level, label, metadata, source and message")
    func utc() throws {
        let text = try line(localTime: false)
        #expect(text.hasSuffix(" notice linkrelay: hold=180 session=ses_1 [LinkRelayServerTests] Session created\n"))
        let stamp = String(text.prefix { $0 != " " })
        #expect(stamp.count == 24 && stamp.hasSuffix("Z"), "\(stamp)")
        let parsed = try #require(try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(stamp))
        #expect(abs(parsed.timeIntervalSinceNow) < 600)
    }

    @Test("With local time the stamp carries the zone's offset")
    func local() throws {
        let stamp = String(try line(localTime: true).prefix { $0 != " " })
        #expect(stamp.count == 28, "\(stamp)")
        #expect(stamp.suffix(5).first == "+" || stamp.suffix(5).first == "-")
        let parsed = try #require(try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(stamp))
        #expect(abs(parsed.timeIntervalSinceNow) < 600)
    }
}
