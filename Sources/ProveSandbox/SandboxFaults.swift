import Foundation

/// Why a fault spec, a fault or an endpoint name was refused; `description` is one line naming the problem.
public struct SandboxFaultError: Error, CustomStringConvertible, Equatable, Sendable {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A fault the sandbox injects into the answers of one Prove endpoint (see ``ProveSandbox/setFault(_:for:)``).
///
/// - `latency` delays every answer of the endpoint, normal or faulted.
/// - The *failure* is what a failing request gets; at most one of: an HTTP error (`status` and/or `retryAfter`,
///   or only `errorRate`), `malformed`, `hang` or `drop`.
/// - `errorRate` picks which requests fail, deterministically: counting the endpoint's requests from 1 since the
///   fault was set, request n fails when ⌊n·rate⌋ > ⌊(n−1)·rate⌋ (rate 1: all, 0.5: every 2nd, 0: none).
///   Without `errorRate`, every request fails when a failure is set.
/// - An HTTP error without `status` is 500, or 429 when `retryAfter` is set.
///
/// A failing request is answered before authorization and validation, and changes no sandbox state (no session
/// is created, no SMS is sent). It still counts in ``ProveSandbox/callCount(_:)``.
///
/// JSON (the `PUT /sandbox/faults/{endpoint}` body and `GET /sandbox/faults`): `{"latencyMs": 250,
/// "errorRate": 0.5, "status": 503, "retryAfter": 2, "hang": true, "malformed": true, "drop": true}`, every key
/// optional; unknown keys are refused.
public struct SandboxFault: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Delay before each answer; at most ``maxLatency``.
    public var latency: Duration?
    /// The fraction 0…1 of requests that fail.
    public var errorRate: Double?
    /// The HTTP status of the error answer, 400…599 (default 500, or 429 with `retryAfter`).
    public var status: Int?
    /// Seconds for the `Retry-After` header of the error answer; alone it means status 429.
    public var retryAfter: Int?
    /// Failing requests are never answered: `respond` waits until the client disconnects, the fault changes or
    /// the server shuts down (at most ``ProveSandbox/maxHang``), then the connection closes without a response.
    public var hang: Bool
    /// Failing requests get 200 with `Content-Type: application/json` and a truncated JSON object.
    public var malformed: Bool
    /// Failing requests get their connection closed without any HTTP response.
    public var drop: Bool

    /// The largest `latency`.
    public static let maxLatency: Duration = .seconds(600)

    public init(
        latency: Duration? = nil,
        errorRate: Double? = nil,
        status: Int? = nil,
        retryAfter: Int? = nil,
        hang: Bool = false,
        malformed: Bool = false,
        drop: Bool = false
    ) {
        self.latency = latency
        self.errorRate = errorRate
        self.status = status
        self.retryAfter = retryAfter
        self.hang = hang
        self.malformed = malformed
        self.drop = drop
    }

    /// Every answer delayed by `latency`.
    public static func latency(_ latency: Duration) -> SandboxFault {
        SandboxFault(latency: latency)
    }

    /// The fraction `rate` of requests answered with `status` and Prove's error body.
    public static func error(rate: Double = 1, status: Int = 500) -> SandboxFault {
        SandboxFault(errorRate: rate, status: status)
    }

    /// The fraction `rate` of requests answered 429 with `Retry-After: retryAfter`.
    public static func rateLimited(retryAfter: Int, rate: Double = 1) -> SandboxFault {
        SandboxFault(errorRate: rate, status: 429, retryAfter: retryAfter)
    }

    /// No request is answered.
    public static let hang = SandboxFault(hang: true)
    /// Every request answered 200 with a body that is not JSON.
    public static let malformed = SandboxFault(malformed: true)
    /// Every request's connection closed without a response.
    public static let drop = SandboxFault(drop: true)

