import Foundation
import LinkRelaySupport
import ProveSandbox

/// The Access App page (`/sandbox/nevis/app`): it opens what the phone would be given (a link, the payload
/// a QR code holds, a push's JSON), shows the operation's message and answers Approve or Deny; with
/// `?user=NAME` it lists that user's pending operations, as the app's fetch channel does when it opens.
/// Plain server-rendered HTML, no script; everything shown is escaped.
extension NevisSandbox {
    /// `GET /sandbox/nevis/app` (and `/open`, the link's path). Opening an operation is the app opening the
    /// link: it redeems the token (nevisFIDO then says `clientAuthenticating`); a HEAD (`opening` false)
    /// redeems nothing.
    func appPage(_ fields: [String: String], opening: Bool) -> SandboxReply {
        if let user = fields["user"], !user.isEmpty { return userPage(user) }
        let given = fields["dispatchTokenResponse"] ?? fields["payload"] ?? ""
        guard !given.isEmpty else { return homePage() }
        // A query reads `+` as a space: plain base64 pasted in the form has `+`.
        guard let payload = Self.decodePayload(given.replacingOccurrences(of: " ", with: "+")) else {
            return Self.notice(
                400, "Not a Nevis code",
                "This is neither an app link, nor a scanned payload (base64url JSON with nma_data), nor a push's JSON.",
                back: homeURL)
        }
        let now = now()
        let opened = withOperation(token: payload.data.token) { found -> (Operation, Operation.Phase)? in
            guard var operation = found else { return nil }
            var phase = operation.phase(at: now, lifetime: tokenLifetime)
            if opening, phase == .waiting, operation.answeredOnPage {
                operation.redeemed = true
                operation.lastUpdatedAt = now
                found = operation
                phase = .redeemed
            }
            return (operation, phase)
        }
        guard let (operation, phase) = opened else { return Self.unknownOperation(back: homeURL) }
        if let closed = Self.closedNotice(phase, back: homeURL) { return closed }
        return Self.page(200, "Confirm", "<h1>Confirm</h1>" + card(operation, returnTo: nil))
    }

    /// `?user=NAME`: the user's operations that wait for an answer, newest first.
    private func userPage(_ name: String) -> SandboxReply {
        guard let user = NevisTestUser.find(username: name) ?? NevisTestUser.find(userId: name) else {
            return Self.notice(
                404, "No such test user", "The sandbox has no test user \(Self.escape(name)).", back: homeURL)
        }
        let operations = pendingOperations(of: user)
        var html = "<h1>\(Self.escape(user.username))’s Access App</h1>"
        if user.device == .none {
            html += "<p>\(Self.escape(user.username)) has no registered device: no operation reaches it.</p>"
        } else if operations.isEmpty {
            html +=
                "<p>No pending operations. Start one on the desktop (push, or a QR code), then reload this page.</p>"
        } else {
            html += "<p class=\"small\">Pending operations, newest first, as the app fetches them when it opens.</p>"
            html += operations.map { card($0, returnTo: user.username) }.joined()
        }
        html +=
            "<p><a href=\"\(Self.escape(userURL(user.username)))\">Reload</a> · <a href=\"\(Self.escape(homeURL))\">Open a code</a></p>"
        return Self.page(200, "\(user.username)’s Access App", html)
    }

    /// One operation: who it is for, its message, and Approve / Deny when a person answers it.
    private func card(_ operation: Operation, returnTo user: String?) -> String {
        var html = "<section class=\"operation\">"
        if let owner = operation.user {
            html += "<p class=\"small\">For <b>\(Self.escape(owner.username))</b></p>"
        } else {
            let account = NevisTestUser.usernameless.username
            html += "<p class=\"small\">Usernameless: signs in as <b>\(Self.escape(account))</b></p>"
        }
        if let message = operation.message {
            html += "<p class=\"message\">\(Self.escape(message))</p>"
        } else {
            html += "<p class=\"message\">Sign in?</p>"
        }
        let backend = operation.backend == .authCloud ? "Authentication Cloud" : "nevisFIDO"
        html += "<p class=\"small\">\(backend), started \(Self.escape(Self.timestamp(operation.createdAt)))</p>"
        if operation.answeredOnPage {
            let returnField =
                user.map { "<input type=\"hidden\" name=\"user\" value=\"\(Self.escape($0))\">" } ?? ""
            html += "<div class=\"choices\">"
            for (answer, label) in [("approve", "Approve"), ("deny", "Deny")] {
                html += """
                    <form method="post" action="\(Self.escape(answerURL))">\
                    <input type="hidden" name="token" value="\(Self.escape(operation.token))">\
                    <input type="hidden" name="answer" value="\(answer)">\(returnField)\
                    <button class="\(answer)">\(label)</button></form>
                    """
            }
            html += "</div>"
        } else {
            html += "<p>\(Self.escape(operation.user?.username ?? ""))’s device answers by itself (a scripted test "
            html += "user): nothing to do here.</p>"
        }
        return html + "</section>"
    }

