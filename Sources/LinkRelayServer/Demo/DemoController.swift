import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOHTTP1
import ProveSandbox

/// The sandbox demo: `/` starts a session for a sandbox phone number and shows the desktop waiting;
/// `/sandbox/phone` is the simulated phone's inbox. Its Pre-Fill tab then takes the customer through
/// Prove's challenge and complete on the desktop page; its Nevis tab (`DemoController+Nevis.swift`)
/// starts an out-of-band approval answered on the Nevis sandbox's Access App page. Mounted only with
/// `--prove sandbox`.
final class DemoController: Sendable {
    let service: SessionService
    let sandbox: ProveSandbox
    let pages: Pages
    let publicURL: String
    /// The only origin whose pages may post the demo's forms: the relay's own.
    let publicOrigin: String
    let securityEvents: SecurityEvents

    init(
        service: SessionService, sandbox: ProveSandbox, pages: Pages, publicURL: String, securityEvents: SecurityEvents
    ) {
        self.service = service
        self.sandbox = sandbox
        self.pages = pages
        self.publicURL = publicURL
        self.publicOrigin = RelayConfiguration.origin(of: publicURL)
        self.securityEvents = securityEvents
    }

    /// The largest form a demo route reads; the confirm form has a limit of its own.
    static let maximumFormSize = 1024
    /// The largest confirm form (`POST /demo/prefill/complete`): a person's fields, percent-encoded.
    static let maximumConfirmFormSize = 4096

    /// The sandbox's Pre-Fill user whose flow waits for a tap: Marcia Longo.
    static let prefillUser = "2001001693"

    /// `GET /`, the Unify tab; `GET /?flow=prefill`, the Pre-Fill tab; `GET /?flow=nevis`, the Nevis tab.
    func home(_ request: RelayRequest) throws -> Reply {
        let flow = try request.queryItem("flow")
        if flow == Flow.prefill.rawValue {
            return .now(pages.page("demo", ["prefill": true, "phoneNumber": Self.prefillUser]))
        }
        if flow == Flow.nevis.rawValue { return .now(nevisHome()) }
        return .now(pages.page("demo", ["phoneNumber": "2001004014"]))
    }

    /// `POST /demo` (form `phoneNumber=…`): creates a session as an integrator would and shows it waiting.
    func start(_ request: RelayRequest) throws -> Reply { try begin(.unify, request) }

    /// `POST /demo/prefill` (form `phoneNumber`, optional `dob` or `ssn`): a Pre-Fill session, waiting as
    /// Unify's does.
    func startPrefill(_ request: RelayRequest) throws -> Reply { try begin(.prefill, request) }

    private func begin(_ flow: Flow, _ request: RelayRequest) throws -> Reply {
        let form = try form(request)
        let phoneNumber = try Self.field("phoneNumber", in: form) ?? ""
        var fields = ["phoneNumber": phoneNumber]
        if flow == .prefill {
            fields.merge(try Self.identity(in: form)) { $1 }
            fields["flow"] = flow.rawValue
        }
        return .later { [self, fields] in
            do {
                return waitPage(try await create(fields))
            } catch {
                // The dob and SSN are not written back into the page.
                let problem = try Self.problem(error)
                return pages.page(
                    "demo",
                    ["prefill": flow == .prefill, "phoneNumber": phoneNumber, "error": Self.message(problem)],
                    status: problem.status)
            }
        }
    }

    /// `POST /demo/prefill/challenge` (form `session`, `token`, optional `dob` or `ssn`), sent by the wait
    /// page once the result is `verified`: asks Prove for the person (`/challenge`) and shows them to
    /// confirm. It asks for a dob or SSN first when the create had neither; before the result it shows
    /// the wait page again, so the form also works without a script.
    func prefillChallenge(_ request: RelayRequest) throws -> Reply {
        let form = try form(request)
        let fields = try Self.identity(in: form)
        return .later { [self] in
            guard let session = try await prefillSession(form) else { return unknownSession() }
            guard session.state == .verified, let progress = session.prefill else {
                return session.state.isTerminal ? notVerified(session) : waitPage(session)
            }
            // Back or reload after the challenge: the person Prove found is kept with the session.
            if let person = progress.individual, progress.offeredSteps.contains(.complete) {
                return confirmPage(session, person)
            }
            guard progress.offeredSteps.contains(.challenge) else {
                return outcome(session, progress.completed == true)
            }
            if progress.challengeMissing == true, fields.isEmpty { return prefillPage(session, ["question": true]) }
            do {
                let input = try PrefillStepBody.challenge(RelayJSON.encode(fields)).get()
                let answer = try await service.challenge(sessionID: session.id, tenant: session.owner, input)
                guard answer.success, let person = answer.individual else {
                    return outcome(session, false, detail: "Prove found no one with those details for this phone.")
                }
                return confirmPage(session, PrefillIndividual(person))
            } catch {
                let problem = try Self.problem(error)
                return prefillPage(
                    session, ["question": true, "error": Self.message(problem)], status: problem.status)
            }
        }
    }