    /// What a failing request gets.
    public enum Failure: Sendable, Equatable {
        /// An HTTP error with Prove's error body, and `Retry-After` when `retryAfter` is set.
        case status(Int, retryAfter: Int?)
        case malformed
        case hang
        case drop
    }

    /// What a failing request gets; `nil` when the fault is only latency.
    public var failure: Failure? {
        if hang { return .hang }
        if drop { return .drop }
        if malformed { return .malformed }
        if status != nil || retryAfter != nil || errorRate != nil {
            return .status(status ?? (retryAfter == nil ? 500 : 429), retryAfter: retryAfter)
        }
        return nil
    }

    /// Whether the fault does nothing (setting it clears the endpoint's fault).
    public var isEmpty: Bool {
        latency == nil && failure == nil
    }

    /// Whether request `number` (counting from 1 since the fault was set) fails.
    public func fails(requestNumber number: Int) -> Bool {
        guard failure != nil, number > 0 else { return false }
        let rate = errorRate ?? 1
        // The epsilon keeps products such as 0.29 × 100 = 28.999… on the integer they mean.
        func failures(_ n: Int) -> Double { (Double(n) * rate + 1e-9).rounded(.down) }
        return failures(number) > failures(number - 1)
    }

    /// Throws when a value is out of range or two failures are combined.
    public func validate() throws(SandboxFaultError) {
        if let latency, latency < .zero || latency > Self.maxLatency {
            throw SandboxFaultError("latency must be between 0 and \(Self.maxLatency), got \(latency)")
        }
        if let errorRate, !(0...1).contains(errorRate) {
            throw SandboxFaultError("error rate must be between 0 and 1, got \(errorRate)")
        }
        if let status, !(400...599).contains(status) {
            throw SandboxFaultError("status must be an HTTP error status 400…599, got \(status)")
        }
        if let retryAfter, retryAfter < 0 {
            throw SandboxFaultError("retry-after must not be negative, got \(retryAfter)")
        }
        var failures: [String] = []
        if status != nil || retryAfter != nil { failures.append("status/retry-after") }
        if hang { failures.append("hang") }
        if malformed { failures.append("malformed") }
        if drop { failures.append("drop") }
        if failures.count > 1 {
            throw SandboxFaultError("choose one failure, not \(failures.joined(separator: " and "))")
        }
    }

