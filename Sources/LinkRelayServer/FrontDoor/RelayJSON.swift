import Foundation
import LinkRelaySupport

/// JSON as the relay writes it: dates in ISO 8601 with milliseconds, keys in a stable order.
enum RelayJSON {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601Milliseconds.string(date))
        }
        return encoder
    }()

    /// The value's JSON; the relay encodes only its own types, whose encoding cannot fail.
    static func encode(_ value: some Encodable) -> Data { (try? encoder.encode(value)) ?? Data("{}".utf8) }
}
