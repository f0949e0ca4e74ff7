import Foundation
import LinkRelayCore
import LinkRelaySupport
import ProveSandbox

/// The sandbox demo: `/` starts a session for a sandbox phone number and shows the desktop waiting;
/// `/sandbox/phone` is the simulated phone's inbox. Mounted only with `--prove sandbox`.
final class DemoController: Sendable {
    let service: SessionService
    let sandbox: ProveSandbox
    let pages: Pages
    let publicURL: String

    init(service: SessionService, sandbox: ProveSandbox, pages: Pages, publicURL: String) {
        self.service = service
        self.sandbox = sandbox
        self.pages = pages
        self.publicURL = publicURL
    }

    /// The largest form `POST /demo` reads.
    static let maximumFormSize = 1024

    func home(_ request: RelayRequest) -> Reply {
        .now(pages.page("demo", ["phoneNumber": "2001004014"]))
    }

    /// `POST /demo` (form `phoneNumber=…`): creates a session as an integrator would and shows it waiting.
    func start(_ request: RelayRequest) -> Reply {
        let phoneNumber =
            request.body.flatMap { FormFields.first("phoneNumber", in: String(buffer: $0)[...]) }?
            .trimmingCharacters(in: .whitespaces) ?? ""
        return .later { [self] in
            do {
                let input = try CreateSessionRequest.validate(
                    RelayJSON.encode(["phoneNumber": phoneNumber]), maximumHold: RelayConfiguration.maximumHold
                ).get()
                let session = try await service.create(input, idempotencyKey: nil)
                let created = CreatedSession(session, publicURL: publicURL)
                let websocketOrigin = RelayConfiguration.origin(of: created.channel.websocket)
                return pages.page(
                    "demo-wait",
                    [
                        "phoneNumber": phoneNumber, "sessionId": session.id, "token": session.channelToken,
                        "websocket": created.channel.websocket, "events": created.channel.events,
                        "poll": created.channel.poll,
                        "expiresAt": ISO8601Milliseconds.string(session.expiresAt),
                        "holdSeconds": Int(session.expiresAt.timeIntervalSince(session.createdAt)),
                        "phonePage": "/sandbox/phone?phoneNumber=" + phoneNumber,
                    ],
                    extraCSP: "; script-src 'self'; connect-src 'self' \(websocketOrigin)")
            } catch {
                // What went wrong, in the words of the API's answer, on the demo page.
                guard let problem = ErrorMapping.knownProblem(error) else { throw error }
                let message =
                    problem.errors.isEmpty ? problem.detail : problem.errors.map(\.message).joined(separator: "; ")
                return pages.page("demo", ["phoneNumber": phoneNumber, "error": message], status: problem.status)
            }
        }
    }

    /// `GET /sandbox/phone?phoneNumber=N`: the simulated phone's inbox.
    func phone(_ request: RelayRequest) -> Reply {
        let phoneNumber = request.queryItem("phoneNumber") ?? ""
        return .later { [self] in
            let messages = await sandbox.outbox(phoneNumber: phoneNumber.isEmpty ? nil : phoneNumber)
            let items: [[String: Any]] = messages.reversed().map { message in
                [
                    "phoneNumber": Secrets.maskedPhone(message.phoneNumber), "text": message.text,
                    "link": message.link, "decline": message.link + "?decline=1", "lost": message.link + "?redirect=0",
                    "sentAt": ISO8601Milliseconds.string(message.sentAt),
                ]
            }
            return pages.page("sandbox-phone", ["phoneNumber": phoneNumber, "messages": items, "empty": items.isEmpty])
        }
    }

    /// `POST /demo/resend` (form `phoneNumber`) from the sandbox phone page: the client SDK's resend, through
    /// the sandbox, then back to the phone page.
    func resend(_ request: RelayRequest) -> Reply {
        let phone = request.body.flatMap { FormFields.first("phoneNumber", in: String(buffer: $0)[...]) } ?? ""
        return .later { [sandbox] in
            _ = await sandbox.respond(
                method: "POST", path: "/sandbox/resend",
                query: "phoneNumber=" + (phone.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""),
                authorization: nil, body: { [] }, hold: { _ in })
            return Self.backToPhone(phone)
        }
    }

    /// `POST /demo/change-number` (form `from`, `to`): the client SDK's number change, through the sandbox.
    func changeNumber(_ request: RelayRequest) -> Reply {
        let form = request.body.map { String(buffer: $0)[...] } ?? ""
        let from = FormFields.first("from", in: form) ?? ""
        let to = FormFields.first("to", in: form)?.trimmingCharacters(in: .whitespaces) ?? ""
        return .later { [sandbox] in
            let body = Array(RelayJSON.encode(["from": from, "to": to]))
            let answer = await sandbox.respond(
                method: "POST", path: "/sandbox/change-number", query: nil, authorization: nil, body: { body },
                hold: { _ in })
            guard case .reply(let reply) = answer, reply.status == 204 else { return Self.backToPhone(from) }
            return Self.backToPhone(to)
        }
    }

    private static func backToPhone(_ phone: String) -> Answer {
        let query = phone.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return Answer(
            status: .seeOther,
            headers: ["Location": "/sandbox/phone?phoneNumber=" + query, "Cache-Control": "no-store"])
    }
}
