/// Helpers to keep personal data and secrets out of logs.
public enum ProveRedaction {
    /// What a log shows in place of identity data (names, dates of birth, SSNs, addresses, emails).
    public static let placeholder = "<redacted>"

    /// Masks a phone number to its last 4 characters, e.g. "2001004014" -> "******4014".
    public static func maskPhone(_ phoneNumber: String) -> String {
        guard phoneNumber.count > 4 else { return String(repeating: "*", count: phoneNumber.count) }
        return String(repeating: "*", count: phoneNumber.count - 4) + phoneNumber.suffix(4)
    }

    /// `"<redacted>"` for a value, `"nil"` for none: a log says whether a field was given, never what it holds.
    public static func redact(_ value: String?) -> String {
        value == nil ? "nil" : placeholder
    }

    /// Which of an individual's name, dob and ssn are present, e.g. "firstName, lastName: <redacted>".
    static func presence(_ firstName: String?, _ lastName: String?, _ dob: String?, _ ssn: String?) -> String {
        let given = [("firstName", firstName), ("lastName", lastName), ("dob", dob), ("ssn", ssn)]
            .filter { $0.1 != nil }.map(\.0)
        return given.isEmpty ? "empty" : given.joined(separator: ", ") + ": " + placeholder
    }
}
