import Foundation
import Testing

@testable import LinkRelayCore

/// What the backend sends for a Nevis approval: who approves (a username, a user id, or no one:
/// usernameless), what the app shows, and the channel. Prove's fields are refused on it, and its fields on
/// Prove's flows; every invalid field is named.
struct NevisRequestTests {
    static func create(_ body: String) -> Result<CreateSessionRequest, CreateSessionRequest.Rejection> {
        CreateSessionRequest.validate(Data(body.utf8), maximumHold: 600)
    }

    static let messageRule =
        "must be visible text of 1 to 500 characters without control or bidirectional characters"

    static func invalid(_ errors: (String, String)...) -> CreateSessionRequest.Rejection {
        .invalid(errors.map { .init(field: $0.0, message: $0.1) })
    }

    @Test func nevisCreates() throws {
        let named = try Self.create(
            #"{"flow":"nevis","username":"alice","message":"Pay CHF 120.00 to ACME?\nReference 42","holdSeconds":90}"#
        ).get()
        #expect(named.flow == .nevis && named.username == "alice" && named.channel == nil && named.holdSeconds == 90)
        #expect(named.message == "Pay CHF 120.00 to ACME?\nReference 42")
        // No phone number is needed, and none is the usernameless operation's either.
        #expect(try Self.create(#"{"flow":"nevis"}"#).get().username == nil)
        let push = try Self.create(
            #"{"flow":"nevis","userId":"0b6f6c4e-4c1a-4d7e-9b7e-6a9f0c1d2e3f","channel":"push"}"#
        ).get()
        #expect(push.channel == "push" && push.userId == "0b6f6c4e-4c1a-4d7e-9b7e-6a9f0c1d2e3f")
    }

    @Test func proveFieldsAreRefusedOnNevis() {
        #expect(
            Self.create(#"{"flow":"nevis","phoneNumber":"2001004014","possessionType":"desktop","dob":"1982-07"}"#)
                == .failure(
                    Self.invalid(
                        ("phoneNumber", "applies to Prove's flows only"),
                        ("possessionType", "applies to Prove's flows only"), ("dob", "applies to Prove's flows only"))))
    }

    @Test func nevisFieldsAreRefusedOnProve() {
        #expect(
            Self.create(#"{"phoneNumber":"2001004014","username":"alice","channel":"app"}"#)
                == .failure(
                    Self.invalid(
                        ("username", "applies to flow nevis only"), ("channel", "applies to flow nevis only"))))
    }

    @Test func invalidNevisFields() {
        let long = String(repeating: "x", count: 501)
        #expect(
            Self.create(#"{"flow":"nevis","username":"","message":"\#(long)","userId":"42","channel":"sms"}"#)
                == .failure(
                    Self.invalid(
                        (
                            "username",
                            "must be visible text of 1 to 256 characters without control or bidirectional characters"
                        ),
                        ("message", Self.messageRule),
                        ("userId", "must be a UUID"), ("userId", "give username or userId, not both"),
                        ("channel", "must be app or push"))))
        #expect(
            Self.create(#"{"flow":"nevis","message":"Pay\u0007 now"}"#)
                == .failure(
                    Self.invalid(("message", Self.messageRule))))
        // Text on the phone cannot be spoofed: no bidirectional controls, and something visible.
        for message in [
            #"Pay CHF 12 to \u202Eevil\u202C"#, "Pay \u{2066}CHF\u{2069} 12", "\u{200F}Approve",
            "\u{200B}\u{200D}\u{FEFF}",
            "  \u{2060} ", "\u{0301}\u{FE0F}",
        ] {
            let body = #"{"flow":"nevis","message":"\#(message)"}"#
            #expect(Self.create(body) == .failure(Self.invalid(("message", Self.messageRule))), "\(body)")
        }
        #expect(
            Self.create(#"{"flow":"nevis","username":"\u202Eecila"}"#)
                == .failure(
                    Self.invalid(
                        (
                            "username",
                            "must be visible text of 1 to 256 characters without control or bidirectional characters"
                        ))))
        // Arabic, Hebrew and emoji with their joiners show as written.
        for message in ["ادفع 12 فرنك؟", "לאשר תשלום?", "👩‍💻 Approve?", "é\u{0301}"] {
            #expect((try? Self.create(#"{"flow":"nevis","message":"\#(message)"}"#).get().message) == message)
        }
        // A push goes to a user's device: there is no usernameless push.
        #expect(
            Self.create(#"{"flow":"nevis","channel":"push"}"#)
                == .failure(
                    Self.invalid(
                        (
                            "channel",
                            "push needs a username or userId: only a QR code or link is usernameless"
                        ))))
    }
}
