import Foundation
import ProveSandbox

/// A Nevis endpoint of the sandbox that a fault can be set on. Faults never apply to the redeem
/// endpoint, the app page or the fault control endpoints.
public enum NevisEndpoint: String, CaseIterable, Codable, Sendable {
    /// Auth Cloud `POST /api/v1/approval`.
    case approval
    /// Auth Cloud `POST /api/v1/status`.
    case status
    /// nevisFIDO `POST /nevisfido/token/dispatch/authentication`.
    case dispatch
    /// nevisFIDO `POST /nevisfido/status`.
    case fidoStatus = "fido-status"
    /// `*`: every Nevis endpoint without a fault of its own.
    case all = "*"

    /// The endpoint named `name` ("approval", "status", "dispatch", "fido-status", "*").
    public init(name: String) throws(SandboxFaultError) {
        guard let endpoint = NevisEndpoint(rawValue: name) else {
            let names = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw SandboxFaultError("unknown endpoint \"\(name)\" (expected one of \(names))")
        }
        self = endpoint
    }
}

/// A fault of one Nevis endpoint: Prove's ``SandboxFault`` (latency, an HTTP error with an error rate,
/// `malformed`, `hang`, `drop`), plus nevisFIDO's own failure, `dispatchError` (HTTP 200 with
/// `dispatchResult: dispatchError`, on `dispatch` only), and `times`: the fault acts on the next `times`
/// requests of the endpoints it covers, then clears itself.
///
/// JSON (`PUT /sandbox/nevis/faults/{endpoint}`, `GET /sandbox/nevis/faults`): Prove's keys (`latencyMs`,
/// `errorRate`, `status`, `retryAfter`, `hang`, `malformed`, `drop`) and `dispatchError`, `times`; every
/// key optional, unknown keys refused. As spec items: Prove's, and `dispatch-error`, `times=N`.
public struct NevisFault: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Latency and the HTTP-level failure, as Prove's faults have them.
    public var fault: SandboxFault
    /// Failing dispatches answer 200 with `dispatchResult: dispatchError` (the error rate picks which).
    public var dispatchError: Bool
    /// How many requests the fault acts on before it clears itself; nil: until cleared.
    public var times: Int?

    public init(_ fault: SandboxFault = SandboxFault(), dispatchError: Bool = false, times: Int? = nil) {
        self.fault = fault
        self.dispatchError = dispatchError
        self.times = times
    }

    /// The next `times` requests answered with `status` and the sandbox's error body.
    public static func error(status: Int = 500, times: Int? = nil) -> NevisFault {
        NevisFault(SandboxFault(status: status), times: times)
    }

    /// The next `times` dispatches answered 200 with `dispatchResult: dispatchError`.
    public static func dispatchError(times: Int? = 1) -> NevisFault {
        NevisFault(dispatchError: true, times: times)
    }

    /// Every answer delayed by `latency`.
    public static func latency(_ latency: Duration) -> NevisFault {
        NevisFault(.latency(latency))
    }

    /// No request is answered (see ``SandboxFault/hang``).
    public static let hang = NevisFault(.hang)
    /// Every request's connection closed without a response.
    public static let drop = NevisFault(.drop)

    /// What a failing request gets.
    public enum Failure: Sendable, Equatable {
        case http(SandboxFault.Failure)
        case dispatchError
    }

    /// What a failing request gets; nil when the fault is only latency.
    public var failure: Failure? {
        dispatchError ? .dispatchError : fault.failure.map(Failure.http)
    }

    /// Whether setting it clears the endpoint's fault.
    public var isEmpty: Bool { fault.latency == nil && failure == nil }

    /// Whether request `number` (from 1 since the fault was set) fails: Prove's error-rate rule.
    public func fails(requestNumber number: Int) -> Bool {
        guard failure != nil else { return false }
        // An error rate alone is a failing fault, so the rule reads the rate whatever the failure is.
        return SandboxFault(errorRate: fault.errorRate ?? 1).fails(requestNumber: number)
    }

    /// Throws when a value is out of range or two failures are combined.
    public func validate() throws(SandboxFaultError) {
        try fault.validate()
        if let times, times < 1 { throw SandboxFaultError("times must be at least 1, got \(times)") }
        if dispatchError, fault.status != nil || fault.retryAfter != nil || fault.hang || fault.malformed || fault.drop
        {
            throw SandboxFaultError("choose one failure: dispatchError takes no status, hang, malformed or drop")
        }
    }

    /// The fault as spec items, e.g. `error=1.0,status=503,times=2`.
    public var description: String {
        var items = fault.description.isEmpty ? [] : [fault.description]
        if dispatchError { items.append("dispatch-error") }
        if let times { items.append("times=\(times)") }
        return items.joined(separator: ",")
    }

    /// Parses comma-separated items: those of ``SandboxFault/parse(items:)``, `dispatch-error`, `times=N`.
    public static func parse(items text: String) throws(SandboxFaultError) -> NevisFault {
        var proveItems: [String] = []
        var fault = NevisFault()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = item.trimmingCharacters(in: .whitespaces)
            if item == "dispatch-error" {
                fault.dispatchError = true
            } else if item.hasPrefix("times=") {
                guard let times = Int(item.dropFirst(6)) else {
                    throw SandboxFaultError("times must be a whole number, got \"\(item.dropFirst(6))\"")
                }
                fault.times = times
            } else {
                proveItems.append(item)
            }
        }
        if !proveItems.isEmpty || !fault.dispatchError {
            fault.fault = try SandboxFault.parse(items: proveItems.joined(separator: ","))
        }
        try fault.validate()
        return fault
    }

    // MARK: Codable

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case latencyMs, errorRate, status, retryAfter, hang, malformed, drop, dispatchError, times
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
                .init(codingPath: [unknown], debugDescription: "unknown key \"\(unknown.stringValue)\""))
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        fault = SandboxFault(
            latency: try container.decodeIfPresent(Int.self, forKey: .latencyMs).map { .milliseconds($0) },
            errorRate: try container.decodeIfPresent(Double.self, forKey: .errorRate),
            status: try container.decodeIfPresent(Int.self, forKey: .status),
            retryAfter: try container.decodeIfPresent(Int.self, forKey: .retryAfter),
            hang: try container.decodeIfPresent(Bool.self, forKey: .hang) ?? false,
            malformed: try container.decodeIfPresent(Bool.self, forKey: .malformed) ?? false,
            drop: try container.decodeIfPresent(Bool.self, forKey: .drop) ?? false)
        dispatchError = try container.decodeIfPresent(Bool.self, forKey: .dispatchError) ?? false
        times = try container.decodeIfPresent(Int.self, forKey: .times)
    }

    public func encode(to encoder: any Encoder) throws {
        try fault.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        if dispatchError { try container.encode(true, forKey: .dispatchError) }
        try container.encodeIfPresent(times, forKey: .times)
    }
}

