/// Who proves possession of the phone (API.md v1.1): the relay's Instant Link on a `desktop` flow,
/// Prove's client SDK on the phone for `mobile` (with the relay's link as the app's deep link), or the
/// integrator itself for `none`, which then binds (`POST /v1/sessions/{id}/bind`).
public enum PossessionType: String, Codable, Sendable, CaseIterable {
    case desktop
    case mobile
    case none
}
