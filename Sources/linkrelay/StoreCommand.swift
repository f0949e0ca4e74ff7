import ArgumentParser
import Foundation
import LinkRelayServer

/// `linkrelay store check|backup`: the SQLite store's file, while no relay holds it (a running relay
/// holds its file exclusively; it writes its own backups on SIGUSR1).
struct StoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Check or back up a SQLite store's file that no running relay holds.",
        subcommands: [Check.self, Backup.self])

    /// `--store sqlite:PATH`, the form `serve` takes.
    static func path(_ store: String) throws -> String {
        guard store.hasPrefix("sqlite:"), store.count > 7 else {
            throw refuse("--store: \"\(store)\" is not sqlite:PATH (only the SQLite store is a file to check)")
        }
        return String(store.dropFirst(7))
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "SQLite's full integrity check of the file, and whether a relay would start on it; exit 0 ok, 1 with the problems printed, 2 when it cannot be checked (missing, held by a running relay)."
        )

        @Option(help: "sqlite:PATH of the file to check.") var store: String

        func run() async throws {
            let path = try StoreCommand.path(store)
            let problems: [String]
            do {
                problems = try await SQLiteFile.check(path)
            } catch {
                throw refuse(error.description)
            }
            guard problems.isEmpty else {
                FileHandle.standardError.write(Data("sqlite:\(path): not usable:\n".utf8))
                for problem in problems { print(problem) }
                throw ExitCode(1)
            }
            print("ok")
        }
    }

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Write a consistent copy of the file (VACUUM INTO) to a new file OUT, mode 0600; exit 0 done, 1 when the copy failed, 2 when it cannot start (missing, held by a running relay, OUT exists)."
        )

        @Option(help: "sqlite:PATH of the file to back up.") var store: String
        @Argument(help: "The new file to write; it must not exist.") var out: String

        func run() async throws {
            let path = try StoreCommand.path(store)
            do {
                let bytes = try await SQLiteFile.backup(path, to: out)
                print("backup written: \(out) (\(bytes) bytes)")
            } catch {
                switch error.kind {
                case .corrupt:
                    FileHandle.standardError.write(Data("linkrelay: \(error.description)\n".utf8))
                    throw ExitCode(1)
                default:
                    throw refuse(error.description)
                }
            }
        }
    }
}
