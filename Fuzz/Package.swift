// swift-tools-version: 6.1
import PackageDescription

// Coverage-guided fuzzers (libFuzzer) for LinkRelay's input parsers, one executable per parser. Kept out of the
// root package so that its `swift build --build-tests` never links these executables, whose `main` comes from
// libFuzzer (`-sanitize=fuzzer`). Build and run them with scripts/fuzz.sh.
let package = Package(
    name: "LinkRelayFuzz",
    dependencies: [.package(name: "LinkRelay", path: "..")],
    targets: [
        .target(name: "CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"]),
        .executableTarget(
            name: "FuzzLanding",
            dependencies: ["FuzzSupport", .product(name: "LinkRelayCore", package: "LinkRelay")]
        ),
        .executableTarget(
            name: "FuzzFinalTargetURL",
            dependencies: ["FuzzSupport", .product(name: "LinkRelayCore", package: "LinkRelay")]
        ),
        .executableTarget(
            name: "FuzzSessionRequest",
            dependencies: ["FuzzSupport", .product(name: "LinkRelayCore", package: "LinkRelay")]
        ),
    ]
)
