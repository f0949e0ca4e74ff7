import ArgumentParser
import LinkRelayServer
import Logging
import ProveSandbox

struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run only the Prove simulator, to share one between several relays.")

    @Option(help: "Listen address.") var host = "127.0.0.1"
    @Option(help: "Listen port.") var port = 8090
    @Option(help: "Base of the links in the simulated text messages (default http://HOST:PORT).")
    var publicURL: String?
    @Option(help: "A fault to inject, e.g. unify-status:error=1,status=503 (repeatable; see the README).")
    var fault: [String] = []

    func run() async throws {
        var faults: [(endpoint: String, fault: SandboxFault)] = []
        for spec in fault {
            do {
                faults.append(try ProveSandbox.parseFault(spec))
            } catch {
                throw refuse("--fault: \(error)")
            }
        }
        let logger = makeLogger("linkrelay.sandbox")
        let sandbox = ProveSandbox(publicBaseURL: publicURL ?? ProveSandbox.localBaseURL(host: host, port: port))
        for (endpoint, fault) in faults { try await sandbox.setFault(fault, for: endpoint) }
        defer { LogOutput.standardError.flush() }
        try await buildSandboxApplication(sandbox: sandbox, host: host, port: port, logger: logger).runService()
    }
}
