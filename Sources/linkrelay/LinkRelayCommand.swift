import ArgumentParser
import Foundation
import LinkRelayCore
import LinkRelayServer
import Logging
import NIOCore
import NIOPosix
import ProveSandbox

@main
struct LinkRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "linkrelay",
        abstract: "Relays Prove Instant Link taps from phones to waiting desktop browsers.",
        subcommands: [Serve.self, CheckLink.self, Sandbox.self, StoreCommand.self, RoutesCommand.self],
        defaultSubcommand: Serve.self)

    /// Runs Swift's tasks on NIO's event loops (the ones the server's connections use) instead of
    /// libdispatch's threads, then the command.
    ///
    /// libdispatch wraps every task it queues in a block of its own and keeps up to 1,024 freed blocks per
    /// thread, until the thread exits: after a burst they pin heap pages that no trim returns
    /// (docs/memory.md). An event loop queues a task with nothing kept.
    static func main() async {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await main(nil)
    }
}

/// Logs to standard error, through a thread of its own (`LogOutput`), stamped in UTC unless
/// `localTime`; `LOG_LEVEL` (trace … critical) sets the level, default info.
func makeLogger(_ label: String, localTime: Bool) -> Logger {
    LoggingSystem.bootstrap { RelayLogHandler(label: $0, localTime: localTime) }
    var logger = Logger(label: label)
    logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
    return logger
}

/// Prints one line to standard error and exits with status 2: how start-up refuses a bad setting.
func refuse(_ message: String) -> ExitCode {
    LogOutput.standardError.flush()
    FileHandle.standardError.write(Data("linkrelay: \(message)\n".utf8))
    return ExitCode(2)
}
