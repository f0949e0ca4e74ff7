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

extension ConfigurationDocTests {
    /// Each option's whole help text, its wrapped lines joined by a space.
    static func helpTexts(_ help: String) -> [String: String] {
        var texts: [String: String] = [:]
        var current: String?
        for line in help.split(separator: "\n") {
            let words = line.split(separator: " ")
            if line.hasPrefix("  --"), let name = words.first {
                current = String(name)
                // The option's name and its value's placeholder come before its text.
                texts[String(name)] = words.dropFirst(words.count > 1 && words[1].hasPrefix("<") ? 2 : 1)
                    .joined(separator: " ")
            } else if let name = current, line.hasPrefix("   ") {
                texts[name, default: ""] += " " + words.joined(separator: " ")
            } else {
                current = nil
            }
        }
        return texts
    }

    @Test("--prove's values and the PostgreSQL URL's form read the same in serve --help, the docs and the README")
    func valuesAndForms() async throws {
        let help = try await CLI.run(["serve", "--help"])
        let texts = Self.helpTexts(help.standardOutput)
        let prove = try #require(texts["--prove"])
        let offered = try #require(prove.firstRange(of: " or a base URL")).lowerBound
        let values = prove[..<offered].split(separator: ", ").map(String.init)
        #expect(values.first == "sandbox" && values.count >= 5, "\(prove)")

        let markdown = try String(contentsOf: Self.root.appending(path: "docs/configuration.md"), encoding: .utf8)
        let row = try #require(markdown.split(separator: "\n").first { $0.hasPrefix("| `--prove`") })
        let cells = row.split(separator: "|", omittingEmptySubsequences: false)
        let documented = cells[4].matches(of: /`([a-z-]+)`/).map { String($0.output.1) }
        #expect(documented == values, "docs/configuration.md's --prove values")
        #expect(cells[4].contains("a base URL"))

        let readme = try String(contentsOf: Self.root.appending(path: "README.md"), encoding: .utf8)
        let named = try #require(readme.firstMatch(of: /`--prove ([a-z|-]+)`/), "the README names --prove's values")
        #expect(["sandbox"] + named.output.1.split(separator: "|").map(String.init) == values, "the README's")

        let store = try #require(texts["--store"])
        let form = "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]"
        #expect(store.contains(form) && store.contains("postgresql://"), "\(store)")
        let storeRow = try #require(markdown.split(separator: "\n").first { $0.hasPrefix("| `--store`") })
        #expect(storeRow.replacing("\\|", with: "|").contains("`\(form)`") && storeRow.contains("postgresql://"))
        #expect(readme.contains("`\(form)`"))
    }
}
