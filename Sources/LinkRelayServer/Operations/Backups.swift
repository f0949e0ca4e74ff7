import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
    import Glibc
#endif

/// Consistent copies of the SQLite store in `--backup-dir`, one per SIGUSR1 (`BackupOnSignal`):
/// `linkrelay-YYYYMMDDTHHMMSS.mmmZ.sqlite`, named by UTC time so that names sort by age, mode 0600,
/// the newest `kept` kept. The copy is the store's `VACUUM INTO` on a connection of its own, so the
/// relay goes on answering meanwhile; it holds no Pre-Fill individual: they are erased in the copy,
/// under a temporary name, before it takes its own (`SQLiteFile.writeBackup`).
struct SQLiteBackups: Sendable {
    static let kept = 3
    static let prefix = "linkrelay-"
    static let suffix = ".sqlite"

    let directory: String
    let store: SQLiteSessionStore

    struct Made: Sendable {
        var path: String
        var bytes: Int
        var duration: Duration
    }

    /// Writes a backup, then removes all but the newest `kept`. A failed copy leaves no file and
    /// removes none. A copy left half-written by a process that was killed meanwhile (it may still hold
    /// individuals) goes first.
    func make(at now: Date = Date()) async throws -> Made {
        let path = directory + "/" + Self.name(at: now)
        let start = ContinuousClock.now
        removeUnfinished()
        try await store.backup(to: path)
        let made = Made(path: path, bytes: SQLiteFile.fileSize(path), duration: ContinuousClock.now - start)
        prune()
        return made
    }

    /// The backups in the directory, oldest first (only names this type makes: other files are left alone).
    func backups() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(Self.prefix) && $0.hasSuffix(Self.suffix) && $0.count == Self.nameLength }
            .sorted()
    }

    private func prune() {
        for name in backups().dropLast(Self.kept) { unlink(directory + "/" + name) }
    }

    /// The temporary files of backups that never finished (`SQLiteFile.writeBackup`'s names), with their journals.
    private func removeUnfinished() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix("." + Self.prefix) && name.contains(SQLiteFile.partialMarker) {
            unlink(directory + "/" + name)
        }
    }

    static let nameLength = name(at: Date(timeIntervalSince1970: 0)).count

    /// `linkrelay-20250102T030405.678Z.sqlite` for that instant in UTC.
    static func name(at date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(millis % 1000))
        return prefix + stamp + suffix
    }
}

/// SIGUSR1: a backup into `--backup-dir` (`SQLiteBackups`), one log line each (path, size,
/// duration); a failure is logged and the relay runs on. Without `--backup-dir` the signal is logged as
/// writing nothing. Only where the process's signals are the relay's (`serviceGroup(handlingSignals:)`).
struct BackupOnSignal: Service {
    let backups: SQLiteBackups?
    let logger: Logger

    func run() async {
        let signals = await UnixSignalsSequence(trapping: .sigusr1)
        // From here on SIGUSR1 no longer ends the process.
        if let backups {
            logger.notice("SIGUSR1 writes a backup", metadata: ["dir": .string(backups.directory)])
        } else {
            logger.debug("SIGUSR1 handled; no --backup-dir is set")
        }
        for await _ in signals.cancelOnGracefulShutdown() {
            guard let backups else {
                logger.warning("SIGUSR1: no backup written: no --backup-dir is set (LINKRELAY_BACKUP_DIR)")
                continue
            }
            do {
                let made = try await backups.make()
                let (seconds, attoseconds) = made.duration.components
                logger.notice(
                    "Backup written",
                    metadata: [
                        "path": .string(made.path), "bytes": "\(made.bytes)",
                        "duration_ms": "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)",
                    ])
            } catch {
                logger.error(
                    "Backup failed; the relay runs on",
                    metadata: ["dir": .string(backups.directory), "error": "\(error)"])
            }
        }
    }
}
