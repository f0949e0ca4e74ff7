import LinkRelayCore
import Testing

/// The check an app makes on the redirect URL it receives, and the relay makes on every landing.
struct LandingRedirectTests {
    static let key = "Xk3aB9cD0eF1gH2iJ3kL4mN5oP6qR7sT"
    static let uuid = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"

    @Test(arguments: [
        "https://relay.example/l/\(key)?asc=true&authId=\(uuid)",
        "http://127.0.0.1:8080/l/\(key)?authId=\(uuid.uppercased())&asc=false",
        "/l/\(key)?asc=true&authId=\(uuid)&utm_source=sms",
        "https://relay.example/l/\(key)?asc=true&authId=\(uuid)#fragment",
    ])
    func acceptsRealRedirects(url: String) throws {
        let redirect = try LandingRedirect.parse(url).get()
        #expect(redirect.linkKey == Self.key)
        #expect(redirect.parameters.authId == Self.uuid)
    }

    @Test(arguments: [
        (
            "https://relay.example/l/\(key)?asc=maybe&authId=\(uuid)",
            LandingRedirect.Rejection.badParameters(.invalidAsc)
        ),
        ("https://relay.example/l/\(key)", .badParameters(.missingAsc)),
        ("https://relay.example/l/\(key)?asc=true&asc=true&authId=\(uuid)", .badParameters(.duplicateAsc)),
        ("https://relay.example/l/short?asc=true&authId=\(uuid)", .notALink),
        ("https://relay.example/l/\(key)/x?asc=true&authId=\(uuid)", .notALink),
        ("https://relay.example/l/\(key.dropLast())%2B?asc=true&authId=\(uuid)", .notALink),
        ("https://relay.example/x/\(key)?asc=true&authId=\(uuid)", .notALink),
        ("https://relay.example/x/\(key)?asc=1&authId=\(uuid)", .badParameters(.invalidAsc)),
        ("https://relay.example?asc=true&authId=\(uuid)", .notALink),
        ("", .badParameters(.missingAsc)),
    ])
    func refusesWhatTheRelayRefuses(url: String, rejection: LandingRedirect.Rejection) {
        #expect(throws: rejection) { try LandingRedirect.parse(url).get() }
    }
}
