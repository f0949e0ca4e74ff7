import Foundation
import NevisAPI
import Testing

@testable import NevisSandbox

/// The sandbox's QR codes are real: zbar's decoder (`zbarimg`, apt package zbar-tools) reads back what
/// they hold. Skipped where zbarimg is missing, unless `CI` is set: there it is a failure.
@Suite struct NevisQRCodeTests {
    static let zbarimg = ["/usr/bin/zbarimg", "/usr/local/bin/zbarimg", "/opt/homebrew/bin/zbarimg"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// What zbarimg reads from `png`; nil when it is missing outside CI.
    static func decoded(_ png: Data) throws -> String? {
        guard let zbarimg else {
            if ProcessInfo.processInfo.environment["CI"] != nil {
                Issue.record("zbarimg is missing: sudo apt-get install -y zbar-tools")
            }
            return nil
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("nevis-qr-\(UUID().uuidString).png")
        try png.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: zbarimg)
        process.arguments = ["--raw", "-q", file.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "zbarimg found no code")
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
    }

    @Test func theApprovalsQRCodeHoldsTheAppLink() async throws {
        let client = NevisTestClient()
        let started = try await client.approval(
            AuthCloudApprovalRequest(channel: "app", username: "alice", prompt: true, message: "Pay CHF 120.00"))
        let dataURI = try #require(started.qrCode?.dataUri)
        let prefix = "data:image/png;base64,"
        #expect(dataURI.hasPrefix(prefix))
        let png = try #require(Data(base64Encoded: String(dataURI.dropFirst(prefix.count))))
        guard let text = try Self.decoded(png) else { return }
        #expect(text == started.appLinkUri)
    }

    @Test func theDispatchersQRCodesHoldTheLinkOrThePayload() async throws {
        let client = NevisTestClient()
        let linked = try await client.dispatch(dispatcher: "link-png-qr-code", username: "dave")
        let raw = try await client.dispatch(dispatcher: "png-qr-code")
        let linkPNG = try #require(linked.dispatcherInformation?.response.flatMap { Data(base64Encoded: $0) })
        let rawPNG = try #require(raw.dispatcherInformation?.response.flatMap { Data(base64Encoded: $0) })
        let (linkToken, rawToken) = (try #require(linked.token), try #require(raw.token))
        guard let link = try Self.decoded(linkPNG), let payload = try Self.decoded(rawPNG) else { return }
        #expect(link == client.sandbox.appLink(token: linkToken))
        #expect(payload == client.sandbox.encodedPayload(token: rawToken))
        #expect(NevisSandbox.decodePayload(payload)?.data.token == raw.token)
    }
}
