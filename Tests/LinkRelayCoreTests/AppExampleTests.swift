import Foundation
import LinkRelayCore
import Testing

// The README's app example ("Mobile apps and deep links"), compiled here against LinkRelayCore as an
// app would use it: the test below checks that the README shows exactly this code.

// app-example-start
/// In the app's Universal Link / App Link handler: hand Prove's SDK only a redirect the relay itself
/// would take (then call the relay's finish hook with it; the result comes from Prove, never `asc`).
func handleInstantLink(_ url: URL, finishInstantLink: (URL) -> Void) -> Bool {
    guard case .success = LandingRedirect.parse(url.absoluteString) else { return false }
    finishInstantLink(url)
    return true
}
// app-example-end

@Suite("The README's app example")
struct AppExampleTests {
    @Test("It hands Prove's SDK a real redirect, and nothing else")
    func example() throws {
        var finished: [URL] = []
        let redirect = try #require(
            URL(
                string:
                    "https://relay.example/l/\(String(repeating: "A", count: LandingRedirect.linkKeyLength))?asc=true&authId=3f2504e0-4f89-41d3-9a0c-0305e82c3301"
            ))
        #expect(handleInstantLink(redirect) { finished.append($0) })
        #expect(finished == [redirect])
        let forged = try #require(URL(string: "https://relay.example/l/short?asc=true&authId=x"))
        #expect(!handleInstantLink(forged) { finished.append($0) })
        #expect(finished.count == 1)
    }

    @Test("The README shows this file's example, word for word")
    func readmeMatches() throws {
        let here = URL(fileURLWithPath: #filePath)
        let source = try String(contentsOf: here, encoding: .utf8)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(source.range(of: "// app-example-start\n"))
        let end = try #require(source.range(of: "// app-example-end"))
        let example = String(source[start.upperBound..<end.lowerBound])
        #expect(readme.contains("```swift\nimport LinkRelayCore\n\n" + example + "```"))
    }
}
