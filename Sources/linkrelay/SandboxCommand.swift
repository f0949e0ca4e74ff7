import ArgumentParser
import Foundation
import LinkRelayServer
import Logging
import NevisSandbox
import ProveSandbox

struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run only the Prove and Nevis simulators, to share them between several relays.")

    @Option(help: "Listen address.") var host = "127.0.0.1"
    @Option(help: "Listen port.") var port = 8090
    @Option(help: "Base of the links in the simulated text messages (default http://HOST:PORT).")
    var publicURL: String?
    @Option(help: "A fault to inject, e.g. unify-status:error=1,status=503 (repeatable; see docs/behaviour.md).")
    var fault: [String] = []
    @Option(help: "A Nevis fault, e.g. status:error=1,status=503,times=2 or dispatch:dispatch-error (repeatable).")
    var nevisFault: [String] = []
    @Option(help: "utc or local: the time zone of log timestamps (default LINKRELAY_LOG_TIME, else utc).")
    var logTime = ProcessInfo.processInfo.environment["LINKRELAY_LOG_TIME"] ?? "utc"

    func run() async throws {
        var faults: [(endpoint: String, fault: SandboxFault)] = []
        for spec in fault {
            do {
                faults.append(try ProveSandbox.parseFault(spec))
            } catch {
                throw refuse("--fault: \(error)")
            }
        }
        var nevisFaults: [(endpoint: String, fault: NevisFault)] = []
        for spec in nevisFault {
            do {
                nevisFaults.append(try NevisSandbox.parseFault(spec))
            } catch {
                throw refuse("--nevis-fault: \(error)")
            }
        }
        guard ["utc", "local"].contains(logTime) else { throw refuse("--log-time: \"\(logTime)\" is not utc or local") }
        let logger = makeLogger("linkrelay.sandbox", localTime: logTime == "local")
        let base = publicURL ?? ProveSandbox.localBaseURL(host: host, port: port)
        let sandbox = ProveSandbox(publicBaseURL: base)
        for (endpoint, fault) in faults { try await sandbox.setFault(fault, for: endpoint) }
        let nevis = NevisSandbox(publicBaseURL: base)
        for (endpoint, fault) in nevisFaults { try nevis.setFault(fault, for: endpoint) }
        defer { LogOutput.standardError.flush() }
        try await SandboxServer(sandbox: sandbox, nevis: nevis, host: host, port: port, logger: logger).run()
    }
}
