import Foundation

/// Where a text stops being RFC 8259 JSON, and why.
///
/// Hand-written: Foundation's decoders take more than RFC 8259 (a trailing comma, for one) and say
/// nothing of where a text breaks; no package in the mirror checks the grammar, and Core may use only
/// Foundation.
public struct StrictJSON: Error, Sendable, Equatable {
    /// 1-based, counted in lines (LF) and, within the line, in characters (Unicode scalars).
    public var line: Int
    public var column: Int
    /// What was found there, as a 400 says it: "a trailing comma", "the end of the body".
    public var found: String

    /// The first place where `data` is not one JSON value (RFC 8259 §2–§8, UTF-8; a UTF-16 or UTF-32
    /// text, which the decoders also read, is checked as its UTF-8); nil when it is.
    public static func check(_ data: Data) -> StrictJSON? {
        var parser = Parser(bytes: JSONDuplicateKey.utf8(data))
        do throws(StrictJSON) {
            parser.skipSpace()
            try parser.value(depth: 0)
            parser.skipSpace()
            guard parser.index == parser.bytes.count else { throw parser.failure("text after the JSON value") }
            return nil
        } catch {
            return error
        }
    }

    /// What a 400 says about it.
    public var detail: String {
        "The body is not valid JSON (RFC 8259): \(found) at line \(line), column \(column)."
    }

    /// Deeper than this is refused: the decoders' own limit is 512.
    static let maximumDepth = 512

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        var next: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpace() {
            while let byte = next, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
        }

        mutating func value(depth: Int) throws(StrictJSON) {
            guard depth < StrictJSON.maximumDepth else { throw failure("nesting deeper than 512") }
            guard let byte = next else { throw failure("the end of the body") }
            switch byte {
            case UInt8(ascii: "{"): try object(depth: depth)
            case UInt8(ascii: "["): try array(depth: depth)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            default: throw failure(describe(byte))
            }
        }

        private mutating func object(depth: Int) throws(StrictJSON) {
            guard opens(closing: UInt8(ascii: "}")) else { return }
            repeat {
                guard next == UInt8(ascii: "\"") else {
                    throw failure(
                        next == UInt8(ascii: "}") ? "a trailing comma" : "\(describeNext()) where a key belongs")
                }
                try string()
                skipSpace()
                guard next == UInt8(ascii: ":") else { throw failure("\(describeNext()) where \":\" belongs") }
                index += 1
                skipSpace()
                try value(depth: depth + 1)
            } while try more(closing: UInt8(ascii: "}"))
        }

        private mutating func array(depth: Int) throws(StrictJSON) {
            guard opens(closing: UInt8(ascii: "]")) else { return }
            repeat {
                if next == UInt8(ascii: "]") { throw failure("a trailing comma") }
                try value(depth: depth + 1)
            } while try more(closing: UInt8(ascii: "]"))
        }

        /// Past an object's or an array's opening bracket (next): false when it closes at once.
        private mutating func opens(closing: UInt8) -> Bool {
            index += 1
            skipSpace()
            guard next == closing else { return true }
            index += 1
            return false
        }

        /// After a member or an element: true past a comma, false past the closing bracket.
        private mutating func more(closing: UInt8) throws(StrictJSON) -> Bool {
            skipSpace()
            switch next {
            case UInt8(ascii: ","):
                index += 1
                skipSpace()
                return true
            case closing:
                index += 1
                return false
            default:
                throw failure("\(describeNext()) where \",\" or \"\(Character(UnicodeScalar(closing)))\" belongs")
            }
        }

        /// A string whose opening quote is next: no control characters, only JSON's escapes, and
        /// surrogates in pairs.
        private mutating func string() throws(StrictJSON) {
            index += 1
            while let byte = next {
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return
                case 0..<0x20: throw failure("a control character in a string")
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escape = next else { break }
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        try unicodeEscape()
                    default: throw failure("the escape \\\(describe(escape, quoted: false))")
                    }
                default:
                    index += 1
                }
            }
            throw failure("the end of the body in a string")
        }

        /// `\u` and its four digits (the index on the `u`), with the low half of a surrogate pair.
        private mutating func unicodeEscape() throws(StrictJSON) {
            let start = index - 1
            index += 1
            let unit = try hex4()
            if (0xDC00...0xDFFF).contains(unit) { throw failure("a lone surrogate", at: start) }
            guard (0xD800...0xDBFF).contains(unit) else { return }
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw failure("a lone surrogate", at: start) }
            index += 2
            guard (0xDC00...0xDFFF).contains(try hex4()) else { throw failure("a lone surrogate", at: start) }
        }

        private mutating func hex4() throws(StrictJSON) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = next, let digit = Self.hexDigit(byte) else {
                    throw failure("a \\u escape without four hex digits")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        private static func hexDigit(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
            }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        private mutating func number() throws(StrictJSON) {
            let start = index
            if next == UInt8(ascii: "-") { index += 1 }
            guard let first = next, Self.isDigit(first) else {
                throw failure(next == UInt8(ascii: "I") ? "NaN or Infinity" : "\(describeNext()) after \"-\"")
            }
            index += 1
            if first == UInt8(ascii: "0"), let following = next, Self.isDigit(following) {
                throw failure("a number with a leading zero", at: start)
            }
            digits()
            if next == UInt8(ascii: ".") {
                index += 1
                guard let byte = next, Self.isDigit(byte) else { throw failure("a number without digits after \".\"") }
                digits()
            }
            if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
                index += 1
                if next == UInt8(ascii: "+") || next == UInt8(ascii: "-") { index += 1 }
                guard let byte = next, Self.isDigit(byte) else { throw failure("a number without an exponent") }
                digits()
            }
        }

        private mutating func digits() {
            while let byte = next, Self.isDigit(byte) { index += 1 }
        }

        private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

        private mutating func literal(_ word: String) throws(StrictJSON) {
            let start = index
            for expected in word.utf8 {
                guard next == expected else { throw failure("a word other than true, false or null", at: start) }
                index += 1
            }
        }

        private func describeNext() -> String { next.map { describe($0) } ?? "the end of the body" }

        /// A byte as a 400 names it: the character it starts, quoted, or what it is.
        private func describe(_ byte: UInt8, quoted: Bool = true) -> String {
            switch byte {
            case UInt8(ascii: "'"): return "a single quote"
            case UInt8(ascii: "/"): return quoted ? "a comment" : "/"
            case UInt8(ascii: "N"), UInt8(ascii: "I"): return "NaN or Infinity"
            case 0x21..<0x7F:
                let character = String(UnicodeScalar(byte))
                return quoted ? "\"\(character)\"" : character
            default: return String(format: "the byte 0x%02X", byte)
            }
        }

        /// A failure at `position` (the index by default), with its line and column.
        func failure(_ found: String, at position: Int? = nil) -> StrictJSON {
            let position = min(position ?? index, bytes.count)
            var line = 1
            var column = 1
            for byte in bytes[..<position] {
                if byte == 0x0A {
                    line += 1
                    column = 1
                } else if byte & 0xC0 != 0x80 {
                    column += 1
                }
            }
            return StrictJSON(line: line, column: column, found: found)
        }
    }
}
