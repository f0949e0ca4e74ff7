import Foundation

/// `2026-11-22T08:58:00.123Z`: a date in UTC with milliseconds (truncated), as the API writes dates.
public enum ISO8601Milliseconds {
    public static func string(_ date: Date) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        append(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func append(_ date: Date, to bytes: inout [UInt8]) {
        // From the 2001 reference date, as Foundation computes: nanoseconds of the second, truncated.
        let reference = date.timeIntervalSinceReferenceDate
        let seconds = reference.rounded(.down)
        let milliseconds =
            (Int64(seconds) + 978_307_200) * 1000 + Int64((reference - seconds) * 1_000_000_000) / 1_000_000
        let (days, msOfDay) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
        let (day, ms) = msOfDay < 0 ? (days - 1, msOfDay + 86_400_000) : (days, msOfDay)
        let (year, month, dayOfMonth) = civil(fromDays: day)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(dayOfMonth, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(ms / 3_600_000, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(ms / 60_000 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(ms / 1000 % 60, 2)
        bytes.append(UInt8(ascii: "."))
        digits(ms % 1000, 3)
        bytes.append(UInt8(ascii: "Z"))
    }

    /// Year, month and day of the proleptic Gregorian calendar for days since 1970-01-01
    /// (Howard Hinnant's `civil_from_days`).
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
