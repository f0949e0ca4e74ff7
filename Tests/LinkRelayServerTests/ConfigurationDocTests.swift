import Foundation
import Testing

/// docs/configuration.md's flag table is what `linkrelay serve --help` offers, flag for flag and variable
/// for variable, and deploy/linkrelay.env names every variable: a flag added, renamed or dropped in one
/// place and not the others fails here.
@Suite("docs/configuration.md lists what serve --help lists")
struct ConfigurationDocTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Each `--flag` of the help with the `LINKRELAY_…` variable its text names (nil when it names none).
    static func helpFlags(_ help: String) -> [String: String?] {
        var flags: [String: String?] = [:]
        var current: String?
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " }
            // An option's entry starts two spaces in; its wrapped text is indented further.
            if line.hasPrefix("  --"), let name = trimmed.split(separator: " ").first {
                current = String(name)
                if current != "--help" { flags[String(name)] = .some(nil) }
            }
            if let current, current != "--help", flags[current] == .some(nil),
                let variable = line.firstMatch(of: /LINKRELAY_[A-Z_]+/)
            {
                flags[current] = String(variable.output)
            }
        }
        return flags
    }

    /// The table's rows: each flag of the first column with the variable of the same place in the second.
    static func documentedFlags(_ markdown: String) -> [String: String?] {
        var flags: [String: String?] = [:]
        for line in markdown.split(separator: "\n") where line.hasPrefix("| `--") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            let names = cells[1].matches(of: /`(--[a-z-]+)`/).map { String($0.output.1) }
            let variables = cells[2].matches(of: /`(LINKRELAY_[A-Z_]+)`/).map { String($0.output.1) }
            for (index, name) in names.enumerated() {
                flags[name] = index < variables.count ? variables[index] : nil
            }
        }
        return flags
    }

    @Test func theTableIsTheHelp() async throws {
        let help = try await CLI.run(["serve", "--help"])
        #expect(help.status == 0)
        let offered = Self.helpFlags(help.standardOutput)
        #expect(offered.count > 40, "the help's options were not read: \(help.standardOutput.prefix(300))")
        let markdown = try String(contentsOf: Self.root.appending(path: "docs/configuration.md"), encoding: .utf8)
        let documented = Self.documentedFlags(markdown)
        #expect(Set(offered.keys).subtracting(documented.keys).sorted() == [], "in --help, not in the table")
        #expect(Set(documented.keys).subtracting(offered.keys).sorted() == [], "in the table, not in --help")
        for (flag, variable) in offered where documented.keys.contains(flag) {
            #expect(documented[flag] == variable, "\(flag): the table and --help name different variables")
        }
        let environment = try String(contentsOf: Self.root.appending(path: "deploy/linkrelay.env"), encoding: .utf8)
        for case let variable? in documented.values {
            #expect(environment.contains(variable), "deploy/linkrelay.env lacks \(variable)")
        }
    }
}
