import Foundation
import Testing

@testable import QRCode

/// Printable ASCII that repeats no pattern a mask could line up with: a fixed linear congruential sequence.
func sampleText(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 1_103_515_245 &+ 12_345
        return UInt8(0x20 + (state >> 16) % 95)
    }
}

/// The kind of link the relay encodes: an app link whose query carries a base64url token.
let appLink: String = {
    let token = #"{"nma_data":"\#(String(decoding: sampleText(160, seed: 7), as: UTF8.self))","nma_data_version":"1"}"#
    let base64url = Data(token.utf8).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
    return "https://relay.example/sandbox/nevis/open?dispatchTokenResponse=" + base64url
}()

/// The standard's byte-mode capacities (ISO/IEC 18004, table 7), by version, for L, M, Q and H.
let byteCapacity: [[Int]] = [
    [17, 14, 11, 7], [32, 26, 20, 14], [53, 42, 32, 24], [78, 62, 46, 34], [106, 84, 60, 44],
    [134, 106, 74, 58], [154, 122, 86, 64], [192, 152, 108, 84], [230, 180, 130, 98], [271, 213, 151, 119],
    [321, 251, 177, 137], [367, 287, 203, 155], [425, 331, 241, 177], [458, 362, 258, 194], [520, 412, 292, 220],
    [586, 450, 322, 250], [644, 504, 364, 280], [718, 560, 394, 310], [792, 624, 442, 338], [858, 666, 482, 382],
    [929, 711, 509, 403], [1003, 779, 565, 439], [1091, 857, 611, 461], [1171, 911, 661, 511],
    [1273, 997, 715, 535], [1367, 1059, 751, 593], [1465, 1125, 805, 625], [1528, 1190, 868, 658],
    [1628, 1264, 908, 698], [1732, 1370, 982, 742], [1840, 1452, 1030, 790], [1952, 1538, 1112, 842],
    [2068, 1628, 1168, 898], [2188, 1722, 1228, 958], [2303, 1809, 1283, 983], [2431, 1911, 1351, 1051],
    [2563, 1989, 1423, 1093], [2699, 2099, 1499, 1139], [2809, 2213, 1579, 1219], [2953, 2331, 1663, 1273],
]

let levels: [QRCode.Correction] = [.low, .medium, .quartile, .high]

@Suite("QR codes: versions and patterns")
struct QRCodeStructureTests {
    @Test("Each version holds the standard's byte capacity at each level")
    func capacities() {
        for (index, row) in byteCapacity.enumerated() {
            #expect(levels.map { QRCode.capacity(version: index + 1, $0) } == row, "version \(index + 1)")
        }
    }

    @Test("The smallest version that holds the data")
    func smallestVersion() throws {
        let cases: [(count: Int, correction: QRCode.Correction, version: Int)] = [
            (1, .high, 1), (17, .low, 1), (18, .low, 2), (7, .high, 1), (8, .high, 2),
            (180, .medium, 9), (181, .medium, 10),  // where the length field grows from 8 bits to 16
            (2331, .medium, 40), (2953, .low, 40),
        ]
        for (count, correction, version) in cases {
            let code = try QRCode(sampleText(count), correction: correction)
            #expect(code.version == version, "\(count) bytes at \(correction)")
            #expect(code.size == 17 + 4 * version)
        }
    }

