/// A QR code (ISO/IEC 18004) of bytes in byte mode, at the smallest version that holds them.
public struct QRCode: Sendable {
    /// How much of the symbol may be lost and still read: about 7, 15, 25 and 30 %.
    public enum Correction: Sendable {
        case low, medium, quartile, high
    }

    /// The data is longer than a version-40 symbol holds at that correction.
    public struct TooLong: Error, Sendable, Equatable {
        /// The data's bytes.
        public let count: Int
        /// The most bytes version 40 holds at that correction.
        public let capacity: Int
    }

    public let version: Int
    /// Modules per side: 17 + 4 × version.
    public let size: Int
    private let modules: [Bool]  // row-major, true = dark

    /// Encodes `data` in byte mode at the smallest version (1–40) that holds it; throws `QRCode.TooLong` past
    /// version 40.
    public init(_ data: some Collection<UInt8>, correction: Correction = .medium) throws {
        let bytes = Array(data)
        guard let version = (1...40).first(where: { Self.capacity(version: $0, correction) >= bytes.count }) else {
            throw TooLong(count: bytes.count, capacity: Self.capacity(version: 40, correction))
        }
        var grid = Grid(version: version)
        grid.place(Self.codewords(bytes, version: version, correction))
        // Every mask gives a valid symbol; the one with the lowest penalty is the easiest to scan.
        let masked = (0..<8).map { mask in
            var masked = grid
            masked.apply(mask: mask, correction: correction)
            return (penalty: masked.penalty, grid: masked)
        }
        self.version = version
        self.size = grid.size
        self.modules = masked.min { $0.penalty < $1.penalty }!.grid.dark
    }

    /// True for a dark module; false outside the symbol (the quiet zone is light).
    public subscript(x: Int, y: Int) -> Bool {
        guard (0..<size).contains(x), (0..<size).contains(y) else { return false }
        return modules[y * size + x]
    }

    /// The most bytes a version holds at a correction: its data codewords less the mode and count header.
    static func capacity(version: Int, _ correction: Correction) -> Int {
        (dataCodewords(version: version, correction) * 8 - 4 - countBits(version)) / 8
    }

    private static func countBits(_ version: Int) -> Int { version < 10 ? 8 : 16 }

    // MARK: Codewords

    /// The data codewords (header, bytes, terminator, padding) split into blocks, each block's Reed–Solomon
    /// codewords appended, and both interleaved block by block as the symbol stores them.
    private static func codewords(_ bytes: [UInt8], version: Int, _ correction: Correction) -> [UInt8] {
        let capacity = dataCodewords(version: version, correction)
        var bits = BitBuffer()
        bits.append(0b0100, count: 4)  // byte mode
        bits.append(bytes.count, count: countBits(version))
        for byte in bytes { bits.append(Int(byte), count: 8) }
        bits.append(0, count: min(4, capacity * 8 - bits.count))  // terminator
        bits.append(0, count: (8 - bits.count % 8) % 8)
        var data = bits.bytes
        let padding = capacity - data.count
        for pad in 0..<padding { data.append(pad % 2 == 0 ? 0xEC : 0x11) }

        let (blockCount, ecPerBlock) = ecBlocks(version: version, correction)
        let total = rawModules(version: version) / 8
        // The blocks differ by one data codeword at most; the short ones come first.
        let shortBlocks = blockCount - total % blockCount
        let shortData = total / blockCount - ecPerBlock
        let divisor = ReedSolomon.generator(degree: ecPerBlock)
        var blocks: [[UInt8]] = []
        var start = 0
        for index in 0..<blockCount {
            let end = start + shortData + (index < shortBlocks ? 0 : 1)
            blocks.append(Array(data[start..<end]))
            start = end
        }
        let ec = blocks.map { ReedSolomon.remainder($0, divisor: divisor) }
        var result: [UInt8] = []
        for column in 0...shortData {
            for block in blocks where column < block.count { result.append(block[column]) }
        }
        for column in 0..<ecPerBlock {
            for block in ec { result.append(block[column]) }
        }
        return result
    }

    private static func dataCodewords(version: Int, _ correction: Correction) -> Int {
        let (blocks, ecPerBlock) = ecBlocks(version: version, correction)
        return rawModules(version: version) / 8 - blocks * ecPerBlock
    }

    /// The modules left for codewords: size² less the finders with their separators (192), the format
    /// information with the dark module (31) and timing (8v + 2); less the n² − 3 alignment patterns (25
    /// modules each, 5 fewer for each on row or column 6, which timing already counts); less the version
    /// information (36, from version 7).
    private static func rawModules(version v: Int) -> Int {
        var modules = (16 * v + 128) * v + 64
        if v >= 2 {
            let n = v / 7 + 2
            modules -= (25 * n - 10) * n - 55
        }
        if v >= 7 { modules -= 36 }
        return modules
    }

