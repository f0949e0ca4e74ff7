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
        subcommands: [Serve.self, CheckLink.self, Sandbox.self],
        defaultSubcommand: Serve.self)

    /// Runs Swift's tasks on NIO's event loops (the ones the server's connections use) instead of
    /// libdispatch's threads, then the command.
    ///
    /// libdispatch wraps every task it queues in a block of its own and keeps up to 1,024 freed blocks
    /// per thread for reuse, until the thread exits; its threads never exit while something wakes them
    /// within 5 s, as Hummingbird's date cache did every second. After 100,000 sessions, about 3,200
    /// such blocks, taken all through the burst, kept about 980 pages (3.8 MiB) of glibc's heaps that
    /// `malloc_trim` could not return: most of what stayed above idle (Benchmarks/HISTORY.md). An event
    /// loop queues a task with nothing kept.
    static func main() async {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await main(nil)
    }
}

/// Logs to standard error, through a thread of its own (`LogOutput`); `LOG_LEVEL` (trace … critical)
/// sets the level, default info.
///
/// swift-log's `StreamLogHandler` stamps each line with glibc's `localtime`, which, while `TZ` is
/// unset, looks at `/etc/localtime` again for every line (a `stat` per line, 1,000 a second at 1,000
/// taps a second). `TZ` naming that same file (`:/etc/localtime`, the default spelled out) has glibc
/// read it once; an operator's own `TZ` is kept.
func makeLogger(_ label: String) -> Logger {
    setenv("TZ", ":/etc/localtime", 0)
    LoggingSystem.bootstrap { StreamLogHandler(label: $0, stream: LogOutput.standardError) }
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
