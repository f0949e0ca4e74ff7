import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOHTTP1
import NevisSandbox

/// The demo's Nevis tab: the desktop starts an out-of-band approval for a sandbox user, shows its QR code
/// and app link (or says where the push went), waits on the session's channel as the Unify tab does, and
/// shows the result with the user Nevis named. The phone is the Nevis sandbox's Access App page. The QR
/// code and the link are bearer secrets for the hold: they go to this page only, like the channel token.
extension DemoController {
    /// The user the form starts with: the test user whose operations a person answers on the app page.
    static let nevisUser = "dave"

    /// `GET /?flow=nevis`: the form, with `values` (what was given, an error) over the defaults.
    func nevisHome(
        username: String = nevisUser, message: String = "", channel: String = "app", error: String? = nil,
        status: HTTPResponseStatus = .ok
    ) -> Answer {
        var values: [String: Any] = [
            "nevis": true, "users": Self.nevisUsers(selected: username), "message": message,
            "push": channel == "push",
        ]
        values["error"] = error
        return pages.page("demo", values, status: status)
    }

    /// The form's choice of user: every sandbox test user with what their device does, then usernameless.
    private static func nevisUsers(selected: String) -> [[String: Any]] {
        let users = NevisTestUser.all.filter { $0 != NevisTestUser.usernameless }.map { user -> [String: Any] in
            let does =
                switch user.device {
                case .person: "you answer on the Access App page"
                case .approves: "her device approves by itself"
                case .denies: "his device denies by itself"
                case .none: "no registered device: Nevis refuses"
                }
            return [
                "value": user.username, "label": "\(user.username): \(does)", "selected": user.username == selected,
            ]
        }
        let anyone = NevisTestUser.usernameless.username
        return users + [
            [
                "value": "", "label": "Usernameless: whoever scans the code (signs in as \(anyone))",
                "selected": selected.isEmpty,
            ]
        ]
    }

    /// `POST /demo/nevis` (form `username`, optional `message`, `channel` `app` or `push`): creates a Nevis
    /// session as an integrator would (checked as `POST /v1/sessions` checks its body) and shows it waiting.
    func startNevis(_ request: RelayRequest) throws -> Reply {
        let form = try form(request)
        let username = try Self.field("username", in: form) ?? ""
        let message = try Self.field("message", in: form) ?? ""
        let channel = try Self.field("channel", in: form) ?? "app"
        let fields = ["flow": Flow.nevis.rawValue, "username": username, "message": message, "channel": channel]
            .filter { !$0.value.isEmpty }
        return .later { [self] in
            do {
                return nevisWaitPage(try await create(fields))
            } catch {
                let problem = try Self.problem(error)
                return nevisHome(
                    username: username, message: message, channel: channel, error: Self.message(problem),
                    status: problem.status)
            }
        }
    }

    /// `POST /demo/nevis/result` (form `session`, `token`), sent by the wait page once the result came: the
    /// result with the user Nevis named (a usernameless operation's only once approved). Before the end it
    /// shows the wait page again, so the form also works without a script.
    func nevisResult(_ request: RelayRequest) throws -> Reply {
        let form = try form(request)
        return .later { [self] in
            guard let id = try Self.field("session", in: form), let token = try Self.field("token", in: form),
                let session = try await service.anyTenantsSession(id), session.flow == .nevis,
                Secrets.constantTimeEquals(token, session.channelToken)
            else {
                return pages.page("demo-nevis", ["unknown": true], status: .notFound)
            }
            guard session.state.isTerminal else { return nevisWaitPage(session) }
            return pages.page("demo-nevis", ["done": Self.nevisOutcome(session)])
        }
    }

    /// The desktop waiting on the session's channel: the QR code and the link (channel `app`) or the
    /// push's recipient, and the sandbox's Access App one click away, in a new tab.
    private func nevisWaitPage(_ session: Session) -> Answer {
        let created = CreatedSession(session, publicURL: publicURL)
        let websocketOrigin = RelayConfiguration.origin(of: created.channel.websocket)
        let operation = session.nevis
        let username = operation?.username ?? ""
        let userQuery = username.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        var values: [String: Any] = [
            "waiting": true, "sessionId": session.id, "token": session.channelToken,
            "websocket": created.channel.websocket, "events": created.channel.events, "poll": created.channel.poll,
            "expiresAt": ISO8601Milliseconds.string(session.expiresAt),
            "holdSeconds": Int(session.expiresAt.timeIntervalSince(session.createdAt)),
            // The push waits in the user's app: the sandbox's page lists it, as the app's fetch does.
            "appPage": operation?.appLink ?? "/sandbox/nevis/app?user=" + userQuery,
        ]
        // Absent rather than empty: a template's section shows for an empty string too.
        if !username.isEmpty { values["username"] = username }
        if let qrCode = operation?.qrCode { values["qrCode"] = qrCode }
        if let appLink = operation?.appLink { values["appLink"] = appLink }
        if operation?.channel == "push" { values["push"] = true }
        return pages.page(
            "demo-nevis", values, extraCSP: "; script-src 'self'; connect-src 'self' \(websocketOrigin)",
            dataImages: true)
    }

    /// How the session ended, in the page's words, with the user Nevis named.
    private static func nevisOutcome(_ session: Session) -> [String: Any] {
        let nevis = session.result?.nevis
        var values: [String: Any] = ["verified": session.state == .verified]
        let (heading, status, detail): (String, String, String) =
            switch session.state {
            case .verified: ("Approved", "Verified ✓", "Nevis confirmed the approval in the Access App.")
            case .expired: ("Request expired", "Expired", "No one answered the request before the hold ended.")
            case .cancelled: ("Cancelled", "Cancelled", "The session was cancelled.")
            default:
                (
                    "Not approved", "Not verified",
                    session.result?.reason.map { $0 + "." }
                        ?? "The request was denied in the Access App, or Nevis's own time for it ran out."
                )
            }
        values["heading"] = heading
        values["status"] = status
        values["style"] = session.state == .verified ? "verified" : session.state.rawValue
        values["detail"] = detail
        var user: [String: Any] = [:]
        if let username = nevis?.username ?? session.nevis?.username { user["username"] = username }
        if let userId = nevis?.userId ?? session.nevis?.userId { user["userId"] = userId }
        if let status = nevis?.status { user["nevisStatus"] = status }
        if !user.isEmpty { values["user"] = user }
        return values
    }
}
