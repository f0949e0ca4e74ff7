import Foundation
import NIOCore
import Testing

@testable import LinkRelayServer

/// What of a connection's bytes reaches NIO's decoder: heads without the lines the relay never reads,
/// the same whichever way the bytes are split into reads, and bodies, later requests and WebSocket
/// frames as they came.
@Suite("Head filter")
struct HeadFilterTests {
    /// The bytes the decoder gets when `input` comes in reads of `size` bytes.
    static func decoded(_ input: String, reads size: Int) throws -> String {
        var filter = HeadFilter()
        var decoded = ""
        var rest = Substring(input)
        while !rest.isEmpty {
            let out = try filter.filter(ByteBuffer(string: String(rest.prefix(size))))
            decoded += String(buffer: out)
            rest = rest.dropFirst(size)
        }
        return decoded
    }

    /// `input` decodes to `expected` in one read and in reads of every size up to 64 bytes.
    static func expectDecoded(_ input: String, _ expected: String) throws {
        for size in [input.utf8.count] + Array(1...64) {
            #expect(try decoded(input, reads: size) == expected, "reads of \(size) bytes")
        }
    }

    static let browserHead =
        "GET /l/k1?asc=a&authId=b HTTP/1.1\r\nHost: relay.example\r\n"
        + "User-Agent: Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)\r\n"
        + "Accept: text/html,application/xhtml+xml\r\nAccept-Language: en-US,en;q=0.9\r\n"
        + "Cookie: session=abcdef; theme=dark\r\nSec-Fetch-Site: cross-site\r\nX-A-Very-Long-Header-Name-Past-Any-Kept: 1\r\n"
        + "Origin: https://bank.example\r\n\r\n"
    static let keptHead =
        "GET /l/k1?asc=a&authId=b HTTP/1.1\r\nHost: relay.example\r\nAccept: text/html,application/xhtml+xml\r\n"
        + "Sec-Fetch-Site: cross-site\r\nOrigin: https://bank.example\r\n\r\n"

    @Test("A browser's head reaches the decoder with only the lines the relay reads, however it is split")
    func dropsUnreadLines() throws {
        try Self.expectDecoded(Self.browserHead, Self.keptHead)
    }

    @Test("A head with only kept lines is passed as the same buffer, not copied")
    func keptHeadNotCopied() throws {
        var filter = HeadFilter()
        let read = ByteBuffer(string: Self.keptHead)
        let out = try filter.filter(read)
        #expect(out == read)
        out.withUnsafeReadableBytes { outBytes in
            read.withUnsafeReadableBytes { #expect(outBytes.baseAddress == $0.baseAddress) }
        }
    }

    @Test("A body with a length passes as it came, and the next request's head is filtered again")
    func lengthThenNextHead() throws {
        let body = "User-Agent: not a header, a body\r\n\r\n"
        let post =
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nUser-Agent: t/1\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        try Self.expectDecoded(
            post + body + Self.browserHead,
            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
                + Self.keptHead)
    }

    @Test(
        "After a chunked body, an upgrade or two lengths everything passes as it came",
        arguments: [
            "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nAccept\r\n0\r\n\r\n",
            "GET /v1/sessions/s/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n\u{81}\u{05}Accept: x\r\n",
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nA",
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\nA",
        ])
    func framingNotFollowed(_ head: String) throws {
        let next = "GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"
        try Self.expectDecoded(head + next, head + next)
    }

    @Test(
        "A line the decoder would refuse is refused, kept or dropped",
        arguments: [
            "X-Pad: a\rb\r\n",  // a bare CR
            "X-Pad: a\u{0}b\r\n",  // a NUL
            "X-Pad: a\r\n folded\r\n",  // obs-fold
            "X-A-Header-Name-Longer-Than-Any-Kept-One\r\n",  // no colon
            "X-A-Header-Name-Longer-Than-Any-Kept-One(: x\r\n",  // not a token
        ])
    func malformedDroppedLine(_ line: String) throws {
        for size in [1, 3, 200] {
            #expect(throws: HeadFilter.Failure.malformed) {
                try Self.decoded("GET / HTTP/1.1\r\nHost: x\r\n" + line + "\r\n", reads: size)
            }
        }
    }

    @Test("A line whose name is not a token reaches the decoder, which refuses it")
    func badNamePassed() throws {
        let head = "GET / HTTP/1.1\r\nHost: x\r\nBad Name: x\r\n\r\n"
        try Self.expectDecoded(head, head)
    }

    @Test(
        "More than 100 header lines, or more than 16 KiB of request line and kept lines, is too large",
        arguments: [
            (0..<101).map { "X\($0): y\r\n" }.joined(),
            (0..<17).map { _ in "Origin: " + String(repeating: "o", count: 1000) + "\r\n" }.joined(),
        ])
    func tooLarge(_ lines: String) throws {
        #expect(throws: HeadFilter.Failure.tooLarge) {
            try Self.decoded("GET / HTTP/1.1\r\nHost: x\r\n" + lines + "\r\n", reads: 512)
        }
    }

    @Test("A 32 KiB head of lines the relay does not read leaves the decoder only its request line and Host")
    func paddingDropped() throws {
        let head =
            "GET /healthz HTTP/1.1\r\nHost: x\r\n"
            + (0..<31).map { "X-Pad-\($0): " + String(repeating: "a", count: 1000) + "\r\n" }.joined()
        #expect(try Self.decoded(head, reads: 4096) == "GET /healthz HTTP/1.1\r\nHost: x\r\n")
    }

    @Test("Every header the relay's sources read by name is one the filter keeps")
    func keptNamesCoverTheSources() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let pattern = try NSRegularExpression(
            pattern: #"(?:first\(name: *|canonicalForm: *|contains\(name: *|headers\[)"([A-Za-z0-9-]+)""#)
        var read: Set<String> = []
        for module in ["LinkRelayServer", "ProveSandbox"] {
            let files = FileManager.default.enumerator(
                at: root.appendingPathComponent(module), includingPropertiesForKeys: nil)
            while let file = files?.nextObject() as? URL {
                guard file.pathExtension == "swift" else { continue }
                let text = try String(contentsOf: file, encoding: .utf8)
                for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    read.insert(String(text[Range(match.range(at: 1), in: text)!]).lowercased())
                }
            }
        }
        #expect(read.count > 10)
        let kept = Set(HeadFilter.keptNames.map { String(decoding: $0, as: UTF8.self) })
        #expect(read.subtracting(kept).isEmpty, "read but dropped: \(read.subtracting(kept).sorted())")
    }
}
