import Foundation
import Testing

/// `linkrelay check-link`, as an operator or an app developer runs it.
@Suite("check-link", .timeLimit(.minutes(1)))
struct CheckLinkTests {
    static let redirect =
        "https://relay.example/l/Xk3aB9cD0eF1gH2iJ3kL4mN5oP6qR7sT?asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c3301"

    @Test(
        "A redirect URL by the landing's rules, or a finalTargetUrl by Prove's with --final-target-url",
        arguments: [
            ([redirect], 0, ""),
            (["https://relay.example/l/short?asc=true&authId=x"], 1, "invalid: authId is not a UUID"),
            (["https://relay.example/l/Xk3aB9cD0eF1gH2iJ3kL4mN5oP6qR7sT?asc=1"], 1, "invalid: asc is not exactly"),
            (["--final-target-url", "https://relay.example/l/Xk3aB9cD0eF1gH2iJ3kL4mN5oP6qR7sT"], 0, ""),
            (["--final-target-url", redirect], 1, "invalid: the URL contains \"&\""),
        ])
    func checkLink(arguments: [String], status: Int32, message: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("linkrelay")
        process.arguments = ["check-link"] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let exited = await PersistenceTests.Child.exited(process)
        #expect(exited == status, "\(text)")
        #expect(text.hasPrefix(message), "\(text)")
    }
}
