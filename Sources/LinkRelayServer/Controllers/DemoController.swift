import Foundation
import Hummingbird
import LinkRelayCore
import ProveSandbox

/// The sandbox demo: `/` starts a session for a sandbox phone number and shows the desktop waiting;
/// `/sandbox/phone` is the simulated phone's inbox. Mounted only with `--prove sandbox`.
struct DemoController {
    let service: SessionService
    let sandbox: ProveSandbox
    let pages: Pages
    let publicURL: String

    func addRoutes(to router: Router<RelayContext>) {
        router.get("/", use: home)
        router.post("demo", use: start)
        router.get("sandbox/phone", use: phone)
        router.get("assets/demo.js") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/javascript; charset=utf-8", .cacheControl: "max-age=300"],
                body: .init(byteBuffer: ByteBuffer(string: pages.demoScript)))
        }
    }

    @Sendable func home(_ request: Request, context: RelayContext) async throws -> Response {
        pages.render("demo", ["phoneNumber": "2001004014"])
    }

    private struct DemoForm: Decodable {
        var phoneNumber: String
    }

    @Sendable func start(_ request: Request, context: RelayContext) async throws -> Response {
        let body = try await request.body.collect(upTo: 1024)
        let form = try? URLEncodedFormDecoder().decode(DemoForm.self, from: String(buffer: body))
        let phoneNumber = form?.phoneNumber.trimmingCharacters(in: .whitespaces) ?? ""
        do {
            let input = try CreateSessionRequest.parse(
                RelayJSON.data(["phoneNumber": phoneNumber]), maximumHold: RelayConfiguration.maximumHold)
            let session = try await service.create(input, idempotencyKey: nil)
            let created = CreatedSession(session, publicURL: publicURL)
            let websocketOrigin = RelayConfiguration.origin(of: created.channel.websocket)
            return pages.render(
                "demo-wait",
                [
                    "phoneNumber": phoneNumber, "sessionId": session.id, "token": session.channelToken,
                    "websocket": created.channel.websocket, "poll": created.channel.poll,
                    "expiresAt": RelayJSON.timestamp(session.expiresAt),
                    "holdSeconds": Int(session.expiresAt.timeIntervalSince(session.createdAt)),
                    "phonePage": "/sandbox/phone?phoneNumber=" + phoneNumber,
                ],
                extraCSP: "; script-src 'self'; connect-src 'self' \(websocketOrigin)")
        } catch let problem as Problem {
            let message =
                problem.errors.isEmpty ? problem.detail : problem.errors.map(\.message).joined(separator: "; ")
            return pages.render(
                "demo", ["phoneNumber": phoneNumber, "error": message], status: problem.status)
        }
    }

    @Sendable func phone(_ request: Request, context: RelayContext) async throws -> Response {
        let phoneNumber = request.uri.queryParameters.get("phoneNumber") ?? ""
        let messages = await sandbox.outbox(phoneNumber: phoneNumber.isEmpty ? nil : phoneNumber)
        let items: [[String: Any]] = messages.reversed().map { message in
            [
                "phoneNumber": Secrets.maskedPhone(message.phoneNumber), "text": message.text, "link": message.link,
                "decline": message.link + "?decline=1", "sentAt": RelayJSON.timestamp(message.sentAt),
            ]
        }
        return pages.render("sandbox-phone", ["phoneNumber": phoneNumber, "messages": items, "empty": items.isEmpty])
    }
}