    /// `POST /sandbox/nevis/app/answer` (form `token`, `answer=approve|deny`, optional `user`). The app
    /// redeems the token first, as the real one does, then answers.
    func answerPage(_ form: [String: String]) -> SandboxReply {
        let back = form["user"].flatMap { $0.isEmpty ? nil : userURL($0) } ?? homeURL
        guard let token = form["token"], let choice = form["answer"], ["approve", "deny"].contains(choice) else {
            return Self.notice(400, "Not an answer", "The form needs a token and answer=approve or deny.", back: back)
        }
        let now = now()
        let outcome = withOperation(token: token) { found -> Result<Operation.Answer, AnswerRefusal> in
            guard var operation = found else { return .failure(.unknown) }
            let phase = operation.phase(at: now, lifetime: tokenLifetime)
            guard phase.isOpen else { return .failure(.closed(phase)) }
            guard operation.answeredOnPage else { return .failure(.scripted) }
            let answer: Operation.Answer = choice == "approve" ? .approved : .denied
            operation.redeemed = true
            operation.answer = answer
            operation.lastUpdatedAt = now
            found = operation
            return .success(answer)
        }
        switch outcome {
        case .success(.approved):
            return Self.notice(
                200, "Approved", "You approved. The desktop continues; you can close this page.", back: back)
        case .success(.denied):
            return Self.notice(200, "Denied", "You denied. The desktop is told; you can close this page.", back: back)
        case .failure(.unknown):
            return Self.unknownOperation(back: back)
        case .failure(.closed(let phase)):
            return Self.closedNotice(phase, back: back) ?? Self.unknownOperation(back: back)
        case .failure(.scripted):
            return Self.notice(
                409, "Answered by the device", "This test user’s device answers by itself.", back: back)
        }
    }

    enum AnswerRefusal: Error {
        case unknown
        case closed(Operation.Phase)
        case scripted
    }

    // MARK: Pages

    private var homeURL: String { "\(publicBaseURL)/sandbox/nevis/app" }
    private var answerURL: String { "\(publicBaseURL)/sandbox/nevis/app/answer" }