    /// The error correction blocks of a version (the standard's table, by correction then version):
    /// how many blocks, and the Reed–Solomon codewords in each.
    private static func ecBlocks(version: Int, _ correction: Correction) -> (blocks: Int, ecPerBlock: Int) {
        (blockCounts[correction.row][version - 1], ecCodewordsPerBlock[correction.row][version - 1])
    }

    private static let ecCodewordsPerBlock: [[Int]] = [
        [
            7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28,
            28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
        [
            10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
            26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
        ],
        [
            13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30,
            28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
        [
            17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28,
            30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
        ],
    ]

    private static let blockCounts: [[Int]] = [
        [
            1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8,
            8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25,
        ],
        [
            1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
            17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49,
        ],
        [
            1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20,
            23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68,
        ],
        [
            1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25,
            25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81,
        ],
    ]
}

extension QRCode.Correction {
    /// The row of the block tables: L, M, Q, H.
    fileprivate var row: Int {
        switch self {
        case .low: 0
        case .medium: 1
        case .quartile: 2
        case .high: 3
        }
    }

    /// The level's two bits in the format information.
    fileprivate var formatBits: Int {
        switch self {
        case .low: 0b01
        case .medium: 0b00
        case .quartile: 0b11
        case .high: 0b10
        }
    }
}

/// Bits appended most significant first, read back as bytes.
private struct BitBuffer {
    private(set) var count = 0
    private(set) var bytes: [UInt8] = []

    mutating func append(_ value: Int, count width: Int) {
        for shift in stride(from: width - 1, through: 0, by: -1) {
            if count % 8 == 0 { bytes.append(0) }
            if (value >> shift) & 1 == 1 { bytes[count / 8] |= 0x80 >> UInt8(count % 8) }
            count += 1
        }
    }
}

/// Reed–Solomon error correction over GF(256) with the QR polynomial x⁸ + x⁴ + x³ + x² + 1.
enum ReedSolomon {
    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        var product: UInt8 = 0
        var a = a
        var b = b
        while b != 0 {
            if b & 1 == 1 { product ^= a }
            a = (a << 1) ^ (a & 0x80 != 0 ? 0x1D : 0)
            b >>= 1
        }
        return product
    }

    /// The coefficients of (x − α⁰)(x − α¹)…(x − α^(degree−1)) below the leading 1, highest power first.
    static func generator(degree: Int) -> [UInt8] {
        var coefficients = [UInt8](repeating: 0, count: degree)
        coefficients[degree - 1] = 1
        var root: UInt8 = 1
        for _ in 0..<degree {
            // Multiply by (x − root): shift up one power, add root × the old coefficients.
            for index in coefficients.indices {
                coefficients[index] = multiply(coefficients[index], root)
                if index + 1 < degree { coefficients[index] ^= coefficients[index + 1] }
            }
            root = multiply(root, 2)
        }
        return coefficients
    }

    /// The remainder of data · x^degree divided by the generator: the error correction codewords.
    static func remainder(_ data: [UInt8], divisor: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: divisor.count)
        for byte in data {
            let factor = byte ^ result.removeFirst()
            result.append(0)
            for index in result.indices { result[index] ^= multiply(divisor[index], factor) }
        }
        return result
    }
}

/// The modules of a symbol, and which of them the function patterns hold (data and masks leave those alone).
private struct Grid {
    let version: Int
    let size: Int
    var dark: [Bool]
    var reserved: [Bool]

    init(version: Int) {
        self.version = version
        size = 17 + 4 * version
        dark = Array(repeating: false, count: size * size)
        reserved = Array(repeating: false, count: size * size)
        for i in 0..<size {
            set(6, i, i % 2 == 0)
            set(i, 6, i % 2 == 0)
        }
        // Finders with their light separators, drawn over the timing patterns' ends.
        for (cx, cy) in [(3, 3), (size - 4, 3), (3, size - 4)] {
            for dy in -4...4 {
                for dx in -4...4 where (0..<size).contains(cx + dx) && (0..<size).contains(cy + dy) {
                    let ring = max(abs(dx), abs(dy))
                    set(cx + dx, cy + dy, ring != 2 && ring != 4)
                }
            }
        }
        // Alignment patterns on every pair of centres but the three the finders hold.
        let centres = alignmentCentres
        for cx in centres {
            for cy in centres {
                if [(6, 6), (6, size - 7), (size - 7, 6)].contains(where: { $0 == (cx, cy) }) { continue }
                for dy in -2...2 {
                    for dx in -2...2 { set(cx + dx, cy + dy, max(abs(dx), abs(dy)) != 1) }
                }
            }
        }
        // Reserve the format information (drawn again per mask), with the dark module beside it.
        drawFormat(0)
        // The version (from 7) in 6 bits with their 12-bit BCH code, beside the top-right and bottom-left finders.
        if version >= 7 {
            var remainder = version
            for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
            let bits = version << 12 | remainder
            for i in 0..<18 {
                let bit = (bits >> i) & 1 == 1
                set(size - 11 + i % 3, i / 3, bit)
                set(i / 3, size - 11 + i % 3, bit)
            }
        }
    }

