import Foundation

extension QRCode {
    /// A 1-bit greyscale PNG, `scale` (at least 1) pixels per module, with the 4-module quiet zone.
    public func png(scale: Int = 6) -> [UInt8] {
        let scale = max(1, scale)
        let side = (size + 8) * scale
        let rowBytes = (side + 7) / 8
        // Each row: filter type 0 (none), then 8 pixels a byte, most significant first, 1 = white.
        var pixels: [UInt8] = []
        pixels.reserveCapacity(side * (rowBytes + 1))
        for py in 0..<side {
            var row = [UInt8](repeating: 0xFF, count: rowBytes)
            for px in 0..<side where self[px / scale - 4, py / scale - 4] {
                row[px / 8] &= ~(0x80 >> UInt8(px % 8))
            }
            pixels.append(0)
            pixels += row
        }
        var header: [UInt8] = []
        header.appendBigEndian(UInt32(side))
        header.appendBigEndian(UInt32(side))
        header += [1, 0, 0, 0, 0]  // bit depth 1, greyscale, deflate, adaptive filtering, no interlace
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png.appendChunk("IHDR", header)
        png.appendChunk("IDAT", PNG.zlibStored(pixels))
        png.appendChunk("IEND", [])
        return png
    }

    /// "data:image/png;base64,..."
    public func pngDataURI(scale: Int = 6) -> String {
        "data:image/png;base64," + Data(png(scale: scale)).base64EncodedString()
    }
}

private enum PNG {
    /// A zlib stream of stored (uncompressed) deflate blocks: a two-colour image is small as it is, and no
    /// compressor is needed.
    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var stream: [UInt8] = [0x78, 0x01]  // deflate, 32 KiB window; the check bits make it a multiple of 31
        var start = 0
        repeat {
            let end = min(start + 65_535, data.count)
            let length = UInt16(end - start)
            stream.append(end == data.count ? 1 : 0)  // BFINAL, BTYPE 00 (stored)
            stream += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)]
            stream += data[start..<end]
            start = end
        } while start < data.count
        stream.appendBigEndian(adler32(data))
        return stream
    }

    static func adler32(_ data: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return b << 16 | a
    }

    static func crc32(_ data: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return ~crc
    }

    /// CRC-32 (ISO 3309, reflected polynomial 0xEDB88320) of each byte value.
    private static let crcTable: [UInt32] = (0..<256).map { value in
        var crc = UInt32(value)
        for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        return crc
    }
}

extension [UInt8] {
    fileprivate mutating func appendBigEndian(_ value: UInt32) {
        self += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// Length, type, data, and the CRC-32 of type and data.
    fileprivate mutating func appendChunk(_ type: String, _ data: [UInt8]) {
        appendBigEndian(UInt32(data.count))
        let typeAndData = Array(type.utf8) + data
        self += typeAndData
        appendBigEndian(PNG.crc32(typeAndData))
    }
}