    /// The fault as spec items, e.g. `latency=250ms,error=0.5,status=503`.
    public var description: String {
        var items: [String] = []
        if let latency { items.append("latency=\(Self.milliseconds(latency))ms") }
        if let errorRate { items.append("error=\(errorRate)") }
        if let status { items.append("status=\(status)") }
        if let retryAfter { items.append("retry-after=\(retryAfter)") }
        if hang { items.append("hang") }
        if malformed { items.append("malformed") }
        if drop { items.append("drop") }
        return items.joined(separator: ",")
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    // MARK: Spec text

    /// Parses comma-separated items: `latency=250ms` (or `2s`, `1.5s`), `error=RATE` (0…1), `status=CODE`
    /// (400…599), `retry-after=SECONDS` (status 429 unless `status` is given), `hang`, `malformed`, `drop`.
    public static func parse(items text: String) throws(SandboxFaultError) -> SandboxFault {
        var fault = SandboxFault()
        var seen: Set<String> = []
        let items = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard items != [""] else { throw SandboxFaultError("no fault items") }
        for item in items {
            guard !item.isEmpty else { throw SandboxFaultError("empty item") }
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            let value = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : nil
            guard seen.insert(name).inserted else { throw SandboxFaultError("item \"\(name)\" given twice") }
            switch name {
            case "latency":
                fault.latency = try parseLatency(try required(value, for: name))
            case "error":
                let text = try required(value, for: name)
                guard let rate = Double(text), rate.isFinite, (0...1).contains(rate) else {
                    throw SandboxFaultError("error rate must be a number between 0 and 1, got \"\(text)\"")
                }
                fault.errorRate = rate
            case "status":
                let text = try required(value, for: name)
                guard let status = Int(text), (400...599).contains(status) else {
                    throw SandboxFaultError("status must be an HTTP error status 400…599, got \"\(text)\"")
                }
                fault.status = status
            case "retry-after":
                let text = try required(value, for: name)
                guard let seconds = Int(text), seconds >= 0 else {
                    throw SandboxFaultError("retry-after must be a whole number of seconds ≥ 0, got \"\(text)\"")
                }
                fault.retryAfter = seconds
            case "hang", "malformed", "drop":
                guard value == nil else { throw SandboxFaultError("\(name) takes no value") }
                switch name {
                case "hang": fault.hang = true
                case "malformed": fault.malformed = true
                default: fault.drop = true
                }
            default:
                throw SandboxFaultError(
                    "unknown item \"\(name)\" (expected latency=, error=, status=, retry-after=, hang, malformed, drop)"
                )
            }
        }
        try fault.validate()
        return fault
    }

    private static func required(_ value: String?, for name: String) throws(SandboxFaultError) -> String {
        guard let value, !value.isEmpty else { throw SandboxFaultError("\(name) needs a value, e.g. \(name)=1") }
        return value
    }

    private static func parseLatency(_ text: String) throws(SandboxFaultError) -> Duration {
        let unitIsMilliseconds = text.hasSuffix("ms")
        guard unitIsMilliseconds || text.hasSuffix("s") else {
            throw SandboxFaultError("latency needs a unit, e.g. 250ms or 2s, got \"\(text)\"")
        }
        let number = text.dropLast(unitIsMilliseconds ? 2 : 1)
        guard let value = Double(number), value.isFinite else {
            throw SandboxFaultError("latency must be a number of ms or s, got \"\(text)\"")
        }
        guard value >= 0 else { throw SandboxFaultError("latency must not be negative, got \"\(text)\"") }
        let total = unitIsMilliseconds ? value : value * 1000
        guard total <= Double(milliseconds(maxLatency)) else {
            throw SandboxFaultError("latency must be at most \(maxLatency), got \"\(text)\"")
        }
        return .milliseconds(total)
    }

    // MARK: Codable

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case latencyMs
        case errorRate
        case status
        case retryAfter
        case hang
        case malformed
        case drop
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        if let unknown = try decoder.container(keyedBy: AnyKey.self).allKeys.first(where: {
            !known.contains($0.stringValue)
        }) {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [unknown], debugDescription: "unknown key \"\(unknown.stringValue)\"")
            )
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        latency = try container.decodeIfPresent(Int.self, forKey: .latencyMs).map { .milliseconds($0) }
        errorRate = try container.decodeIfPresent(Double.self, forKey: .errorRate)
        status = try container.decodeIfPresent(Int.self, forKey: .status)
        retryAfter = try container.decodeIfPresent(Int.self, forKey: .retryAfter)
        hang = try container.decodeIfPresent(Bool.self, forKey: .hang) ?? false
        malformed = try container.decodeIfPresent(Bool.self, forKey: .malformed) ?? false
        drop = try container.decodeIfPresent(Bool.self, forKey: .drop) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(latency.map(Self.milliseconds), forKey: .latencyMs)
        try container.encodeIfPresent(errorRate, forKey: .errorRate)
        try container.encodeIfPresent(status, forKey: .status)
        try container.encodeIfPresent(retryAfter, forKey: .retryAfter)
        if hang { try container.encode(true, forKey: .hang) }
        if malformed { try container.encode(true, forKey: .malformed) }
        if drop { try container.encode(true, forKey: .drop) }
    }
}

/// `GET /sandbox/faults` response body: endpoint name ("unify", "*", …) → fault.
public struct SandboxFaultList: Codable, Sendable, Equatable {
    public var faults: [String: SandboxFault]

    public init(faults: [String: SandboxFault]) {
        self.faults = faults
    }
}
