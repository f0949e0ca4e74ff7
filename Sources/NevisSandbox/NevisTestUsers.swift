/// A test user of the Nevis simulator, the same on both backends.
///
/// | username | userId | device |
/// |---|---|---|
/// | `alice` | `a11ce000-0000-4000-8000-000000000001` | approves by herself |
/// | `bob` | `b0b00000-0000-4000-8000-000000000002` | denies by himself |
/// | `carol` | `ca401000-0000-4000-8000-000000000003` | none: Auth Cloud answers 400, nevisFIDO `dispatchTargetNotFound` |
/// | `dave` | `da7e0000-0000-4000-8000-000000000004` | a person answers on the app page (`/sandbox/nevis/app`) |
/// | `erin` | `e4140000-0000-4000-8000-000000000005` | the usernameless account: a usernameless operation, answered on the app page, reports her once succeeded |
///
/// Any other username or user id is unknown: Auth Cloud 404, nevisFIDO `userNotFound`. The scripted
/// devices (alice, bob) act on status questions, never on timers (``Operation/questionAsked()``).
public struct NevisTestUser: Sendable, Equatable {
    /// What the user's registered device does with an operation.
    public enum Device: String, Sendable {
        /// No registered authenticator.
        case none
        /// Approves by itself: pending at the first status question, the app has it at the second, succeeded
        /// from the third on.
        case approves
        /// Denies by itself, on the same script: failed from the third question on.
        case denies
        /// Waits for the person on the app page: Approve or Deny.
        case person
    }

    public let username: String
    public let userId: String
    public let device: Device

    /// The test users, in one table.
    public static let all: [NevisTestUser] = [
        .init(username: "alice", userId: "a11ce000-0000-4000-8000-000000000001", device: .approves),
        .init(username: "bob", userId: "b0b00000-0000-4000-8000-000000000002", device: .denies),
        .init(username: "carol", userId: "ca401000-0000-4000-8000-000000000003", device: .none),
        .init(username: "dave", userId: "da7e0000-0000-4000-8000-000000000004", device: .person),
        .init(username: "erin", userId: "e4140000-0000-4000-8000-000000000005", device: .person),
    ]

    /// The account a usernameless operation reports once it succeeded.
    public static let usernameless = all.first { $0.username == "erin" }!

    public static func find(username: String) -> NevisTestUser? {
        all.first { $0.username == username }
    }

    public static func find(userId: String) -> NevisTestUser? {
        all.first { $0.userId == userId.lowercased() }
    }

    /// Whether the app page answers for this device (a person decides; scripted devices decide alone).
    var answeredOnPage: Bool { device == .person }
}
