import Foundation

/// Writes one JSON object by hand, for the hot paths: a session stored on every write, an event sent to
/// every channel. On these paths `JSONEncoder` costs too much; this writes the fields straight into bytes.
/// What it writes decodes with `JSONDecoder` exactly like the `Codable` form (tests compare them).
///
/// Fields are written in the order they are added; a `nil` value leaves its field out, as `Codable`'s
/// `encodeIfPresent` does.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8]
    private var empty = true

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// The finished object.
    public consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        self.key(key)
        Self.append(string: value, to: &bytes)
    }

    public mutating func add(_ key: String, _ value: Int) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A date as `Codable` writes it by default: seconds since 2001-01-01, the shortest text that reads
    /// back as the same `Double`.
    public mutating func add(_ key: String, secondsSinceReferenceDate date: Date?) {
        guard let date else { return }
        self.key(key)
        // Written as `description` writes it, from the digits' own buffer: `description` makes a
        // `String` of them, which for most dates (17 characters) is an allocation.
        var output = ASCIIOutput()
        swap(&output.bytes, &bytes)
        date.timeIntervalSinceReferenceDate.write(to: &output)
        swap(&output.bytes, &bytes)
    }

    /// A date as the relay's API writes it: ISO 8601 in UTC with milliseconds.
    public mutating func add(_ key: String, iso8601 date: Date) {
        self.key(key)
        bytes.append(UInt8(ascii: "\""))
        ISO8601Milliseconds.append(date, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func add(_ key: String, _ values: [String]) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            Self.append(string: value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A nested object: `value` written by its own writer.
    public mutating func add(_ key: String, object value: [UInt8]?) {
        guard let value else { return }
        self.key(key)
        bytes.append(contentsOf: value)
    }

    /// An array of objects, each written by its own writer.
    public mutating func add(_ key: String, objects: [[UInt8]]) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for (index, object) in objects.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: object)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// An object of strings, keys in sorted order.
    public mutating func add(_ key: String, _ value: [String: String]?) {
        guard let value else { return }
        var object = JSONObjectWriter(capacity: 64)
        for (name, text) in value.sorted(by: { $0.key < $1.key }) { object.add(name, text) }
        add(key, object: object.finish())
    }

    private mutating func key(_ key: String) {
        if empty { empty = false } else { bytes.append(UInt8(ascii: ",")) }
        Self.append(string: key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// A JSON string: quotes, backslashes and control characters escaped as `JSONEncoder` escapes them,
    /// everything else as UTF-8.
    static func append(string: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        defer { bytes.append(UInt8(ascii: "\"")) }
        // Most strings (ids, states, times) need no escape: then their bytes are copied whole from their
        // own storage, not a byte at a time.
        let copied = string.utf8.withContiguousStorageIfAvailable { utf8 in
            if utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                return false
            }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied == true { return }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(contentsOf: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
    }
}

/// Bytes a `TextOutputStreamable` number writes itself into. The standard library's numbers hand
/// their digits to `_writeASCII`, whose default makes a `String` of them first.
private struct ASCIIOutput: TextOutputStream {
    var bytes: [UInt8] = []

    mutating func write(_ string: String) { bytes.append(contentsOf: string.utf8) }

    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: buffer) }
}