    /// Rows and columns of the alignment patterns' centres, as the standard's table has them: 6, then evenly
    /// spaced back from size − 7 in even steps.
    private var alignmentCentres: [Int] {
        guard version >= 2 else { return [] }
        let count = version / 7 + 2
        let step = (version * 8 + count * 3 + 5) / (count * 4 - 4) * 2
        return [6] + (0..<count - 1).map { size - 7 - $0 * step }.reversed()
    }

    private mutating func set(_ x: Int, _ y: Int, _ isDark: Bool) {
        dark[y * size + x] = isDark
        reserved[y * size + x] = true
    }

    /// The codewords' bits, most significant first, in two-module columns zigzagging up and down from the
    /// bottom right, skipping the vertical timing column; the remainder bits stay light.
    mutating func place(_ codewords: [UInt8]) {
        var index = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = (right + 1) & 2 == 0
            for step in 0..<size {
                let y = upward ? size - 1 - step : step
                for x in [right, right - 1] where !reserved[y * size + x] && index < codewords.count * 8 {
                    dark[y * size + x] = (codewords[index / 8] >> (7 - index % 8)) & 1 == 1
                    index += 1
                }
            }
            right -= 2
        }
    }

    /// Flips the data modules where the mask's condition holds, and writes the format information that names it.
    mutating func apply(mask: Int, correction: QRCode.Correction) {
        for y in 0..<size {
            for x in 0..<size where !reserved[y * size + x] {
                let flip: Bool
                switch mask {
                case 0: flip = (x + y) % 2 == 0
                case 1: flip = y % 2 == 0
                case 2: flip = x % 3 == 0
                case 3: flip = (x + y) % 3 == 0
                case 4: flip = (x / 3 + y / 2) % 2 == 0
                case 5: flip = x * y % 2 + x * y % 3 == 0
                case 6: flip = (x * y % 2 + x * y % 3) % 2 == 0
                default: flip = ((x + y) % 2 + x * y % 3) % 2 == 0
                }
                if flip { dark[y * size + x].toggle() }
            }
        }
        drawFormat(correction.formatBits << 3 | mask)
    }

    /// The 5 format bits (correction level, mask) with their BCH code, twice: around the top-left finder, and
    /// split between the other two.
    private mutating func drawFormat(_ data: Int) {
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        let bits = (data << 10 | remainder) ^ 0x5412
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }
        for i in 0...5 { set(8, i, bit(i)) }
        set(8, 7, bit(6))
        set(8, 8, bit(7))
        set(7, 8, bit(8))
        for i in 9..<15 { set(14 - i, 8, bit(i)) }
        for i in 0..<8 { set(size - 1 - i, 8, bit(i)) }
        for i in 8..<15 { set(8, size - 15 + i, bit(i)) }
        set(8, size - 8, true)
    }

    /// The standard's penalty: runs of five or more, 2×2 blocks, finder-like 1:1:3:1:1 patterns with four
    /// light modules on one side, and the dark share's distance from half.
    var penalty: Int {
        var score = 0
        let finderThenLight = 0b101_1101_0000
        let lightThenFinder = 0b000_0101_1101
        // Rows, then columns: module i of a line is dark[line * across + i * along].
        for (across, along) in [(size, 1), (1, size)] {
            for line in 0..<size {
                var run = 0
                var previous = false
                // The last 11 modules as bits, the newest lowest; 0 before the line: the quiet zone is light.
                var window = 0
                for i in 0..<size + 4 {
                    let isDark = i < size && dark[line * across + i * along]
                    if i < size {
                        run = i > 0 && isDark == previous ? run + 1 : 1
                        if run >= 5 { score += run == 5 ? 3 : 1 }
                        previous = isDark
                    }
                    window = (window << 1 | (isDark ? 1 : 0)) & 0x7FF
                    if window == finderThenLight || window == lightThenFinder { score += 40 }
                }
            }
        }
        for y in 0..<size - 1 {
            for x in 0..<size - 1 {
                let colour = dark[y * size + x]
                if dark[y * size + x + 1] == colour && dark[(y + 1) * size + x] == colour
                    && dark[(y + 1) * size + x + 1] == colour
                {
                    score += 3
                }
            }
        }
        let darkCount = dark.count(where: { $0 })
        score += abs(darkCount * 20 - dark.count * 10) / dark.count * 10
        return score
    }
}
