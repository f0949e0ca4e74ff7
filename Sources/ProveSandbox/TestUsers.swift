import ProveAPI

/// Prove's sandbox test users (prove-api.md §8).
struct UnifyTestUser: Sendable {
    enum Kind: Sendable {
        /// Short-term user: possession always passes without the client SDK or a tap.
        case shortTerm
        /// Passes possession through the client SDK; here: the desktop Instant Link.
        case possession
    }

    var phoneNumber: String
    var name: String
    var kind: Kind

    /// A stable UUID per test user.
    var proveId: String { "a0000000-0000-4000-8000-\(Self.digits12(phoneNumber))" }
    var clientHumanId: String { "b0000000-0000-4000-8000-\(Self.digits12(phoneNumber))" }

    static func digits12(_ phone: String) -> String {
        let digits = phone.filter(\.isNumber)
        return String(repeating: "0", count: max(0, 12 - digits.count)) + digits.suffix(12)
    }

    static let all: [UnifyTestUser] = [
        .init(phoneNumber: "2001004018", name: "Barbaraanne Canet", kind: .shortTerm),
        .init(phoneNumber: "+2001004029", name: "Janos Martina", kind: .shortTerm),
        .init(phoneNumber: "2001004014", name: "Lorant Nerger", kind: .possession),
        .init(phoneNumber: "2001004015", name: "Laney Dyball", kind: .possession),
        .init(phoneNumber: "+2001004025", name: "Bertie Fremont", kind: .possession),
        .init(phoneNumber: "+2001004026", name: "Bonnie Sidon", kind: .possession),
        .init(phoneNumber: "2001004016", name: "Inge Galier", kind: .possession),
        .init(phoneNumber: "2001004017", name: "Jesse Mashro", kind: .possession),
        .init(phoneNumber: "2001004041", name: "Penny Jowers", kind: .possession),
        .init(phoneNumber: "+2001004027", name: "Allissa Zoren", kind: .possession),
        .init(phoneNumber: "+2001004028", name: "Wendy Strover", kind: .possession),
        .init(phoneNumber: "+2001004043", name: "Amii Porritt", kind: .possession),
    ]

    static func find(phoneNumber: String) -> UnifyTestUser? {
        let key = normalizePhone(phoneNumber)
        return all.first { $0.phoneNumber == key }
    }

    static func find(proveId: String) -> UnifyTestUser? {
        all.first { $0.proveId == proveId.lowercased() }
    }
}

/// Pre-Fill test users, with the data of prove-api.md §8 as `/v3/challenge` returns it.
struct PrefillTestUser: Sendable {
    var phoneNumber: String
    /// Short-term users pass every step without the client SDK.
    var shortTerm: Bool
    var individual: ProveIndividual

    static let all: [PrefillTestUser] = [
        .init(
            phoneNumber: "2001001695",
            shortTerm: true,
            individual: .init(
                firstName: "Milo",
                lastName: "Pinson",
                dob: "1981-01-17",
                ssn: "847350596",
                emailAddresses: ["mpinsonm@dyndns.org"],
                addresses: [
                    .init(address: "6377 Birchwood Hill", city: "Littleton", region: "CO", postalCode: "80161-2001")
                ]
            )
        ),
        .init(
            phoneNumber: "2001001693",
            shortTerm: false,
            individual: .init(
                firstName: "Marcia",
                lastName: "Longo",
                dob: "1982-07-19",
                ssn: "470806227",
                addresses: [.init(address: "00 Mallard Park", city: "New Orleans", region: "LA", postalCode: "70165")]
            )
        ),
        .init(
            phoneNumber: "2001001688",
            shortTerm: false,
            individual: .init(
                firstName: "Nevin",
                lastName: "Chattey",
                dob: "1980-03-20",
                ssn: "542742985",
                addresses: [.init(address: "9398 Scott Plaza", city: "Austin", region: "TX", postalCode: "78744")]
            )
        ),
        .init(
            phoneNumber: "2001001687",
            shortTerm: false,
            individual: .init(
                firstName: "Agretha",
                lastName: "Chene",
                dob: "1994-12-29",
                ssn: "369956933",
                addresses: [.init(address: "4861 Jay Junction", city: "Boston", region: "MS", postalCode: "02208")]
            )
        ),
    ]

    static func find(phoneNumber: String) -> PrefillTestUser? {
        let key = normalizePhone(phoneNumber)
        return all.first { $0.phoneNumber == key }
    }
}

/// US/Canada numbers may be sent with or without a leading `+1` (prove-api.md §2).
func normalizePhone(_ phone: String) -> String {
    if phone.hasPrefix("+1"), phone.count == 12, phone.dropFirst(2).allSatisfy(\.isNumber) {
        return String(phone.dropFirst(2))
    }
    return phone
}
