import Foundation
import NevisAPI
import ProveSandbox
import QRCode

extension NevisSandbox {
    /// The redeem URL the app's payload names: the sandbox's nevisFIDO redeem service (Auth Cloud's
    /// operations are redeemed there too).
    var redeemURL: String { "\(publicBaseURL)/sandbox/nevis/nevisfido/token/redeem/authentication" }

    /// The payload a QR code, a link or a push carries for `token`, as base64url JSON (seed 004).
    func encodedPayload(token: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(NevisAppPayload(token: token, redeemURL: redeemURL))) ?? Data()
        return Self.base64URL(json)
    }

    /// The link that opens the app (Auth Cloud's `appLinkUri`, the link dispatchers' link).
    func appLink(token: String) -> String {
        "\(publicBaseURL)/sandbox/nevis/open?dispatchTokenResponse=\(encodedPayload(token: token))"
    }

    /// The dispatch token of what the app was given: a link with `dispatchTokenResponse`, the base64url
    /// payload a QR code holds, or the payload's JSON as a push carries it. Nil for anything else.
    public static func decodePayload(_ text: String) -> NevisAppPayload? {
        var text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let query = text.firstIndex(of: "?"), text.contains("dispatchTokenResponse=") {
            let fields = ProveSandbox.parseForm(String(text[text.index(after: query)...]))
            // A form reads `+` as a space; base64url has neither, plain base64 has `+`.
            text = fields["dispatchTokenResponse"]?.replacingOccurrences(of: " ", with: "+") ?? ""
        }
        let json: Data
        if text.hasPrefix("{") {
            json = Data(text.utf8)
        } else {
            guard let decoded = base64URLDecoded(text) else { return nil }
            json = decoded
        }
        // The app reads only the token and the redeem URL; the content type and version may be left out.
        struct Lenient: Decodable {
            var data: NevisAppPayload.RedeemData

            enum CodingKeys: String, CodingKey {
                case data = "nma_data"
            }
        }
        guard let payload = try? JSONDecoder().decode(Lenient.self, from: json), !payload.data.token.isEmpty
        else { return nil }
        return NevisAppPayload(token: payload.data.token, redeemURL: payload.data.redeemURL)
    }

    /// A PNG QR code of `text`, for a phone camera or the app's scanner.
    static func qrPNG(_ text: String) throws -> [UInt8] {
        try QRCode(Array(text.utf8), correction: .medium).png(scale: qrScale)
    }

    /// A PNG QR code of `text` as a `data:image/png;base64,…` URI.
    static func qrDataURI(_ text: String) throws -> String {
        try QRCode(Array(text.utf8), correction: .medium).pngDataURI(scale: qrScale)
    }

    /// Pixels per module: a link's code (version 10–13) comes out about 300 pixels wide.
    static let qrScale = 5

    // MARK: Encodings

    /// Unpadded base64url.
    static func base64URL(_ data: some Sequence<UInt8>) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// base64url, padded or not; plain base64 is taken too.
    static func base64URLDecoded(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    /// `bytes` random bytes in unpadded base64url.
    static func random(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return base64URL((0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// An opaque JWT-shaped status token ("eyJ…"), as Auth Cloud's look; only the sandbox reads it.
    static func makeStatusToken() -> String {
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\(random(bytes: 24)).\(random(bytes: 32))"
    }

    /// ISO 8601 with milliseconds, as both backends write times.
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
