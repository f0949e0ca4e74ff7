/// An optional kept behind a pointer while it holds a value, and in no room at all while it is nil.
///
/// A session carries a result only once it has ended, and a Pre-Fill progress or a Nevis operation only
/// in those flows: inline, the three took 505 of a `Session`'s 800 bytes in every copy, and the store's
/// cache keeps a copy of each live session (docs/memory.md). The value is immutable in its box, so a
/// copy of a session shares it, and a write makes a new one.
///
/// `Codable` as the optional itself: a nil is left out, and a missing key reads as nil.
@propertyWrapper
public enum Boxed<Value: Sendable>: Sendable {
    case absent
    indirect case present(Value)

    public init(wrappedValue: Value?) {
        self = wrappedValue.map { .present($0) } ?? .absent
    }

    public var wrappedValue: Value? {
        get {
            guard case .present(let value) = self else { return nil }
            return value
        }
        set { self = Boxed(wrappedValue: newValue) }
    }
}

extension Boxed: Equatable where Value: Equatable {}

extension Boxed: Encodable where Value: Encodable {
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(wrappedValue)
    }
}

extension Boxed: Decodable where Value: Decodable {
    public init(from decoder: any Decoder) throws {
        self.init(wrappedValue: try decoder.singleValueContainer().decode(Value?.self))
    }
}

extension KeyedEncodingContainer {
    /// Leaves a nil out, as synthesized `Codable` does for an optional.
    public mutating func encode<Value: Encodable>(_ value: Boxed<Value>, forKey key: Key) throws {
        try encodeIfPresent(value.wrappedValue, forKey: key)
    }
}

extension KeyedDecodingContainer {
    /// Reads a missing key as nil, as synthesized `Codable` does for an optional.
    public func decode<Value: Decodable>(_ type: Boxed<Value>.Type, forKey key: Key) throws -> Boxed<Value> {
        Boxed(wrappedValue: try decodeIfPresent(Value.self, forKey: key))
    }
}
