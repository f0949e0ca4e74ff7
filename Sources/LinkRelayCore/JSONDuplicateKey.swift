import Foundation

/// A key that one object of a JSON text names twice, and where that object is.
///
/// Hand-written: Foundation's decoders keep one of the values without a word (JSONDecoder the first,
/// JSONSerialization the last) and no package in the mirror reports duplicates; Core may use only Foundation.
///
/// Run it after a decoder has accepted the text: on anything that is not JSON it finds nothing (or
/// anything), and the decoder's refusal is the answer then.
public struct JSONDuplicateKey: Sendable, Equatable {
    /// The key, its escapes decoded.
    public var key: String
    /// Where the object is: empty for the outermost one, else a path such as `individual.addresses[0]`.
    public var path: String

    public init(key: String, path: String) {
        self.key = key
        self.path = path
    }

    /// The first key that some object of `data` names twice, in the text's order; nil when none does.
    ///
    /// Keys compare once their escapes are decoded (`"a"` and `"\u0061"` are one key, a surrogate pair
    /// is its one character) and as Swift compares strings, which is how the decoded dictionary keys
    /// them: canonically equivalent spellings (`é` and `e` with U+0301) are one key too, since the
    /// decoder would keep only one of them. The same key in sibling or nested objects is no duplicate.
    /// UTF-16 and UTF-32 texts, which JSONDecoder also reads, are read as such.
    public static func first(in data: Data) -> JSONDuplicateKey? {
        let bytes = utf8(data)
        var scanner = Scanner(bytes: bytes)
        return scanner.firstDuplicate()
    }

    /// What a 400 says about it.
    public var detail: String {
        let shown = key.count > 64 ? key.prefix(64) + "…" : key[...]
        let place = path.isEmpty ? "" : " in the object at \(path)"
        return "The body names the key \"\(shown)\" more than once\(place); give each key once."
    }

    /// The text as UTF-8: as it is, unless its first bytes show UTF-16 or UTF-32 (RFC 4627 §3: the NUL
    /// bytes that an ASCII first character leaves, or a byte order mark).
    static func utf8(_ data: Data) -> [UInt8] {
        let bytes = [UInt8](data)
        guard bytes.count >= 2 else { return bytes }
        let head = Array(bytes.prefix(4)) + [UInt8](repeating: 1, count: max(0, 4 - bytes.count))
        let encoding: String.Encoding? =
            switch (head[0], head[1], head[2], head[3]) {
            case (0, 0, 0xFE, 0xFF), (0xFF, 0xFE, 0, 0): .utf32
            case (0, 0, _, _): .utf32BigEndian
            case (_, 0, 0, 0): .utf32LittleEndian
            case (0xFE, 0xFF, _, _), (0xFF, 0xFE, _, _): .utf16
            case (0, _, _, _): .utf16BigEndian
            case (_, 0, _, _): .utf16LittleEndian
            default: nil
            }
        guard let encoding, let text = String(data: data, encoding: encoding) else { return bytes }
        return Array(text.utf8)
    }

    /// One pass over the text, with a stack of the objects and arrays it is in.
    private struct Scanner {
        enum Container {
            /// An object: the keys seen so far, and the last one (whose value may be read now).
            case object(path: String, keys: Set<String>, last: String?)
            case array(path: String, index: Int)
        }

        let bytes: [UInt8]
        var index = 0
        var stack: [Container] = []
        /// The next string is a key: right after `{` or an object's `,`.
        var expectingKey = false

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func firstDuplicate() -> JSONDuplicateKey? {
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "{"):
                    stack.append(.object(path: childPath(), keys: [], last: nil))
                    expectingKey = true
                case UInt8(ascii: "["):
                    stack.append(.array(path: childPath(), index: 0))
                    expectingKey = false
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    _ = stack.popLast()
                    expectingKey = false
                case UInt8(ascii: ","):
                    switch stack.last {
                    case .object: expectingKey = true
                    case .array(let path, let count): stack[stack.count - 1] = .array(path: path, index: count + 1)
                    case nil: break
                    }
                case UInt8(ascii: "\""):
                    let text = string()
                    guard expectingKey, case .object(let path, var keys, _) = stack.last else { continue }
                    expectingKey = false
                    guard keys.insert(text).inserted else { return JSONDuplicateKey(key: text, path: path) }
                    stack[stack.count - 1] = .object(path: path, keys: keys, last: text)
                default:
                    continue
                }
            }
            return nil
        }

        /// The path of a value that starts now, in the innermost container.
        private func childPath() -> String {
            switch stack.last {
            case nil: ""
            case .object(let path, _, let last): path.isEmpty ? last ?? "" : path + "." + (last ?? "")
            case .array(let path, let index): path + "[\(index)]"
            }
        }

        /// The string whose opening quote was just read, its escapes decoded; the index ends past its
        /// closing quote. A lone surrogate (which the decoder refuses) reads as U+FFFD.
        private mutating func string() -> String {
            var decoded: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\"") { break }
                guard byte == UInt8(ascii: "\\"), index < bytes.count else {
                    decoded.append(byte)
                    continue
                }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"): decoded += String(Character(unicodeEscape())).utf8
                default: decoded.append(escape)  // `"`, `\`, `/`
                }
            }
            return String(decoding: decoded, as: UTF8.self)
        }

        /// The scalar of a `\u` escape whose `u` was just read, with the low half of a surrogate pair.
        private mutating func unicodeEscape() -> Unicode.Scalar {
            let replacement = Unicode.Scalar(0xFFFD)!
            guard let unit = hex4() else { return replacement }
            if let scalar = Unicode.Scalar(unit) { return scalar }
            // A high surrogate needs `\u` and a low one straight after it.
            guard (0xD800...0xDBFF).contains(unit), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                bytes[index + 1] == UInt8(ascii: "u")
            else { return replacement }
            let mark = index
            index += 2
            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else {
                index = mark
                return replacement
            }
            return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) ?? replacement
        }

        /// Four hex digits, as a number; nil (the index unmoved) when they are not.
        private mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for byte in bytes[index..<index + 4] {
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            index += 4
            return value
        }
    }
}
