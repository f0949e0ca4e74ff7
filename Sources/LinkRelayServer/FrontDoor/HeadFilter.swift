import Foundation
import NIOCore
import NIOHTTP1

/// What of a request's head reaches NIO's decoder: its request line and the header lines the relay
/// reads (`keptNames`), so that a head that has not ended holds what the relay will use of it, not
/// every byte its client sent. The lines that frame a request (`Content-Length`, `Transfer-Encoding`,
/// `Host`, `Connection`, `Upgrade`, `Expect`) are among those kept, so the decoder frames every request
/// as it would have; the filter follows that framing itself, to know where the next head begins, and
/// where it does not (a chunked body, an upgrade, a length it cannot read) it passes everything after.
///
/// A dropped line is still checked as the decoder would check it (a token before the colon, no control
/// byte after it), so that no request the decoder would refuse gets through by being dropped.
struct HeadFilter {
    /// The headers the relay's routes and front door read, in lower case. A header a handler starts to
    /// read goes here (`HeadFilterTests` checks the sources for it).
    static let keptNames: Set<[UInt8]> = Set(
        [
            "accept", "authorization", "connection", "content-length", "content-type", "expect", "host",
            "idempotency-key", "if-none-match", "last-event-id", "origin", "sec-fetch-site", "sec-websocket-key",
            "sec-websocket-version", "transfer-encoding", "upgrade", "x-forwarded-for",
        ].map { Array($0.utf8) })
    private static let longestKeptName = keptNames.map(\.count).max() ?? 0

    /// The most bytes of a head the decoder keeps: its request line and its kept lines, line ends
    /// included. A landing's long, malformed link still fits, and gets its friendly page.
    static let maximumKept = 16 * 1024
    /// The most header lines, kept or not (Apache's `LimitRequestFields`).
    static let maximumLines = 100

    enum Failure: Error {
        /// Past `maximumKept` or `maximumLines`: 431.
        case tooLarge
        /// A line the decoder would refuse: 400.
        case malformed
    }

    private enum Phase {
        case requestLine(empty: Bool)
        /// A header line's first byte, or the empty line that ends the head.
        case lineStart
        /// The empty line's CR has come.
        case endingHead
        /// The name's bytes, in `name`, until its colon decides the line.
        case name
        case keptLine
        /// A name too long to be kept: dropped up to its colon.
        case droppedName
        /// A dropped line after its colon; `cr`: a CR has come, and only LF may follow.
        case droppedValue(cr: Bool)
        /// The body's bytes still to come, after a head with a `Content-Length`.
        case body(Int)
        /// Everything from here on reaches the decoder as it came.
        case through
    }

    private var phase = Phase.requestLine(empty: true)
    /// The name of the line being read, in lower case.
    private var name: [UInt8] = []
    /// The name's bytes, as they came, when its line began in an earlier read.
    private var heldName: [UInt8] = []
    private var keptBytes = 0
    private var lines = 0
    /// The kept line is a `Content-Length`: its value, as it comes.
    private var readingLength = false
    private var lengthValue: [UInt8] = []
    /// What the head's lines say of its body: a length, or nil with `followed` false when the filter
    /// cannot follow the framing (chunked, an upgrade, two lengths, a length it cannot read).
    private var length: Int?
    private var lengths = 0
    private var followed = true

