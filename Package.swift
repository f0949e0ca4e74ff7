// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "LinkRelay",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "linkrelay", targets: ["linkrelay"]),
        .library(name: "LinkRelayCore", targets: ["LinkRelayCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // The domain, Foundation only: an app can check a redirect with it exactly as the relay does.
        .target(name: "LinkRelayCore", swiftSettings: swiftSettings),
        // What the server needs that is not the domain: limits, breaker, client addresses, JSON writer, locks.
        .target(
            name: "LinkRelaySupport",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ProveAPI",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Nevis's two backends (Authentication Cloud, nevisFIDO) behind one client protocol.
        .target(
            name: "NevisAPI",
            dependencies: [
                "ProveAPI",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ProveSandbox",
            dependencies: [
                "ProveAPI",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // QR codes of the relay's app links, with their PNG: byte mode, all 40 versions; Foundation only.
        .target(name: "QRCode", swiftSettings: swiftSettings),
        // The Nevis simulator: both backends' routes, test users, the Access App page, faults.
        .target(
            name: "NevisSandbox",
            dependencies: [
                "LinkRelaySupport",
                "NevisAPI",
                "ProveSandbox",
                "QRCode",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "LinkRelayServer",
            dependencies: [
                "LinkRelayCore",
                "LinkRelaySupport",
                "NevisAPI",
                "NevisSandbox",
                "ProveAPI",
                "ProveSandbox",
                "QRCode",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "linkrelay",
            dependencies: [
                "LinkRelayCore",
                "LinkRelayServer",
                "NevisSandbox",
                "ProveSandbox",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // What two or more test targets use: a manual clock, a log capture.
        .target(
            name: "LinkRelayTestSupport",
            dependencies: [
                "LinkRelayCore", "LinkRelaySupport", "ProveAPI", .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/LinkRelayTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LinkRelayCoreTests",
            dependencies: ["LinkRelayCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "QRCodeTests",
            dependencies: ["QRCode"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LinkRelaySupportTests",
            dependencies: ["LinkRelaySupport", "LinkRelayTestSupport", "LinkRelayCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProveAPITests",
            dependencies: [
                "ProveAPI",
                "ProveSandbox",
                "LinkRelayServer",
                "LinkRelaySupport",
                "LinkRelayTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NevisAPITests",
            dependencies: [
                "NevisAPI",
                "ProveAPI",
                "LinkRelaySupport",
                "LinkRelayTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProveSandboxTests",
            dependencies: [
                "ProveSandbox",
                "ProveAPI",
                "LinkRelayServer",
                "LinkRelaySupport",
                "LinkRelayTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NevisSandboxTests",
            dependencies: [
                "NevisSandbox",
                "NevisAPI",
                "ProveSandbox",
                "LinkRelayServer",
                "LinkRelayTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LinkRelayServerTests",
            dependencies: [
                "LinkRelayServer",
                "LinkRelayCore",
                "LinkRelaySupport",
                "LinkRelayTestSupport",
                "NevisSandbox",
                "ProveAPI",
                "ProveSandbox",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
