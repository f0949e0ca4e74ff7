import ArgumentParser
import Foundation
import LinkRelayServer
import Logging

/// `linkrelay routes`: the route table as `serve` with the same flags would serve it, one line per method
/// and path, with its guard and body limit (as `vapor routes` prints an application's).
struct RoutesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "routes",
        abstract: "Print the route table: method, path, guard, body limit, accepted types, CORS.")

    @Option(help: "As serve's: sandbox (default; adds the demo's and the sandbox's routes), uat, prod, … .")
    var prove: String?
    @Flag(help: "As serve's: the landing also takes the confirm page's POST.")
    var confirmOnPhone = false
    @Option(help: "As serve's: /metrics moves to that listener, out of this table.")
    var metricsListen: String?

    func run() async throws {
        var flags: [String: [String]] = ["store": ["memory"], "api-key": ["routes-table-placeholder-key"]]
        if let prove { flags["prove"] = [prove] }
        if confirmOnPhone { flags["confirm-on-phone"] = ["on"] }
        if let metricsListen { flags["metrics-listen"] = [metricsListen] }
        // The relay is built, never started: nothing asks Prove, so its credentials may be stand-ins.
        var environment = ProcessInfo.processInfo.environment.filter { $0.key.hasPrefix("LINKRELAY_TEMPLATES") }
        environment["PROVE_CLIENT_ID"] = "unused"
        environment["PROVE_CLIENT_SECRET"] = "unused"
        let relay: LinkRelay
        do {
            let configuration = try RelayConfiguration.resolve(flags: flags, environment: environment)
            relay = try await buildLinkRelay(
                configuration, logger: Logger(label: "linkrelay.routes") { _ in SwiftLogNoOpLogHandler() })
        } catch {
            throw refuse("\(error)")
        }
        print(relay.routeTable, terminator: "")
    }
}