    /// The bytes of `read` that the decoder gets: `read` itself when nothing in it is dropped.
    mutating func filter(_ read: ByteBuffer) throws -> ByteBuffer {
        switch phase {
        case .through: return read
        case .body(let remaining) where remaining >= read.readableBytes:
            phase = remaining == read.readableBytes ? .requestLine(empty: true) : .body(remaining - read.readableBytes)
            return read
        default: break
        }
        let count = read.readableBytes
        var output = ByteBuffer()
        // Something of this read is dropped or held back: `output` is what passes.
        var cut = false
        // The start of the run of bytes that pass, among the read's readable bytes; nil while dropping.
        var run: Int? = 0
        // Where the current header line began, when it began in this read.
        var lineBegan: Int?
        switch phase {
        case .name, .droppedName, .droppedValue:
            // The read goes on with a line that began before it: held back, or dropped.
            cut = true
            run = nil
        default: break
        }
        try read.withUnsafeReadableBytes { bytes in
            func pass(_ range: Range<Int>) {
                output.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[range]))
            }
            func drop() {
                cut = true
                if let start = run, let began = lineBegan { pass(start..<began) }
                run = nil
            }
            /// A line whose name came in an earlier read: the name goes first, then the line from `index`.
            func release(at index: Int) {
                if lineBegan == nil {
                    output.writeBytes(heldName)
                    run = index
                }
            }
            var index = 0
            while index < count {
                let byte = bytes[index]
                switch phase {
                case .requestLine(let empty):
                    try keep(1)
                    if byte == UInt8(ascii: "\n") {
                        phase = empty ? .requestLine(empty: true) : .lineStart
                    } else if byte != UInt8(ascii: "\r") {
                        phase = .requestLine(empty: false)
                    }
                case .lineStart:
                    switch byte {
                    case UInt8(ascii: "\n"):
                        try keep(1)
                        headEnded()
                    case UInt8(ascii: "\r"):
                        try keep(1)
                        phase = .endingHead
                    case UInt8(ascii: " "), UInt8(ascii: "\t"):
                        // A folded line (obs-fold): RFC 9112 §5.2 lets a server refuse it.
                        throw Failure.malformed
                    default:
                        lines += 1
                        guard lines <= Self.maximumLines else { throw Failure.tooLarge }
                        name.removeAll(keepingCapacity: true)
                        heldName.removeAll(keepingCapacity: true)
                        lineBegan = index
                        phase = .name
                        continue
                    }
                case .endingHead:
                    try keep(1)
                    if byte == UInt8(ascii: "\n") { headEnded() } else { phase = .through }
                case .name:
                    if byte == UInt8(ascii: ":"), !name.isEmpty {
                        if Self.keptNames.contains(name) {
                            try keep(name.count + 1)
                            readingLength = name == Self.contentLength
                            lengthValue.removeAll(keepingCapacity: true)
                            if name == Self.transferEncoding || name == Self.upgrade { followed = false }
                            release(at: index)
                            phase = .keptLine
                        } else {
                            drop()
                            phase = .droppedValue(cr: false)
                        }
                    } else if Self.isToken(byte) {
                        name.append(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte)
                        heldName.append(byte)
                        if name.count > Self.longestKeptName {
                            drop()
                            phase = .droppedName
                        }
                    } else {
                        // Not a header line the decoder takes: it gets the line, and refuses it.
                        release(at: index)
                        phase = .through
                        continue
                    }
                case .keptLine:
                    try keep(1)
                    if byte == UInt8(ascii: "\n") {
                        if readingLength { readLength() }
                        phase = .lineStart
                    } else if readingLength {
                        lengthValue.append(byte)
                        if lengthValue.count > 40 {
                            followed = false
                            readingLength = false
                        }
                    }
                case .droppedName:
                    if byte == UInt8(ascii: ":") {
                        phase = .droppedValue(cr: false)
                    } else if !Self.isToken(byte) {
                        throw Failure.malformed
                    }
                case .droppedValue(let cr):
                    if byte == UInt8(ascii: "\n") {
                        phase = .lineStart
                        run = index + 1
                    } else if cr || !Self.isFieldByte(byte) {
                        throw Failure.malformed
                    } else {
                        phase = .droppedValue(cr: byte == UInt8(ascii: "\r"))
                    }
                case .body(let remaining):
                    let taken = min(remaining, count - index)
                    index += taken
                    phase = taken == remaining ? .requestLine(empty: true) : .body(remaining - taken)
                    continue
                case .through:
                    index = count
                    continue
                }
                index += 1
            }
            // A read that ends inside a name: what came before the name passes; the name waits for its
            // colon to say whether its line is kept.
            var end = count
            if case .name = phase {
                cut = true
                end = lineBegan ?? 0
            }
            if cut, let start = run, start < end { pass(start..<end) }
        }
        return cut ? output : read
    }

    private static let contentLength = Array("content-length".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)
    private static let upgrade = Array("upgrade".utf8)

    private mutating func keep(_ bytes: Int) throws {
        keptBytes += bytes
        guard keptBytes <= Self.maximumKept else { throw Failure.tooLarge }
    }

    /// The `Content-Length` line has ended: its value, when it is one the filter can follow (the decoder
    /// judges the rest).
    private mutating func readLength() {
        readingLength = false
        lengths += 1
        let value = String(decoding: lengthValue, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if let length = Int(value), length >= 0, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            self.length = length
        } else {
            followed = false
        }
    }

    /// The head has ended: the body's bytes pass, then the next head is filtered, when the filter can
    /// tell where the body ends.
    private mutating func headEnded() {
        if !followed || lengths > 1 {
            phase = .through
        } else if let length, length > 0 {
            phase = .body(length)
        } else {
            phase = .requestLine(empty: true)
        }
        keptBytes = 0
        lines = 0
        length = nil
        lengths = 0
    }

    /// RFC 9110 §5.6.2's `tchar`.
    private static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// A field value's byte (RFC 9110 §5.5: VCHAR, SP, HTAB, obs-text), or the CR of its line end.
    private static func isFieldByte(_ byte: UInt8) -> Bool {
        byte == 9 || byte == 13 || (byte >= 32 && byte != 127)
    }
}
