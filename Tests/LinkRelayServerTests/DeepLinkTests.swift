import Foundation
import LinkRelayCore
import Testing

@testable import LinkRelayServer

/// The relay as the apps' Universal Link / App Link target (API.md v1.1 "Deep links").
@Suite("Deep links", .timeLimit(.minutes(1)))
struct DeepLinkTests {
    static let fingerprint = (0..<32).map { String(format: "%02X", $0 * 7 % 256) }.joined(separator: ":")
    static let apps: [String: [String]] = [
        "ios-app-id": ["ABCDE12345.com.example.bank"],
        "android-app": ["com.example.bank=" + fingerprint.lowercased()],
        "app-store-url": ["https://apps.apple.com/app/example-bank/id123456789"],
        "play-store-url": ["https://play.google.com/store/apps/details?id=com.example.bank"],
    ]

    @Test("Both association files are served as Apple and Google fetch them, covering /l/*")
    func associationFiles() async throws {
        try await TestRelay.run(flags: Self.apps) { relay in
            let apple = try await relay.request(.GET, "/.well-known/apple-app-site-association")
            #expect(apple.status == 200)
            #expect(apple.header("Content-Type") == "application/json")
            #expect(apple.header("Location") == nil)
            #expect(
                apple.body
                    == #"{"applinks":{"details":[{"appIDs":["ABCDE12345.com.example.bank"],"components":[{"/":"/l/*","comment":"LinkRelay landings"}]}]}}"#
            )
            let android = try await relay.request(.GET, "/.well-known/assetlinks.json")
            #expect(android.status == 200)
            #expect(android.header("Content-Type") == "application/json")
            #expect(
                android.body
                    == #"[{"relation":["delegate_permission/common.handle_all_urls"],"target":{"namespace":"android_app","package_name":"com.example.bank","sha256_cert_fingerprints":[""#
                    + Self.fingerprint + #""]}}]"#)
        }
    }

    @Test("Without an app, neither file exists")
    func noApp() async throws {
        try await TestRelay.run { relay in
            #expect(try await relay.request(.GET, "/.well-known/apple-app-site-association").status == 404)
            #expect(try await relay.request(.GET, "/.well-known/assetlinks.json").status == 404)
            _ = try await relay.createSession()
            let (landing, _) = try await relay.tap()
            #expect(!landing.body.contains("Open in the app"))
        }
    }

    @Test("With an app, the landing page offers it and its stores")
    func landingOffersTheApp() async throws {
        try await TestRelay.run(flags: Self.apps) { relay in
            _ = try await relay.createSession()
            let (landing, url) = try await relay.tap()
            #expect(landing.status == 200)
            let path = try #require(URLComponents(string: url)).percentEncodedPath
            #expect(landing.body.contains("Open in the app"))
            #expect(landing.body.contains("intent://127.0.0.1:"))
            #expect(landing.body.contains(path + "?asc=true&amp;authId="))
            #expect(landing.body.contains("package=com.example.bank"))
            #expect(landing.body.contains(#"<meta name="apple-itunes-app" content="app-id=123456789, app-argument="#))
            #expect(landing.body.contains("https://apps.apple.com/app/example-bank/id123456789"))
            #expect(landing.body.contains("https://play.google.com/store/apps/details?id=com.example.bank"))
        }
    }

    @Test(
        "Bad app settings stop start-up with one line",
        arguments: [
            (["ios-app-id": ["com.example.bank"]], "--ios-app-id"),
            (["android-app": ["com.example.bank"]], "--android-app"),
            (["android-app": ["bank=AA:BB"]], "--android-app"),
            (["app-store-url": ["http://apps.apple.com/app/id1"]], "--app-store-url"),
            (["play-store-url": ["market://details?id=x"]], "--play-store-url"),
        ])
    func badSettings(_ flags: [String: [String]], _ named: String) {
        #expect {
            try RelayConfiguration.resolve(flags: flags, environment: [:])
        } throws: { error in
            ((error as? ConfigurationError)?.description ?? "").hasPrefix(named)
        }
    }
}
