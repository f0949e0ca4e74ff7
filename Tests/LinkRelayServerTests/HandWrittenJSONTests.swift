import Foundation
import LinkRelayCore
import LinkRelaySupport
import Testing

@testable import LinkRelayServer

/// The hand-written JSON of the store and the channels says what `Codable` would.
@Suite("Hand-written JSON", .timeLimit(.minutes(1)))
struct HandWrittenJSONTests {
    static let now = Date(timeIntervalSinceReferenceDate: 785_412_345.678_901_2)

    static var sessions: [Session] {
        var plain = Session(
            id: "ses_1", linkKey: "k1", channelToken: "t", createdAt: now, expiresAt: now.addingTimeInterval(180),
            correlationId: "c", authToken: nil, clientRequestId: "r", phoneNumber: "2001004014",
            finalTargetUrl: "https://relay.example/l/k1", idempotencyKey: nil, requestFingerprint: "f")
        plain.record(.waiting(expiresAt: plain.expiresAt), at: now)
        var full = plain
        full.authToken = "eyJ.a\"b\\c"
        full.idempotencyKey = "key with \"quotes\", a tab\t, a newline\n, \u{1} and é 😀"
        full.desktopIPAddress = "2001:db8::1"
        full.seenAuthIds = ["a", "b"]
        full.record(.tapped(asc: true), at: now.addingTimeInterval(0.1))
        full.verificationPending = true
        full.version = 3
        var ended = full
        ended.result = SessionResult(
            outcome: .failed, proveSuccess: "false", phoneNumber: "2001004014", proveId: "p", deviceId: nil,
            clientHumanId: "h", clientRequestId: "r",
            evaluation: [
                "risk": .init(result: "pass"),
                "authentication": .init(result: "fail", failureReasons: ["9100": "Phone possession incomplete."]),
            ],
            reason: "why")
        ended.result?.binding = .init(
            success: true, phoneNumber: "2001004014", deviceId: "d",
            evaluation: ["authentication": .init(result: "pass")], at: now.addingTimeInterval(2.5))
        ended.record(.result(.failed), at: now.addingTimeInterval(1e-6))
        var prefill = ended
        prefill.prefill = PrefillProgress(
            next: ["v3-complete": "/v3/complete"], challengeMissing: true,
            individual: PrefillIndividual(
                firstName: "Marcia", lastName: "Longo \"é\"", dob: "1982-07-19", ssn: "470806227",
                emailAddresses: ["m@example.com"], addresses: [.init(address: "00 Mallard Park", postalCode: "70165")]),
            completed: false)
        return [plain, full, ended, prefill]
    }

    static let events: [SessionEvent] = [
        SessionEvent(seq: 1, kind: .waiting(expiresAt: now.addingTimeInterval(180)), at: now),
        SessionEvent(seq: 2, kind: .tapped(asc: false), at: now.addingTimeInterval(0.0005)),
        SessionEvent(seq: 3, kind: .result(.possessionRequired), at: now.addingTimeInterval(0.9999)),
        SessionEvent(seq: 4, kind: .cancelled(reason: .rejected), at: now),
        SessionEvent(seq: 5, kind: .expired, at: now.addingTimeInterval(-86_400 * 400)),
    ]

    /// Both forms, parsed as plain JSON values.
    static func sameJSON(_ a: [UInt8], _ b: Data) throws -> Bool {
        let left = try JSONSerialization.jsonObject(with: Data(a)) as? NSDictionary
        let right = try JSONSerialization.jsonObject(with: b) as? NSDictionary
        return left != nil && left == right
    }

    @Test("A stored session reads back as itself, with the fields Codable writes")
    func storedSession() throws {
        for session in Self.sessions {
            #expect(try JSONDecoder().decode(Session.self, from: Data(session.storedJSON)) == session)
            #expect(try Self.sameJSON(session.storedJSON, JSONEncoder().encode(session)))
        }
    }

    @Test("A stored event reads back as itself, with the fields Codable writes")
    func storedEvent() throws {
        for event in Self.events {
            #expect(try JSONDecoder().decode(SessionEvent.self, from: Data(event.storedJSON)) == event)
            #expect(try Self.sameJSON(event.storedJSON, JSONEncoder().encode(event)))
        }
    }

    @Test("An event on the wire is byte for byte what RelayJSON writes")
    func wireEvent() {
        for event in Self.events {
            #expect(
                String(decoding: event.wireJSON, as: UTF8.self)
                    == String(decoding: RelayJSON.encode(event), as: UTF8.self))
        }
    }

    @Test("A long-poll answer is byte for byte what RelayJSON writes")
    func pollAnswer() {
        struct PollAnswer: Encodable {
            var events: [SessionEvent]
            var after: Int
            var done: Bool
        }
        for (events, done) in [([], false), (Array(Self.events.prefix(2)), false), (Self.events, true)] {
            let after = events.last?.seq ?? 7
            #expect(
                String(decoding: SessionEvent.pollAnswerJSON(events, after: after, done: done), as: UTF8.self)
                    == String(
                        decoding: RelayJSON.encode(PollAnswer(events: events, after: after, done: done)), as: UTF8.self)
            )
        }
    }

    @Test("ISO 8601 with milliseconds, as Foundation formats it")
    func timestamps() {
        var dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 951_782_400.9995)]  // 2000-02-29
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: 0..<4_102_444_800, using: &generator)))
        }
        for date in dates {
            #expect(
                ISO8601Milliseconds.string(date)
                    == date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
                "\(date.timeIntervalSince1970)")
        }
    }
}