    @Test("Past version 40's capacity it throws TooLong")
    func tooLong() throws {
        for (correction, capacity) in zip(levels, byteCapacity[39]) {
            let error = #expect(throws: QRCode.TooLong.self) {
                try QRCode(sampleText(capacity + 1), correction: correction)
            }
            #expect(error?.count == capacity + 1 && error?.capacity == capacity)
        }
    }

    @Test("Medium is the default correction")
    func defaultCorrection() throws {
        #expect(try QRCode(sampleText(14)).version == 1)
        #expect(try QRCode(sampleText(15)).version == 2)
    }

    @Test("Reed–Solomon: the HELLO WORLD 1-M example, and every codeword a multiple of the generator")
    func reedSolomon() {
        // The classic example: "HELLO WORLD" in alphanumeric mode, padded to version 1-M's 16 data codewords.
        let data: [UInt8] = [32, 91, 11, 120, 209, 114, 220, 77, 67, 64, 236, 17, 236, 17, 236, 17]
        let ec = ReedSolomon.remainder(data, divisor: ReedSolomon.generator(degree: 10))
        #expect(ec == [196, 35, 39, 119, 235, 215, 231, 226, 93, 23])
        // The generator's roots are α⁰ … α^(n−1): data and correction together vanish at each.
        for degree in [7, 10, 13, 17, 22, 28, 30] {
            let block = sampleText(degree * 3, seed: UInt32(degree))
            let codeword = block + ReedSolomon.remainder(block, divisor: ReedSolomon.generator(degree: degree))
            #expect((0..<degree).allSatisfy { evaluate(codeword, at: power(of: 2, $0)) == 0 }, "degree \(degree)")
        }
    }

    /// GF(256) by log and antilog tables, unlike the library's shift-and-add.
    private static let (exp, log): ([UInt8], [Int]) = {
        var exp = [UInt8](repeating: 0, count: 255)
        var log = [Int](repeating: 0, count: 256)
        var x = 1
        for i in 0..<255 {
            exp[i] = UInt8(x)
            log[x] = i
            x = x << 1 ^ (x & 0x80 != 0 ? 0x11D : 0)
        }
        return (exp, log)
    }()

    private func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        a == 0 || b == 0 ? 0 : Self.exp[(Self.log[Int(a)] + Self.log[Int(b)]) % 255]
    }

    private func power(of a: UInt8, _ n: Int) -> UInt8 { (0..<n).reduce(1) { product, _ in multiply(product, a) } }

    /// The polynomial with these coefficients, highest power first, at x (Horner).
    private func evaluate(_ coefficients: [UInt8], at x: UInt8) -> UInt8 {
        coefficients.reduce(0) { multiply($0, x) ^ $1 }
    }

    @Test("Finders in three corners, timing patterns between them, the dark module, a light quiet zone")
    func functionPatterns() throws {
        let code = try QRCode(Array(appLink.utf8))
        let last = code.size - 1
        for (left, top) in [(0, 0), (last - 6, 0), (0, last - 6)] {
            for dy in 0..<7 {
                for dx in 0..<7 {
                    let ring = max(abs(dx - 3), abs(dy - 3))
                    #expect(code[left + dx, top + dy] == (ring != 2), "finder at \(left),\(top)")
                }
            }
        }
        for i in 8...(last - 8) {
            #expect(code[i, 6] == (i % 2 == 0))
            #expect(code[6, i] == (i % 2 == 0))
        }
        #expect(code[8, code.size - 8])
        #expect(!code[-1, 0] && !code[0, -4] && !code[code.size, 3] && !code[3, code.size + 3])
    }
}

@Suite("QR codes: the PNG")
struct QRCodePNGTests {
    @Test("Signature, IHDR, one IDAT, IEND, each chunk's CRC-32 right; the pixels are the modules")
    func png() throws {
        #expect(crc32(Array("123456789".utf8)) == 0xCBF4_3926)  // the CRC-32 check value
        let code = try QRCode(Array(appLink.utf8), correction: .quartile)
        let scale = 3
        let png = code.png(scale: scale)
        #expect(png.prefix(8) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var chunks: [(type: String, data: [UInt8])] = []
        var offset = 8
        while offset + 12 <= png.count {
            let length = Int(bigEndian(png, offset))
            let typeAndData = Array(png[offset + 4..<offset + 8 + length])
            #expect(bigEndian(png, offset + 8 + length) == crc32(typeAndData))
            chunks.append((String(decoding: typeAndData.prefix(4), as: UTF8.self), Array(typeAndData.dropFirst(4))))
            offset += 12 + length
        }
        #expect(offset == png.count)
        #expect(chunks.map(\.type) == ["IHDR", "IDAT", "IEND"])
        #expect(png.suffix(12) == [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])

        let side = (code.size + 8) * scale
        let header = chunks[0].data
        #expect(bigEndian(header, 0) == side && bigEndian(header, 4) == side)
        #expect(Array(header[8...]) == [1, 0, 0, 0, 0], "1-bit greyscale")

        let pixels = try inflateStored(chunks[1].data)
        let rowBytes = (side + 7) / 8
        #expect(pixels.count == side * (rowBytes + 1))
        #expect((0..<side).allSatisfy { pixels[$0 * (rowBytes + 1)] == 0 }, "filter type none")
        var wrong: [String] = []
        for y in 0..<side {
            for x in 0..<side {
                let white = pixels[y * (rowBytes + 1) + 1 + x / 8] & (0x80 >> (x % 8)) != 0
                if white == code[x / scale - 4, y / scale - 4] { wrong.append("\(x),\(y)") }
            }
        }
        #expect(wrong.isEmpty, "pixels that are not their module: \(wrong.prefix(10))")
    }

