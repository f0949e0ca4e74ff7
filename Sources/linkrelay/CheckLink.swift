import ArgumentParser
import Foundation
import LinkRelayCore

struct CheckLink: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-link",
        abstract:
            "Check offline a redirect URL as a phone or an app receives it (…/l/KEY?asc=true&authId=UUID), by the landing's rules; exit 0 valid, 1 invalid."
    )

    @Argument(help: "The URL to check.") var url: String
    @Flag(help: "Check the URL as a finalTargetUrl against Prove's rules instead.") var finalTargetUrl = false

    func run() throws {
        let problem: String?
        if finalTargetUrl {
            problem = FinalTargetURL.validate(url).map(\.description)
        } else if case .failure(let rejection) = LandingRedirect.parse(url) {
            problem = rejection.description
        } else {
            problem = nil
        }
        if let problem {
            FileHandle.standardError.write(Data("invalid: \(problem)\n".utf8))
            throw ExitCode(1)
        }
        print("valid")
    }
}
