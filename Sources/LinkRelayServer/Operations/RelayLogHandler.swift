import Foundation
import LinkRelaySupport
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// swift-log's `StreamLogHandler` line (`time level label: metadata [source] message`), stamped in UTC
/// (`2026-11-26T13:54:56.123Z`) unless `localTime`: then in the process's time zone, as `TZ` says, with
/// its offset. The relay leaves `TZ` alone.
public struct RelayLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let localTime: Bool
    private let output: LogOutput

    public init(label: String, localTime: Bool, output: LogOutput = .standardError) {
        self.label = label
        self.localTime = localTime
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        let pairs = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let time = localTime ? Self.localTimestamp(Date()) : ISO8601Milliseconds.string(Date())
        output.write(
            "\(time) \(event.level) \(label):\(pairs.isEmpty ? "" : " " + pairs) [\(event.source)] \(event.message)\n")
    }

    /// `2026-11-26T14:54:56.123+0100`, in the zone `TZ` names.
    static func localTimestamp(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        var clock = time_t(seconds)
        var parts = tm()
        localtime_r(&clock, &parts)
        var buffer = [Int8](repeating: 0, count: 40)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        var zone = [Int8](repeating: 0, count: 8)
        strftime(&zone, zone.count, "%z", &parts)
        let milliseconds = Int((date.timeIntervalSince1970 - seconds) * 1000)
        let millisecondsText = String(milliseconds + 1000).dropFirst()
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) + "."
            + millisecondsText + String(cString: zone)
    }
}