    /// `POST /demo/prefill/complete` (form `session`, `token` and the person's fields): the person as the
    /// customer confirmed them goes to Prove (`/complete`), checked as the API checks its body.
    func prefillComplete(_ request: RelayRequest) throws -> Reply {
        let form = try form(request)
        let person = try Self.individual(in: form)
        return .later { [self] in
            guard let session = try await prefillSession(form) else { return unknownSession() }
            if let completed = session.prefill?.completed { return outcome(session, completed) }
            do {
                let checked = try PrefillStepBody.complete(RelayJSON.encode(["individual": person])).get()
                let answer = try await service.complete(sessionID: session.id, tenant: session.owner, checked)
                return outcome(session, answer.success)
            } catch {
                let problem = try Self.problem(error)
                return confirmPage(session, person, error: Self.message(problem), status: problem.status)
            }
        }
    }

    /// Creates a session from the API's own fields, checked as `POST /v1/sessions` checks its body.
    func create(_ fields: [String: String]) async throws -> Session {
        let input = try CreateSessionRequest.validate(
            RelayJSON.encode(fields), maximumHold: RelayConfiguration.maximumHold
        ).get()
        return try await service.create(input, idempotencyKey: nil)
    }

    /// The desktop waiting on the session's channel, with the browser client. The number is shown masked,
    /// as the sandbox phone's messages show it; the script keeps it whole for the resend and number change.
    private func waitPage(_ session: Session) -> Answer {
        let created = CreatedSession(session, publicURL: publicURL)
        let websocketOrigin = RelayConfiguration.origin(of: created.channel.websocket)
        return pages.page(
            "demo-wait",
            [
                "phoneNumber": session.phoneNumber ?? "",
                "maskedPhone": session.phoneNumber.map(Secrets.maskedPhone) ?? "",
                "sessionId": session.id, "token": session.channelToken,
                "websocket": created.channel.websocket, "events": created.channel.events,
                "poll": created.channel.poll, "expiresAt": ISO8601Milliseconds.string(session.expiresAt),
                "holdSeconds": Int(session.expiresAt.timeIntervalSince(session.createdAt)),
                "phonePage": "/sandbox/phone?phoneNumber=" + (session.phoneNumber ?? ""),
                "prefill": session.flow == .prefill,
            ],
            extraCSP: "; script-src 'self'; connect-src 'self' \(websocketOrigin)")
    }

    /// The Pre-Fill session a demo form names, when the form also has its channel token: the wait page's
    /// own, so a session ID alone shows no one's details.
    private func prefillSession(_ form: Substring) async throws -> Session? {
        guard let id = try Self.field("session", in: form), let token = try Self.field("token", in: form),
            let session = try await service.anyTenantsSession(id), session.flow == .prefill,
            Secrets.constantTimeEquals(token, session.channelToken)
        else { return nil }
        return session
    }

    /// A page of the Pre-Fill steps after the result, carrying the session to the next form.
    private func prefillPage(_ session: Session, _ values: [String: Any], status: HTTPResponseStatus = .ok) -> Answer {
        pages.page(
            "demo-prefill", values.merging(["sessionId": session.id, "token": session.channelToken]) { $1 },
            status: status)
    }

    /// The person in editable fields, to confirm: the demo page is the customer's own screen. No SSN.
    private func confirmPage(
        _ session: Session, _ person: PrefillIndividual, error: String? = nil, status: HTTPResponseStatus = .ok
    ) -> Answer {
        let address = person.addresses?.first
        var values: [String: Any] = [
            "person": [
                "firstName": person.firstName ?? "", "lastName": person.lastName ?? "", "dob": person.dob ?? "",
                "address": address?.address ?? "", "extendedAddress": address?.extendedAddress ?? "",
                "city": address?.city ?? "", "region": address?.region ?? "", "postalCode": address?.postalCode ?? "",
            ]
        ]
        values["error"] = error
        return prefillPage(session, values, status: status)
    }

    private func outcome(_ session: Session, _ verified: Bool, detail: String? = nil) -> Answer {
        let detail =
            detail
            ?? (verified
                ? "Prove confirmed your details: the sign-up goes on with them."
                : "Prove could not confirm these details.")
        return prefillPage(session, ["done": ["verified": verified, "detail": detail]])
    }

