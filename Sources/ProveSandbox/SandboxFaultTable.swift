import Foundation

/// The faults set on a sandbox and the request counts their error rates run on.
struct SandboxFaultTable: Sendable {
    /// What the sandbox does with one request.
    struct Decision: Sendable, Equatable {
        /// The key of the fault that applies: an endpoint name or "*".
        var key: String
        var latency: Duration?
        /// `nil`: answer normally (after `latency`).
        var failure: SandboxFault.Failure?
    }

    private(set) var faults: [String: SandboxFault] = [:]
    /// Fault key → endpoint → requests since the fault was set.
    private var requestCounts: [String: [String: Int]] = [:]

    mutating func set(_ fault: SandboxFault, for endpoint: SandboxEndpoint) throws(SandboxFaultError) {
        try fault.validate()
        requestCounts[endpoint.rawValue] = nil
        faults[endpoint.rawValue] = fault.isEmpty ? nil : fault
    }

    mutating func clear(_ endpoint: SandboxEndpoint) {
        faults[endpoint.rawValue] = nil
        requestCounts[endpoint.rawValue] = nil
    }

    mutating func clearAll() {
        faults.removeAll()
        requestCounts.removeAll()
    }

    /// Counts a request to `endpoint` and decides its fate. The endpoint's own fault wins over `*`.
    mutating func decide(_ endpoint: SandboxEndpoint) -> Decision? {
        let key = faults[endpoint.rawValue] != nil ? endpoint.rawValue : SandboxEndpoint.all.rawValue
        guard let fault = faults[key] else { return nil }
        let number = requestCounts[key, default: [:]][endpoint.rawValue, default: 0] + 1
        requestCounts[key, default: [:]][endpoint.rawValue] = number
        let failure = fault.fails(requestNumber: number) ? fault.failure : nil
        return Decision(key: key, latency: fault.latency, failure: failure)
    }
}
