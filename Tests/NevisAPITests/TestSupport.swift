import AsyncHTTPClient
import Foundation
import LinkRelaySupport
import LinkRelayTestSupport
import Logging
import NevisAPI
import ProveAPI

/// The values a test sends and Nevis answers with. The secrets are distinct and easy to find in a log.
enum Fixture {
    static let accessKey = "ak-SECRET-access-key-0001"
    static let fidoToken = "fido-SECRET-token-0002"
    static let statusToken = "st-SECRET-status-token-0003"
    static let sessionId = "sid-SECRET-session-0004"
    static let dispatchToken = "dt-SECRET-dispatch-0005"
    static let link = "https://fido.example/open?dispatchTokenResponse=LINK-SECRET-0006"
    static let appLinkUri = "https://acme-app.mauth.nevis.cloud/open?dispatchTokenResponse=APPLINK-SECRET-0007"
    /// A data URI of a (tiny, fake) PNG: the signature and a few bytes.
    static let pngBytes = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0xFB, 0xFF])
    static let qrDataURI = "data:image/png;base64," + pngBytes.base64EncodedString()
    /// Plain text the customer confirms: markup-like characters, quotes and non-ASCII, to show nothing is
    /// escaped and the base64 is url-safe.
    static let message = #"Pay CHF 120.00 to <b>ACME</b> & "Söhne"? >>>"#

    static let approvalBody = """
        {"transactionId":"tx-1","statusToken":"\(statusToken)","userId":"u-1","username":"alice",\
        "qrCode":{"type":"image/png","size":14,"dataUri":"\(qrDataURI)"},"appLinkUri":"\(appLinkUri)",\
        "createdAt":"2025-01-01T00:00:00Z"}
        """
    static let authCloudStatusBody = #"{"transactionId":"tx-1","status":"pending","createdAt":"x","lastUpdatedAt":"y"}"#
    static func dispatchBody(response: String = link, result: String = "dispatched") -> String {
        let encoded = String(decoding: try! JSONEncoder().encode(response), as: UTF8.self)
        return """
            {"token":"\(dispatchToken)","sessionId":"\(sessionId)",\
            "dispatcherInformation":{"name":"link-png-qr-code","response":\(encoded)},"dispatchResult":"\(result)"}
            """
    }
    static let fidoStatusBody =
        #"{"status":"clientAuthenticating","timestamp":"2024-07-29T15:51:28.071Z","userId":"u-1"}"#

    static let okBodies = [
        "/api/v1/approval": approvalBody,
        "/api/v1/status": authCloudStatusBody,
        "/nevisfido/token/dispatch/authentication": dispatchBody(),
        "/nevisfido/status": fidoStatusBody,
    ]

    /// base64url without padding, computed here independently of the client.
    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Records the backoff sleeps instead of sleeping.
final class SleepRecorder: Sendable {
    let sleeps = Locked<[Duration]>([])

    var sleep: @Sendable (Duration) async throws -> Void {
        { [sleeps] duration in sleeps.withLock { $0.append(duration) } }
    }
}

/// Records every attempt the observer is told of, as "endpoint status".
final class ObserverRecorder: Sendable {
    let calls = Locked<[String]>([])

    var observe: NevisCallObserver {
        { [calls] endpoint, status, _ in calls.withLock { $0.append("\(endpoint) \(status)") } }
    }
}

/// Records the links the client asks to draw, and draws a recognisable fake data URI.
final class QRDrawRecorder: Sendable {
    static let drawn = "data:image/png;base64,DRAWN"
    let links = Locked<[String]>([])

    var draw: NevisQRDrawer {
        { [links] link in
            links.withLock { $0.append(link) }
            return Self.drawn
        }
    }
}

/// A deadline no test reaches unless something hangs (a loaded machine under ThreadSanitizer can take
/// seconds for a loopback call).
func patientDeadline() -> ContinuousClock.Instant { .now + .seconds(120) }

func retryPolicy(_ sleeper: SleepRecorder) -> RetryPolicy {
    RetryPolicy(attemptTimeout: .seconds(120), sleep: sleeper.sleep, random: { 0.5 })
}

func authCloudClient(
    _ baseURL: String, _ http: ProviderHTTPClient, sleeper: SleepRecorder = SleepRecorder(),
    observer: ObserverRecorder? = nil, logger: Logger = quietLogger(), drawQR: NevisQRDrawer? = nil
) throws -> AuthCloudClient {
    try AuthCloudClient(
        baseURL: baseURL, accessKey: Fixture.accessKey, httpClient: http, retry: retryPolicy(sleeper),
        observe: observer?.observe, logger: logger, drawQR: drawQR)
}

func fidoClient(
    _ baseURL: String, _ http: ProviderHTTPClient, dispatcher: NevisDispatcher = .linkQRCode,
    fidoToken: String? = Fixture.fidoToken, sleeper: SleepRecorder = SleepRecorder(),
    observer: ObserverRecorder? = nil, logger: Logger = quietLogger(), drawQR: NevisQRDrawer? = nil
) throws -> NevisFIDOClient {
    try NevisFIDOClient(
        baseURL: baseURL, dispatcher: dispatcher, fidoToken: fidoToken, httpClient: http,
        retry: retryPolicy(sleeper), observe: observer?.observe, logger: logger, drawQR: drawQR)
}
