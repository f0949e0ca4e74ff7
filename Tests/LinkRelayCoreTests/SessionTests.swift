import Foundation
import Testing

@testable import LinkRelayCore

struct SessionTests {
    static let created = Date(timeIntervalSince1970: 1_800_000_000)

    static func makeSession() -> Session {
        Session(
            id: "ses_test", linkKey: "link-key", channelToken: "channel-token", createdAt: created,
            expiresAt: created.addingTimeInterval(300), correlationId: "corr-1", authToken: "auth-token",
            clientRequestId: "req-1", phoneNumber: "2001004014", finalTargetUrl: "https://relay.example/l/link-key",
            idempotencyKey: nil, requestFingerprint: "fp"
        )
    }

    // MARK: - State machine

    @Test func newSessionIsWaitingWithNoEvents() {
        let session = Self.makeSession()
        #expect(session.state == .waiting)
        #expect(session.lastSeq == 0)
        #expect(session.version == 0)
        #expect(session.tappedAt == nil)
        #expect(session.result == nil)
        #expect(session.seenAuthIds.isEmpty)
        #expect(!session.verificationPending)
    }

    @Test func waitingEventKeepsStateAndStartsSeqAtOne() {
        var session = Self.makeSession()
        let expiresAt = session.expiresAt
        let event = session.record(.waiting(expiresAt: expiresAt), at: Self.created)
        #expect(event == SessionEvent(seq: 1, kind: .waiting(expiresAt: expiresAt), at: Self.created))
        #expect(session.state == .waiting)
        #expect(session.lastSeq == 1)
        #expect(session.tappedAt == nil)
    }

    @Test func tappedSetsStateAndTappedAt() {
        var session = Self.makeSession()
        session.record(.waiting(expiresAt: session.expiresAt), at: Self.created)
        let tapTime = Self.created.addingTimeInterval(12)
        let event = session.record(.tapped(asc: true), at: tapTime)
        #expect(event == SessionEvent(seq: 2, kind: .tapped(asc: true), at: tapTime))
        #expect(session.state == .tapped)
        #expect(session.tappedAt == tapTime)
        #expect(!event.isTerminal)
    }

    @Test func tappedWithAscFalseIsStillOnlyTapped() {
        var session = Self.makeSession()
        let event = session.record(.tapped(asc: false), at: Self.created)
        #expect(session.state == .tapped)
        #expect(event.kind == .tapped(asc: false))
    }

    @Test(arguments: [
        (Outcome.verified, SessionState.verified),
        (.failed, .failed),
        (.possessionRequired, .possessionRequired),
    ])
    func resultMovesToOutcomeStateAndClearsPending(_ outcome: Outcome, _ expected: SessionState) {
        var session = Self.makeSession()
        session.record(.waiting(expiresAt: session.expiresAt), at: Self.created)
        session.record(.tapped(asc: true), at: Self.created.addingTimeInterval(1))
        session.verificationPending = true
        let at = Self.created.addingTimeInterval(2)
        let event = session.record(.result(outcome), at: at)
        #expect(event == SessionEvent(seq: 3, kind: .result(outcome), at: at))
        #expect(session.state == expected)
        #expect(session.state.isTerminal)
        #expect(event.isTerminal)
        #expect(!session.verificationPending)
        #expect(session.tappedAt == Self.created.addingTimeInterval(1))
    }

    @Test(arguments: [
        (SessionEvent.Kind.expired, SessionState.expired),
        (.cancelled(), .cancelled),
    ])
    func expiryAndCancellationFromWaiting(_ kind: SessionEvent.Kind, _ expected: SessionState) {
        var session = Self.makeSession()
        session.record(.waiting(expiresAt: session.expiresAt), at: Self.created)
        session.verificationPending = true
        let event = session.record(kind, at: Self.created.addingTimeInterval(5))
        #expect(event.seq == 2)
        #expect(session.state == expected)
        #expect(session.state.isTerminal)
        #expect(event.isTerminal)
        #expect(!session.verificationPending)
        #expect(session.tappedAt == nil)
    }

    @Test(arguments: [
        (SessionEvent.Kind.expired, SessionState.expired),
        (.cancelled(), .cancelled),
    ])
    func expiryAndCancellationFromTapped(_ kind: SessionEvent.Kind, _ expected: SessionState) {
        var session = Self.makeSession()
        session.record(.waiting(expiresAt: session.expiresAt), at: Self.created)
        session.record(.tapped(asc: true), at: Self.created.addingTimeInterval(1))
        session.verificationPending = true
        let event = session.record(kind, at: Self.created.addingTimeInterval(5))
        #expect(event.seq == 3)
        #expect(session.state == expected)
        #expect(!session.verificationPending)
    }

