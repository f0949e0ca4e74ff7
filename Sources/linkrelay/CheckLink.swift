import ArgumentParser
import Foundation
import LinkRelayCore

struct CheckLink: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-link",
        abstract: "Check a finalTargetUrl offline against Prove's rules (exit 0 valid, 1 invalid).")

    @Argument(help: "The URL to check.") var url: String

    func run() throws {
        if let violation = FinalTargetURL.validate(url) {
            FileHandle.standardError.write(Data("invalid: \(violation)\n".utf8))
            throw ExitCode(1)
        }
        print("valid")
    }
}