/// `GET /sandbox/nevis/faults` response body: endpoint name ("approval", "*", …) → fault.
public struct NevisFaultList: Codable, Sendable, Equatable {
    public var faults: [String: NevisFault]

    public init(faults: [String: NevisFault]) {
        self.faults = faults
    }
}

/// The faults set and the request counts their error rates and `times` run on.
struct NevisFaultTable: Sendable {
    /// What the sandbox does with one request.
    struct Decision: Sendable, Equatable {
        /// The key of the fault that applies: an endpoint name or "*".
        var key: String
        var latency: Duration?
        /// Nil: answer normally (after `latency`).
        var failure: NevisFault.Failure?
    }

    private(set) var faults: [String: NevisFault] = [:]
    /// Fault key → requests it acted on since it was set.
    private var requestCounts: [String: Int] = [:]

    mutating func set(_ fault: NevisFault, for endpoint: NevisEndpoint) throws(SandboxFaultError) {
        try fault.validate()
        if fault.dispatchError, endpoint != .dispatch, endpoint != .all {
            throw SandboxFaultError("dispatchError is a fault of dispatch only")
        }
        requestCounts[endpoint.rawValue] = nil
        faults[endpoint.rawValue] = fault.isEmpty ? nil : fault
    }

    mutating func clear(_ endpoint: NevisEndpoint) {
        faults[endpoint.rawValue] = nil
        requestCounts[endpoint.rawValue] = nil
    }

    mutating func clearAll() {
        faults.removeAll()
        requestCounts.removeAll()
    }

    /// Counts a request to `endpoint` and decides its fate; a fault whose `times` are used up goes. The
    /// endpoint's own fault wins over `*`, and a `*` dispatchError leaves the other endpoints alone.
    mutating func decide(_ endpoint: NevisEndpoint) -> Decision? {
        let key = faults[endpoint.rawValue] != nil ? endpoint.rawValue : NevisEndpoint.all.rawValue
        guard let fault = faults[key], !(fault.dispatchError && endpoint != .dispatch) else { return nil }
        let number = requestCounts[key, default: 0] + 1
        requestCounts[key] = number
        if let times = fault.times, number >= times {
            faults[key] = nil
            requestCounts[key] = nil
        }
        return Decision(
            key: key, latency: fault.fault.latency, failure: fault.fails(requestNumber: number) ? fault.failure : nil)
    }
}