    @Test func nonTerminalEventsKeepVerificationPending() {
        var session = Self.makeSession()
        session.verificationPending = true
        session.record(.waiting(expiresAt: session.expiresAt), at: Self.created)
        #expect(session.verificationPending)
        session.record(.tapped(asc: true), at: Self.created)
        #expect(session.verificationPending)
    }

    @Test func seqGrowsByOneFromOne() {
        var session = Self.makeSession()
        let kinds: [SessionEvent.Kind] = [
            .waiting(expiresAt: session.expiresAt), .tapped(asc: true), .tapped(asc: false), .result(.verified),
        ]
        var seqs: [Int] = []
        for (offset, kind) in kinds.enumerated() {
            let event = session.record(kind, at: Self.created.addingTimeInterval(Double(offset)))
            seqs.append(event.seq)
            #expect(session.lastSeq == event.seq)
        }
        #expect(seqs == [1, 2, 3, 4])
    }

    @Test func recordKeepsTheGivenTime() {
        var session = Self.makeSession()
        let at = Self.created.addingTimeInterval(42.5)
        #expect(session.record(.cancelled(), at: at).at == at)
    }

    @Test func isPastHold() {
        let session = Self.makeSession()
        #expect(!session.isPastHold(at: Self.created))
        #expect(!session.isPastHold(at: session.expiresAt.addingTimeInterval(-0.001)))
        #expect(session.isPastHold(at: session.expiresAt))
        #expect(session.isPastHold(at: session.expiresAt.addingTimeInterval(1)))
    }

    // MARK: - States and outcomes

    @Test(arguments: [
        (SessionState.waiting, false),
        (.tapped, false),
        (.verified, true),
        (.failed, true),
        (.possessionRequired, true),
        (.expired, true),
        (.cancelled, true),
    ])
    func stateIsTerminal(_ state: SessionState, _ terminal: Bool) {
        #expect(state.isTerminal == terminal)
    }

