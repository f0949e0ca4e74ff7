/// Random identifiers and secrets, and comparing secrets without leaking timing.
///
/// `SystemRandomNumberGenerator` reads the operating system's CSPRNG (`getrandom(2)` on Linux,
/// `arc4random_buf` on Darwin), so every value made here is unpredictable.
public enum Secrets {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// A random string of `length` characters from `A-Za-z0-9` (5.95 bits each).
    /// 22 characters carry more than 128 bits.
    public static func token(length: Int = 32) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(length)
        // Rejection sampling keeps every character equally likely.
        while bytes.count < length {
            for value in randomBytes(length - bytes.count + 8) where value < 248 && bytes.count < length {
                bytes.append(alphabet[Int(value % 62)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `count` bytes from the OS CSPRNG, eight per call to it (`UInt8.random` makes a `getrandom` system
    /// call per byte).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            withUnsafeBytes(of: generator.next()) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }

    /// A new session id: `ses_` and 22 random characters (> 128 bits).
    public static func sessionID() -> String { "ses_" + token(length: 22) }

    /// A lower-case random (version 4) UUID string.
    public static func uuid() -> String {
        var bytes = randomBytes(16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        for (index, byte) in bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { text.append(UInt8(ascii: "-")) }
            text += [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Compares two secrets in time that depends only on their lengths, never on where they differ.
    public static func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
        let left = Array(lhs.utf8)
        let right = Array(rhs.utf8)
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count)
        if left.count != right.count { difference |= 1 }
        for index in 0..<max(left.count, right.count) {
            let a = index < left.count ? left[index] : 0
            let b = index < right.count ? right[index] : 0
            difference |= a ^ b
        }
        return difference == 0
    }

    /// A phone number with all but its last four characters masked, for logs.
    public static func maskedPhone(_ phone: String) -> String {
        guard phone.count > 4 else { return String(repeating: "*", count: phone.count) }
        return String(repeating: "*", count: phone.count - 4) + phone.suffix(4)
    }
}
