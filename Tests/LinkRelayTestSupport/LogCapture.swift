import LinkRelaySupport
import Logging

/// Every log line written through its loggers, to check that no secret reaches a log.
public final class LogCapture: Sendable {
    private let lines = Locked<[String]>([])

    public init() {}

    /// Each line as `level message metadata source`.
    public var all: [String] { lines.value }

    public func append(_ line: String) { lines.withLock { $0.append(line) } }

    public func logger(label: String = "linkrelay.test", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in Handler(capture: self) }
        logger.logLevel = level
        return logger
    }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append("\(event.level) \(event.message) \(merged) \(event.source)")
        }
    }
}

/// A logger that writes nothing, for tests that are not about logs.
public func quietLogger(_ label: String = "test") -> Logger {
    Logger(label: label) { _ in SwiftLogNoOpLogHandler() }
}
