import Foundation

/// What the desktop shows for channel `app`: a QR code (a PNG data URI) and the link that opens the app.
/// Both are bearer secrets.
struct NevisApprovalPresentation: Sendable, Equatable {
    var qrCode: String?
    var appLink: String?

    static let pngDataURIPrefix = "data:image/png;base64,"
    private static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Reads nevisFIDO's `dispatcherInformation.response`, whose encoding the reference leaves unconfirmed, in
    /// every form it plausibly takes:
    /// - a link (`https://…`, `http://…` or a custom scheme such as `nevisaccess://…`): the app link, its QR
    ///   code drawn by `drawQR`;
    /// - a `data:image/png;base64,…` URI: the QR code;
    /// - base64 (or base64url) of a PNG: the QR code, as a data URI;
    /// - a JSON object with `link` and/or `qrCode` strings: both, each read as above (a QR code drawn from
    ///   the link when the object has none).
    /// Anything else gives neither.
    static func fromDispatcherResponse(_ response: String?, drawQR: NevisQRDrawer?) -> Self {
        guard let text = response?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty else {
            return .init()
        }
        if text.hasPrefix("{") {
            guard let object = try? JSONDecoder().decode(LinkAndQRCode.self, from: Data(text.utf8)) else {
                return .init()
            }
            let link = object.link.flatMap(Self.link)
            let qrCode = object.qrCode.flatMap(Self.pngDataURI) ?? link.flatMap { drawQR?($0) }
            return .init(qrCode: qrCode, appLink: link)
        }
        if let link = link(text) {
            return .init(qrCode: drawQR?(link), appLink: link)
        }
        return .init(qrCode: pngDataURI(text))
    }

    /// Auth Cloud's answer: its QR code (normalised as a data URI) and `appLinkUri`; when it has a link and no
    /// QR code, the QR code is drawn from the link.
    static func fromAuthCloud(qrCode: String?, appLink: String?, drawQR: NevisQRDrawer?) -> Self {
        let link = appLink.flatMap(Self.link)
        let qr = qrCode.flatMap(Self.pngDataURI) ?? link.flatMap { drawQR?($0) }
        return .init(qrCode: qr, appLink: link)
    }

    private struct LinkAndQRCode: Decodable {
        var link: String?
        var qrCode: String?

        private enum CodingKeys: String, CodingKey {
            case link
            case qrCode
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            link = try? container.decodeIfPresent(String.self, forKey: .link)
            qrCode = try? container.decodeIfPresent(String.self, forKey: .qrCode)
        }
    }

    /// `text` when it is an absolute URL with a scheme and `://` (`https`, `http`, or an app's own scheme).
    static func link(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let separator = trimmed.range(of: "://") else { return nil }
        let scheme = trimmed[..<separator.lowerBound]
        guard let first = scheme.unicodeScalars.first, CharacterSet.letters.contains(first),
            scheme.unicodeScalars.allSatisfy({
                ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || "+-.".unicodeScalars.contains($0)
            }),
            trimmed.unicodeScalars.allSatisfy({ !CharacterSet.whitespacesAndNewlines.contains($0) }),
            trimmed.endIndex > separator.upperBound
        else { return nil }
        return trimmed
    }

    /// A PNG as a data URI: `text` when it is one already, or base64 / base64url of bytes that start with the
    /// PNG signature, re-encoded as standard base64.
    static func pngDataURI(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.lowercased().hasPrefix(pngDataURIPrefix) {
            return trimmed.count > pngDataURIPrefix.count ? trimmed : nil
        }
        var base64 = String(trimmed.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) })
        base64 = base64.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let bytes = Data(base64Encoded: base64), bytes.starts(with: pngSignature) else { return nil }
        return pngDataURIPrefix + bytes.base64EncodedString()
    }

    /// base64url without padding, as FIDO UAF writes binary content.
    static func base64URL(_ text: String) -> String {
        var encoded = Data(text.utf8).base64EncodedString()
        encoded = encoded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while encoded.hasSuffix("=") { encoded.removeLast() }
        return encoded
    }
}
