/// Helpers to keep personal data and secrets out of logs.
public enum ProveRedaction {
    /// Masks a phone number to its last 4 characters, e.g. "2001004014" -> "******4014".
    public static func maskPhone(_ phoneNumber: String) -> String {
        guard phoneNumber.count > 4 else { return String(repeating: "*", count: phoneNumber.count) }
        return String(repeating: "*", count: phoneNumber.count - 4) + phoneNumber.suffix(4)
    }
}
