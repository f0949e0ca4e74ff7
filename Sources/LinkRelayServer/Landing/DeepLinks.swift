import Foundation
import LinkRelayCore
import LinkRelaySupport

/// The relay as the integrator's apps' Universal Link / App Link target (API.md v1.1, "Deep links"):
/// the association files Apple and Google fetch, and what the landing page offers when an app is set.
public struct DeepLinks: Sendable, Equatable {
    public struct AndroidApp: Sendable, Equatable {
        public var package: String
        /// The signing certificate's SHA-256, as 32 upper-case hex pairs joined by colons.
        public var fingerprint: String
    }

    /// `TEAMID.BUNDLEID` of each iOS app (`--ios-app-id`).
    public var iosAppIDs: [String] = []
    public var androidApps: [AndroidApp] = []
    public var appStoreURL: String?
    public var playStoreURL: String?

    public init() {}

    var hasApp: Bool { !iosAppIDs.isEmpty || !androidApps.isEmpty }

    /// `apple-app-site-association`, whose component matches the landings under `publicPath` (the
    /// public URL's path, empty at the root); nil without an iOS app.
    func appleAssociation(publicPath: String) -> [UInt8]? {
        guard !iosAppIDs.isEmpty else { return nil }
        let component: [String: String] = ["/": publicPath + "/l/*", "comment": "LinkRelay landings"]
        let document = ["applinks": ["details": [["appIDs": iosAppIDs, "components": [component]] as [String: Any]]]]
        return Self.json(document)
    }

    /// `assetlinks.json`; nil without an Android app.
    func androidAssociation() -> [UInt8]? {
        guard !androidApps.isEmpty else { return nil }
        let statements: [[String: Any]] = androidApps.map { app in
            [
                "relation": ["delegate_permission/common.handle_all_urls"],
                "target": [
                    "namespace": "android_app", "package_name": app.package,
                    "sha256_cert_fingerprints": [app.fingerprint],
                ],
            ]
        }
        return Self.json(statements)
    }

    /// What the landing page shows for an app: an Android intent that opens `landingURL` in the first
    /// Android app (falling back to the Play Store), iOS's Smart App Banner (which opens the app with
    /// the URL, from the App Store id in `--app-store-url`), and the store links.
    func pageValues(landingURL: String) -> [String: Any] {
        guard hasApp else { return [:] }
        var values: [String: Any] = ["app": true]
        if let android = androidApps.first, let url = URLComponents(string: landingURL), let host = url.host {
            var intent = "intent://" + host + (url.port.map { ":\($0)" } ?? "") + url.percentEncodedPath
            if let query = url.percentEncodedQuery { intent += "?" + query }
            intent += "#Intent;scheme=\(url.scheme ?? "https");package=\(android.package)"
            if let store = playStoreURL,
                let fallback = store.addingPercentEncoding(withAllowedCharacters: .alphanumerics)
            {
                intent += ";S.browser_fallback_url=" + fallback
            }
            values["androidIntent"] = intent + ";end"
        }
        if let store = appStoreURL, let id = store.firstMatch(of: /\/id(\d+)/)?.1 {
            values["appleBanner"] = "app-id=\(id), app-argument=\(landingURL)"
        }
        if let appStoreURL { values["appStoreURL"] = appStoreURL }
        if let playStoreURL { values["playStoreURL"] = playStoreURL }
        return values
    }

    private static func json(_ object: Any) -> [UInt8] {
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
        return Array(data ?? Data("{}".utf8))
    }

    /// Parses the flags' values; throws one line per problem.
    static func resolve(
        iosAppIDs: [String], androidApps: [String], appStoreURL: String?, playStoreURL: String?
    ) throws(ConfigurationError) -> DeepLinks {
        var links = DeepLinks()
        for id in iosAppIDs {
            guard id.wholeMatch(of: /[A-Z0-9]{10}\.[A-Za-z0-9][A-Za-z0-9.\-]*/) != nil else {
                throw ConfigurationError("--ios-app-id: \"\(id)\" is not TEAMID.BUNDLEID (ABCDE12345.com.example.app)")
            }
            links.iosAppIDs.append(id)
        }
        for app in androidApps {
            let parts = app.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2,
                parts[0].wholeMatch(of: /[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+/) != nil,
                parts[1].wholeMatch(of: /[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){31}/) != nil
            else {
                throw ConfigurationError(
                    "--android-app: \"\(app)\" is not PACKAGE=SHA256 (com.example.app=14:6D:…, 32 hex pairs)")
            }
            links.androidApps.append(AndroidApp(package: parts[0], fingerprint: parts[1].uppercased()))
        }
        for (flag, url) in [("app-store-url", appStoreURL), ("play-store-url", playStoreURL)] {
            guard let url else { continue }
            guard url.hasPrefix("https://"), URL(string: url)?.host?.isEmpty == false else {
                throw ConfigurationError("--\(flag): \"\(url)\" is not an https URL")
            }
        }
        links.appStoreURL = appStoreURL
        links.playStoreURL = playStoreURL
        return links
    }
}
