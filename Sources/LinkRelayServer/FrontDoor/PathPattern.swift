/// A path pattern: literal segments, `{name}` for any one segment, and a last `**` for any rest.
struct PathPattern: Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    private enum Segment: Sendable, Equatable {
        case literal([UInt8])
        case parameter(String)
        case rest
    }

    private let segments: [Segment]
    let description: String
    /// The names of the `{name}` segments, in order.
    let parameterNames: [String]

    init(stringLiteral pattern: String) {
        description = pattern
        segments = pattern.split(separator: "/").map { part in
            if part == "**" { return .rest }
            if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(Array(part.utf8))
        }
        parameterNames = segments.compactMap { if case .parameter(let name) = $0 { name } else { nil } }
    }

    /// The `{name}` segments of `path`, in order, or nil when it does not match. A `{name}` never matches
    /// an empty segment (`/l/` is no landing).
    /// The path is read as UTF-8 bytes: a request target is ASCII, and bytes are cheaper to step through
    /// than `Character`s.
    func match(_ path: Substring) -> [Substring]? {
        let slash = UInt8(ascii: "/")
        guard path.utf8.first == slash else { return nil }
        var rest = path[path.utf8.index(after: path.startIndex)...]
        var captured: [Substring] = []
        for (index, segment) in segments.enumerated() {
            if segment == .rest { return captured }
            let end = rest.utf8.firstIndex(of: slash) ?? rest.endIndex
            let part = rest[..<end]
            switch segment {
            case .literal(let literal): guard part.utf8.elementsEqual(literal) else { return nil }
            case .parameter:
                guard !part.isEmpty else { return nil }
                captured.append(part)
            case .rest: break
            }
            let last = index == segments.count - 1
            if last { return end == rest.endIndex ? captured : nil }
            guard end != rest.endIndex else { return nil }
            rest = rest[rest.utf8.index(after: end)...]
        }
        // The root pattern `/`.
        return rest.isEmpty ? captured : nil
    }
}
