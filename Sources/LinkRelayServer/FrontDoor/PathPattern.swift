/// A path pattern: literal segments, `{name}` for any one segment, and a last `**` for any rest.
struct PathPattern: Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case rest
    }

    private let segments: [Segment]
    let description: String

    init(stringLiteral pattern: String) {
        description = pattern
        segments = pattern.split(separator: "/").map { part in
            if part == "**" { return .rest }
            if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(String(part))
        }
    }

    /// The names of the `{name}` segments, in order.
    var parameterNames: [String] {
        segments.compactMap { if case .parameter(let name) = $0 { name } else { nil } }
    }

    /// The `{name}` segments of `path`, in order, or nil when it does not match. A `{name}` never matches
    /// an empty segment (`/l/` is no landing).
    func match(_ path: Substring) -> [Substring]? {
        guard path.first == "/" else { return nil }
        var rest = path.dropFirst()
        var captured: [Substring] = []
        for (index, segment) in segments.enumerated() {
            if segment == .rest { return captured }
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            let part = rest[..<end]
            switch segment {
            case .literal(let literal): guard part == literal else { return nil }
            case .parameter:
                guard !part.isEmpty else { return nil }
                captured.append(part)
            case .rest: break
            }
            let last = index == segments.count - 1
            if last { return end == rest.endIndex ? captured : nil }
            guard end != rest.endIndex else { return nil }
            rest = rest[rest.index(after: end)...]
        }
        // The root pattern `/`.
        return rest.isEmpty ? captured : nil
    }
}