    @Test func everyStateIsCoveredAndTheLastFiveAreTerminal() {
        #expect(SessionState.allCases.count == 7)
        #expect(SessionState.allCases.filter(\.isTerminal).count == 5)
        #expect(
            SessionState.allCases.map(\.rawValue) == [
                "waiting", "tapped", "verified", "failed", "possession_required", "expired", "cancelled",
            ])
    }

    @Test(arguments: [
        (SessionEvent.Kind.waiting(expiresAt: created), false),
        (.tapped(asc: true), false),
        (.tapped(asc: false), false),
        (.result(.verified), true),
        (.result(.failed), true),
        (.result(.possessionRequired), true),
        (.expired, true),
        (.cancelled(), true),
    ])
    func eventKindIsTerminal(_ kind: SessionEvent.Kind, _ terminal: Bool) {
        #expect(kind.isTerminal == terminal)
        #expect(SessionEvent(seq: 1, kind: kind, at: Self.created).isTerminal == terminal)
    }

    @Test(arguments: [
        ("true", Outcome.verified),
        ("false", .failed),
        ("possession_required", .possessionRequired),
    ])
    func outcomeFromProveSuccess(_ success: String, _ expected: Outcome) {
        #expect(Outcome(proveSuccess: success) == expected)
    }

    @Test(arguments: [
        "pending", "", "TRUE", "True", "FALSE", "1", "0", "yes", "true ", " true", "verified",
        "failed", "possessionRequired", "POSSESSION_REQUIRED", "null", "unknown",
    ])
    func outcomeFromUnknownProveSuccessIsNil(_ success: String) {
        #expect(Outcome(proveSuccess: success) == nil)
    }

    @Test(arguments: Outcome.allCases)
    func outcomeStateMatchesRawValue(_ outcome: Outcome) {
        #expect(outcome.state.rawValue == outcome.rawValue)
        #expect(outcome.state.isTerminal)
    }

    // MARK: - Event JSON

    static let at = Date(timeIntervalSince1970: 1_800_000_123)
    static let expiresAt = Date(timeIntervalSince1970: 1_800_000_423)

    static let allEvents: [SessionEvent] = [
        SessionEvent(seq: 1, kind: .waiting(expiresAt: expiresAt), at: at),
        SessionEvent(seq: 2, kind: .tapped(asc: true), at: at),
        SessionEvent(seq: 2, kind: .tapped(asc: false), at: at),
        SessionEvent(seq: 3, kind: .result(.verified), at: at),
        SessionEvent(seq: 3, kind: .result(.failed), at: at),
        SessionEvent(seq: 3, kind: .result(.possessionRequired), at: at),
        SessionEvent(seq: 4, kind: .expired, at: at),
        SessionEvent(seq: 5, kind: .cancelled(), at: at),
    ]

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    static func jsonObject(_ event: SessionEvent) throws -> [String: Any] {
        let data = try encoder().encode(event)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test(arguments: allEvents)
    func eventRoundTripsISO8601(_ event: SessionEvent) throws {
        let data = try Self.encoder().encode(event)
        #expect(try Self.decoder().decode(SessionEvent.self, from: data) == event)
    }

    @Test(arguments: allEvents)
    func eventRoundTripsDefaultDates(_ event: SessionEvent) throws {
        let data = try JSONEncoder().encode(event)
        #expect(try JSONDecoder().decode(SessionEvent.self, from: data) == event)
    }

    @Test(arguments: allEvents)
    func eventEncodesExactlyTheDocumentedFields(_ event: SessionEvent) throws {
        let object = try Self.jsonObject(event)
        let extra: Set<String> =
            switch event.kind {
            case .waiting: ["expiresAt"]
            case .tapped: ["asc"]
            case .result: ["outcome"]
            case .cancelled: ["reason"]
            case .expired: []
            }
        #expect(Set(object.keys) == Set(["seq", "type", "at"]).union(extra))
        #expect(object["seq"] as? Int == event.seq)
        #expect(object["type"] as? String == event.kind.type)
        #expect(object["at"] as? String == "2027-01-15T08:02:03Z")
        let forbiddenKeys = [
            "phoneNumber", "phone", "proveId", "deviceId", "authId", "correlationId", "sessionId",
            "id", "evaluation", "clientRequestId", "clientHumanId", "authToken", "channelToken",
        ]
        for forbidden in forbiddenKeys {
            #expect(object[forbidden] == nil, "\(forbidden) must not be in a desktop event")
        }
    }

    @Test func waitingEncodesExpiresAt() throws {
        let object = try Self.jsonObject(SessionEvent(seq: 1, kind: .waiting(expiresAt: Self.expiresAt), at: Self.at))
        #expect(object["type"] as? String == "waiting")
        #expect(object["expiresAt"] as? String == "2027-01-15T08:07:03Z")
    }

    @Test(arguments: [true, false])
    func tappedEncodesAscAsBool(_ asc: Bool) throws {
        let data = try Self.encoder().encode(SessionEvent(seq: 2, kind: .tapped(asc: asc), at: Self.at))
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("\"asc\":\(asc)"))
        #expect(text.contains("\"type\":\"tapped\""))
    }

    @Test(arguments: Outcome.allCases)
    func resultEncodesOutcomeRawValue(_ outcome: Outcome) throws {
        let object = try Self.jsonObject(SessionEvent(seq: 3, kind: .result(outcome), at: Self.at))
        #expect(object["type"] as? String == "result")
        #expect(object["outcome"] as? String == outcome.rawValue)
    }

    @Test func decodesTheDocumentedWireFormat() throws {
        let json = #"{"seq":3,"type":"result","at":"2027-01-15T08:02:03Z","outcome":"possession_required"}"#
        let event = try Self.decoder().decode(SessionEvent.self, from: Data(json.utf8))
        #expect(event == SessionEvent(seq: 3, kind: .result(.possessionRequired), at: Self.at))
    }

    @Test(arguments: [
        #"{"seq":1,"type":"bogus","at":"2027-01-15T08:02:03Z"}"#,
        #"{"seq":1,"type":"waiting","at":"2027-01-15T08:02:03Z"}"#,
        #"{"seq":1,"type":"tapped","at":"2027-01-15T08:02:03Z","asc":"true"}"#,
        #"{"seq":1,"type":"result","at":"2027-01-15T08:02:03Z","outcome":"pending"}"#,
        #"{"seq":1,"type":"result","at":"2027-01-15T08:02:03Z"}"#,
        #"{"type":"expired","at":"2027-01-15T08:02:03Z"}"#,
        #"{"seq":1,"at":"2027-01-15T08:02:03Z"}"#,
    ])
    func rejectsMalformedEvents(_ json: String) {
        #expect(throws: DecodingError.self) {
            try Self.decoder().decode(SessionEvent.self, from: Data(json.utf8))
        }
    }
}
