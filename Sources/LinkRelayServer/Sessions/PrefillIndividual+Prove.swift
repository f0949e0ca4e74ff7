import LinkRelayCore
import ProveAPI

// The individual between the session (LinkRelayCore) and Prove's wire form (ProveAPI), field by field.

extension PrefillIndividual {
    init(_ person: ProveIndividual) {
        self.init(
            firstName: person.firstName, lastName: person.lastName,
            // Prove may answer "1981-01-17T00:00:00Z"; `/v3/complete` and the form take the date.
            dob: person.dob.map { String($0.prefix(10)) }, ssn: person.ssn, emailAddresses: person.emailAddresses,
            addresses: person.addresses?.map {
                Address(
                    address: $0.address, extendedAddress: $0.extendedAddress, city: $0.city, region: $0.region,
                    postalCode: $0.postalCode)
            })
    }
}

extension ProveIndividual {
    init(_ person: PrefillIndividual) {
        self.init(
            firstName: person.firstName, lastName: person.lastName, dob: person.dob, ssn: person.ssn,
            emailAddresses: person.emailAddresses,
            addresses: person.addresses?.map {
                ProveAddress(
                    address: $0.address, extendedAddress: $0.extendedAddress, city: $0.city, region: $0.region,
                    postalCode: $0.postalCode)
            })
    }
}