    /// A session that ended without `verified`: nothing is filled in.
    private func notVerified(_ session: Session) -> Answer {
        let detail =
            switch session.state {
            case .expired: "The link expired before it was tapped."
            case .cancelled: "The session was cancelled."
            default: "Prove could not confirm that this phone is yours, so nothing can be filled in."
            }
        return outcome(session, false, detail: detail)
    }

    private func unknownSession() -> Answer {
        pages.page("demo-prefill", ["unknown": true], status: .notFound)
    }

    /// The person's fields of the confirm form; an empty field is left out, an address with no field too.
    private static func individual(in form: Substring) throws(Problem) -> PrefillIndividual {
        var person = PrefillIndividual(
            firstName: try field("firstName", in: form), lastName: try field("lastName", in: form),
            dob: try field("dob", in: form))
        let address = PrefillIndividual.Address(
            address: try field("address", in: form), extendedAddress: try field("extendedAddress", in: form),
            city: try field("city", in: form), region: try field("region", in: form),
            postalCode: try field("postalCode", in: form))
        if address != PrefillIndividual.Address() { person.addresses = [address] }
        return person
    }

    /// The request's form (`application/x-www-form-urlencoded`); one over the route's limit reads as empty.
    /// Every demo form is the relay's own page's: one posted from another origin is refused (403, the
    /// friendly page) before anything is read or changed, as the confirm form's is. In sandbox mode the
    /// Pre-Fill steps show a person's details to whoever holds the channel token, so a page elsewhere
    /// that learned one must not be able to ask.
    func form(_ request: RelayRequest) throws(Problem) -> Substring {
        if request.isPostedFromAnotherOrigin(than: publicOrigin) {
            securityEvents.record(.demoOrigin)
            throw Problem.forbidden("The demo's forms are posted from the relay's own pages only.")
        }
        return request.body.map { String(buffer: $0)[...] } ?? ""
    }

    /// The `dob` and `ssn` a form gives, as the API's fields.
    private static func identity(in form: Substring) throws(Problem) -> [String: String] {
        ["dob": try field("dob", in: form), "ssn": try field("ssn", in: form)].compactMapValues { $0 }
    }

    /// A form field without surrounding spaces; nil when absent or empty; 400 when given twice.
    static func field(_ name: String, in form: Substring) throws(Problem) -> String? {
        let value = try FormFields.value(name, in: form, what: "form field")?.trimmingCharacters(in: .whitespaces)
        return value?.isEmpty == false ? value : nil
    }

    /// The problem the API would answer; an error the relay does not raise on purpose goes on (a 500 page).
    static func problem(_ error: any Error) throws -> Problem {
        guard let problem = ErrorMapping.knownProblem(error) else { throw error }
        return problem
    }

    /// What went wrong, in the words of the API's answer, each invalid field by its label on the form.
    static func message(_ problem: Problem) -> String {
        guard !problem.errors.isEmpty else { return problem.detail }
        return problem.errors.map { (labels[$0.field] ?? $0.field) + " " + $0.message }.joined(separator: "; ")
    }

    private static let labels = [
        "phoneNumber": "Phone number", "dob": "Date of birth", "username": "User", "message": "Message",
        "channel": "Channel", "ssn": "SSN", "individual.firstName": "First name",
        "individual.lastName": "Last name", "individual.dob": "Date of birth",
        "individual.addresses[0].address": "Address", "individual.addresses[0].extendedAddress": "Apartment or suite",
        "individual.addresses[0].city": "City", "individual.addresses[0].region": "State",
        "individual.addresses[0].postalCode": "ZIP code",
    ]

    /// `GET /sandbox/phone?phoneNumber=N`: the simulated phone's inbox.
    func phone(_ request: RelayRequest) throws -> Reply {
        let phoneNumber = try request.queryItem("phoneNumber") ?? ""
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
    func resend(_ request: RelayRequest) throws -> Reply {
        let phone = try FormFields.value("phoneNumber", in: try form(request), what: "form field") ?? ""
        return .later { [sandbox] in
            _ = await sandbox.respond(
                method: "POST", path: "/sandbox/resend",
                query: "phoneNumber=" + (phone.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""),
                authorization: nil, body: [])
            return Self.backToPhone(phone)
        }
    }

    /// `POST /demo/change-number` (form `from`, `to`): the client SDK's number change, through the sandbox.
    func changeNumber(_ request: RelayRequest) throws -> Reply {
        let form = try form(request)
        let from = try FormFields.value("from", in: form, what: "form field") ?? ""
        let to = try FormFields.value("to", in: form, what: "form field")?.trimmingCharacters(in: .whitespaces) ?? ""
        return .later { [sandbox] in
            let body = Array(RelayJSON.encode(["from": from, "to": to]))
            let answer = await sandbox.respond(
                method: "POST", path: "/sandbox/change-number", query: nil, authorization: nil, body: body)
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