    @Test("The data URI carries the PNG in base64")
    func dataURI() throws {
        let code = try QRCode(Array("https://relay.example/".utf8))
        let uri = code.pngDataURI(scale: 2)
        #expect(uri.hasPrefix("data:image/png;base64,"))
        #expect(Data(base64Encoded: String(uri.dropFirst("data:image/png;base64,".count))) == Data(code.png(scale: 2)))
    }

    private func bigEndian(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Bit by bit, unlike the library's table: the two agree only if both are right.
    private func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    struct NotStored: Error {}

    /// The zlib stream's stored deflate blocks put together, its header and Adler-32 checked.
    private func inflateStored(_ stream: [UInt8]) throws -> [UInt8] {
        guard stream.count >= 6, (Int(stream[0]) << 8 | Int(stream[1])) % 31 == 0, stream[0] & 0x0F == 8 else {
            throw NotStored()
        }
        var data: [UInt8] = []
        var offset = 2
        var final = false
        while !final {
            guard offset + 5 <= stream.count, stream[offset] & 0b110 == 0 else { throw NotStored() }
            final = stream[offset] & 1 == 1
            let length = Int(stream[offset + 1]) | Int(stream[offset + 2]) << 8
            let complement = Int(stream[offset + 3]) | Int(stream[offset + 4]) << 8
            guard length ^ complement == 0xFFFF, offset + 5 + length <= stream.count else { throw NotStored() }
            data += stream[offset + 5..<offset + 5 + length]
            offset += 5 + length
        }
        #expect(offset + 4 == stream.count)
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        #expect(bigEndian(stream, offset) == b << 16 | a, "Adler-32")
        return data
    }
}

/// zbarimg, a standard decoder (Debian: zbar-tools), found on PATH.
enum Zbar {
    static let path: String? = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        .split(separator: ":").map { $0 + "/zbarimg" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    /// CI installs zbar-tools: there a missing zbarimg fails these tests instead of skipping them.
    static let usable = path != nil || ProcessInfo.processInfo.environment["CI"] != nil

    /// The text zbarimg reads from the PNG, written to a file of its own.
    static func decode(_ png: [UInt8]) throws -> String {
        let zbarimg = try #require(path, "zbarimg is missing: install zbar-tools (apt-get install zbar-tools)")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("qrcode-\(UUID().uuidString).png")
        try Data(png).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: zbarimg)
        process.arguments = ["--raw", "-q", file.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let read = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "zbarimg found no code")
        var text = String(decoding: read, as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}

@Suite("QR codes: read back by a standard decoder", .enabled(if: Zbar.usable, "zbarimg is not installed (zbar-tools)"))
struct QRCodeDecodeTests {
    @Test("Lengths across versions, and the app link, at each correction", arguments: levels)
    func lengths(correction: QRCode.Correction) throws {
        let inputs = [1, 20, 100, 300, 1000].map { String(decoding: sampleText($0), as: UTF8.self) } + [appLink]
        for input in inputs {
            let code = try QRCode(Array(input.utf8), correction: correction)
            let decoded = try Zbar.decode(code.png())
            #expect(decoded == input, "\(input.utf8.count) bytes at \(correction), version \(code.version)")
        }
    }

    @Test("Every version, full to its capacity", arguments: 1...40)
    func version(_ version: Int) throws {
        let correction = levels[version % 4]
        let count = byteCapacity[version - 1][version % 4]
        let input = String(decoding: sampleText(count, seed: UInt32(version)), as: UTF8.self)
        let code = try QRCode(Array(input.utf8), correction: correction)
        #expect(code.version == version)
        #expect(try Zbar.decode(code.png(scale: 3)) == input, "v\(version) at \(correction)")
    }
}