    private func userURL(_ user: String) -> String {
        homeURL + "?user=" + (user.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
    }

    /// The page without a code: a field for what the phone was given, the fetch channel, the test users.
    private func homePage() -> SandboxReply {
        var html = """
            <h1>Nevis Access App</h1>
            <form method="get" action="\(Self.escape(homeURL))" class="open">
            <label for="payload">Scanned code, link or push payload</label>
            <textarea id="payload" name="payload" rows="4" required spellcheck="false" \
            placeholder="https://…/sandbox/nevis/open?dispatchTokenResponse=…  or  eyJubWFfZGF0YSI6…  or  {&quot;nma_data&quot;: …}"></textarea>
            <button>Open</button></form>
            <h2>Pending operations</h2>
            <p class="small">Push operations wait here, as the app fetches them when it opens.</p>
            <form method="get" action="\(Self.escape(homeURL))">
            <input type="text" name="user" value="dave" aria-label="username"><button>Open the app as</button></form>
            <h2>Test users</h2><table><tr><th>username</th><th>userId</th><th>device</th></tr>
            """
        for user in NevisTestUser.all {
            let device =
                switch user.device {
                case .approves: "approves by herself"
                case .denies: "denies by himself"
                case .none: "no device"
                case .person: user == NevisTestUser.usernameless ? "usernameless account; you answer" : "you answer"
                }
            html += "<tr><td><a href=\"\(Self.escape(userURL(user.username)))\">\(Self.escape(user.username))</a></td>"
            html += "<td><code>\(user.userId)</code></td><td>\(device)</td></tr>"
        }
        return Self.page(200, "Nevis Access App", html + "</table>")
    }

    private static func unknownOperation(back: String) -> SandboxReply {
        notice(
            404, "Unknown operation", "This code or link is unknown, or its operation is over and forgotten.",
            back: back)
    }

    /// The notice for an operation no answer can change; nil while it is open.
    private static func closedNotice(_ phase: Operation.Phase, back: String) -> SandboxReply? {
        switch phase {
        case .waiting, .redeemed: nil
        case .tokenTimedOut, .timedOut:
            notice(410, "Expired", "This operation has expired. Start a new one on the desktop.", back: back)
        case .approved: notice(409, "Already answered", "This operation was already approved.", back: back)
        case .denied: notice(409, "Already answered", "This operation was already denied.", back: back)
        }
    }

    /// A page with a heading, one paragraph (already escaped) and a way back.
    private static func notice(_ status: Int, _ title: String, _ text: String, back: String) -> SandboxReply {
        page(status, title, "<h1>\(escape(title))</h1><p>\(text)</p><p><a href=\"\(escape(back))\">Back</a></p>")
    }

    private static func page(_ status: Int, _ title: String, _ main: String) -> SandboxReply {
        var reply = SandboxReply.html(
            status,
            """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <title>\(escape(title))</title>
            <style>\(style)</style>
            </head>
            <body>
            <p class="banner">SANDBOX: a simulated Nevis Access App; no real device is asked.</p>
            <main class="card">\(main)</main>
            </body>
            </html>
            """)
        // The page runs nothing and loads nothing: its style is inline, its forms post to the sandbox.
        reply.extraHeaders = [
            (
                name: "Content-Security-Policy",
                value: "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"
            ),
            (name: "Referrer-Policy", value: "no-referrer"),
        ]
        return reply
    }

    /// The relay's page style (templates/relay.css), cut to what this page uses: it stands alone, also
    /// under `linkrelay sandbox`, which serves no assets.
    private static let style = """
        :root { color-scheme: light dark; --accent: #2563eb; --ok: #15803d; --bad: #b91c1c; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 17px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; padding: 1rem; }
        main.card { max-width: 32rem; margin: 2rem auto; padding: 1.5rem; border-radius: 12px;
          border: 1px solid rgba(127,127,127,.3); }
        h1 { font-size: 1.4rem; margin: .5rem 0; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
        .small { font-size: .9rem; opacity: .8; }
        .banner { max-width: 32rem; margin: 0 auto; padding: .4rem .8rem; border-radius: 8px; background: #fde68a;
          color: #111; font-size: .85rem; font-weight: 600; }
        form { display: flex; gap: .5rem; flex-wrap: wrap; margin: .5rem 0; }
        form.open { flex-direction: column; }
        textarea, input[type=text] { flex: 1; font: inherit; padding: .6rem .75rem; min-width: 10rem;
          border: 1px solid rgba(127,127,127,.6); border-radius: 8px; background: Canvas; color: CanvasText; }
        textarea { font-family: ui-monospace, monospace; font-size: .85rem; }
        button { font: inherit; padding: .5rem 1rem; border-radius: 8px; border: 0; background: var(--accent);
          color: #fff; cursor: pointer; }
        button.approve { background: var(--ok); } button.deny { background: var(--bad); }
        section.operation { padding: .75rem; margin: .75rem 0; border-radius: 12px; background: rgba(127,127,127,.15); }
        .message { font-size: 1.15rem; font-weight: 600; overflow-wrap: anywhere; white-space: pre-wrap; }
        .choices { display: flex; gap: .5rem; } .choices form { flex: 1; margin: 0; }
        .choices button { width: 100%; padding: .8rem 1rem; font-weight: 600; }
        table { border-collapse: collapse; font-size: .9rem; } td, th { padding: .2rem .5rem; text-align: left; }
        """

    static func escape(_ text: String) -> String { HTML.escape(text) }
}
