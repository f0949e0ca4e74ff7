// swift-tools-version: 6.1
// The route matcher alone, in release mode: the relay's hand-made `PathPattern` (the same file) against
// routing-kit's trie router, on the relay's table:
//   swift run -c release --package-path Benchmarks/matcher MatcherBench [ITERATIONS] [ROUNDS]
import PackageDescription

let package = Package(
    name: "MatcherBench",
    platforms: [.macOS(.v15)],
    dependencies: [.package(url: "https://github.com/vapor/routing-kit.git", from: "4.9.3")],
    targets: [
        .executableTarget(
            name: "MatcherBench", dependencies: [.product(name: "RoutingKit", package: "routing-kit")])
    ],
    // A single-threaded timing loop over globals: Swift 5's checking is enough.
    swiftLanguageModes: [.v5]
)
