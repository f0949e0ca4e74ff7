import Foundation
import FuzzSupport
import LinkRelayCore

/// The server's limit on holdSeconds (`RelayConfiguration.maximumHold`).
private let maximumHold = 600

private let knownFields: Set<String> = [
    "phoneNumber", "clientRequestId", "clientCustomerId", "clientHumanId", "emailAddress", "ipAddress", "proveId",
    "deviceId", "smsMessage", "checkReputation", "allowOTPRetry", "rebind", "holdSeconds", "possessionType", "flow",
    "dob", "ssn",
]

/// libFuzzer entry point for `CreateSessionRequest.validate`: the input bytes are the `POST /v1/sessions` body.
///
/// Checks that nothing over 4 KiB is read, that an accepted request obeys every field rule and survives being
/// encoded and parsed again (also from its fingerprint), that a refusal always says why (a body that is no strict
/// JSON, where), and that a body with a key given twice is never accepted.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSessionRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let body = Data(UnsafeBufferPointer(start: data, count: size))
    let result = CreateSessionRequest.validate(body, maximumHold: maximumHold)
    check(CreateSessionRequest.validate(body, maximumHold: maximumHold) == result, "not deterministic")
    if body.count > CreateSessionRequest.maximumBodySize {
        check(result == .failure(.tooLarge), "a \(body.count)-byte body was not refused as too large")
    }

    switch result {
    case .failure(.tooLarge):
        check(body.count > CreateSessionRequest.maximumBodySize, "a \(body.count)-byte body is too large")
    case .failure(.malformedJSON(let detail)):
        check(detail.contains(" at line ") && detail.contains(", column "), "malformed_json without a place: \(detail)")
    case .failure(.malformed(let detail)):
        check(!detail.isEmpty, "400 without a detail")
    case .failure(.invalid(let errors)):
        check(!errors.isEmpty, "422 without field errors")
        for error in errors {
            check(knownFields.contains(error.field), "422 names unknown field \(error.field)")
            check(!error.message.isEmpty, "422 for \(error.field) without a message")
        }
    case .success(let request):
        checkRules(request)
        if request.phoneNumber != nil { checkDuplicatesRefused(body) }
        // Re-encoding and parsing again gives the same request, with default and canonical encodings.
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(request)
        } catch {
            fail("an accepted request does not encode: \(error)")
        }
        let again = CreateSessionRequest.validate(encoded, maximumHold: maximumHold)
        check(again == .success(request), "\(request) re-encoded as \(text(encoded)) parses as \(again)")
        let fingerprint = request.fingerprint
        check(!fingerprint.isEmpty, "an accepted request has no fingerprint")
        let fromFingerprint = CreateSessionRequest.validate(Data(fingerprint.utf8), maximumHold: maximumHold)
        check(fromFingerprint == .success(request), "fingerprint \(fingerprint) parses as \(fromFingerprint)")
        if case .success(let reparsed) = again {
            check(reparsed.fingerprint == fingerprint, "the fingerprint changed over a round trip")
        }
    }
    return 0
}

/// Every rule of the API, restated on bytes: an accepted request must satisfy them all.
private func checkRules(_ request: CreateSessionRequest) {
    func ascii(_ text: String, _ allowed: (UInt8) -> Bool) -> Bool {
        text.utf8.allSatisfy { $0 < 0x80 && allowed($0) }
    }
    func alphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
    func length(_ text: String?, _ maximum: Int, _ field: String) {
        guard let text else { return }
        check(!text.isEmpty && text.count <= maximum, "accepted \(field) of \(text.count) characters")
    }

    if let phone = request.phoneNumber {
        length(phone, 20, "phoneNumber")
        check(ascii(phone) { alphanumeric($0) || $0 == UInt8(ascii: "+") }, "accepted phoneNumber \(phone)")
    } else {
        // Only where Prove finds the number itself: Unify with a proveId, Mobile Auth, or possession by the customer.
        check(
            request.flow != .prefill
                && (request.proveId != nil || request.possessionType == .mobile
                    || request.possessionType == PossessionType.none),
            "accepted a request without phoneNumber")
    }
    if let id = request.clientRequestId {
        length(id, 128, "clientRequestId")
        check(ascii(id) { (0x21...0x7E).contains($0) }, "accepted clientRequestId \(id)")
    }
    length(request.clientCustomerId, 128, "clientCustomerId")
    length(request.clientHumanId, 128, "clientHumanId")
    if let email = request.emailAddress {
        length(email, 254, "emailAddress")
        check(ascii(email) { alphanumeric($0) || "@.+".utf8.contains($0) }, "accepted emailAddress \(email)")
    }
    if let ip = request.ipAddress {
        length(ip, 45, "ipAddress")
        check(ascii(ip) { alphanumeric($0) || ".:".utf8.contains($0) }, "accepted ipAddress \(ip)")
    }
    length(request.proveId, 128, "proveId")
    length(request.deviceId, 128, "deviceId")
    if let message = request.smsMessage {
        length(message, 160, "smsMessage")
        check(message.contains("####"), "accepted smsMessage without ####")
    }
    if let hold = request.holdSeconds {
        check((1...maximumHold).contains(hold), "accepted holdSeconds \(hold)")
    }
    // Pre-Fill: `dob` in Prove's three forms, `ssn` 9 or 4 digits, both only there; none of Unify's own fields.
    func digits(_ text: String) -> Bool { ascii(text) { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } }
    if let dob = request.dob {
        let parts = dob.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false).map(\.count)
        check(digits(dob.replacingOccurrences(of: "-", with: "")), "accepted dob \(dob)")
        check([[4, 2, 2], [4, 2], [2, 2]].contains(parts), "accepted dob \(dob)")
    }
    if let ssn = request.ssn { check(digits(ssn) && [4, 9].contains(ssn.utf8.count), "accepted ssn \(ssn)") }
    if request.flow == .prefill {
        check(
            request.clientHumanId == nil && request.proveId == nil && request.deviceId == nil
                && request.checkReputation == nil && request.rebind == nil
                && (request.possessionType ?? .desktop) == .desktop,
            "accepted a Unify field on a Pre-Fill request")
    } else {
        check(request.dob == nil && request.ssn == nil, "accepted dob or ssn on a Unify request")
    }
}

/// An accepted body with `phoneNumber` given once more, first or last in the
/// object, written plainly or with one of its characters as a `\u` escape (which one, and the case of its hex
/// digits, chosen by the body's bytes), must be refused as malformed, naming the key: the decoder alone would keep one of
/// the two values without a word.
private func checkDuplicatesRefused(_ body: Data) {
    // Only UTF-8 bodies: bytes spliced into a UTF-16 or UTF-32 one would make it no JSON at all.
    guard String(data: body, encoding: .utf8) != nil, !body.prefix(4).contains(0),
        let open = body.firstIndex(of: UInt8(ascii: "{")), let close = body.lastIndex(of: UInt8(ascii: "}"))
    else { return }
    let key = Array("phoneNumber".unicodeScalars)
    let seed = body.reduce(UInt(0)) { $0 &* 31 &+ UInt($1) }
    let position = Int(seed % UInt(key.count))
    let hex = String(format: seed / UInt(key.count) % 2 == 0 ? "%04x" : "%04X", key[position].value)
    let escapedKey = key.enumerated().map { $0.offset == position ? "\\u" + hex : String($0.element) }.joined()
    for spelling in ["phoneNumber", escapedKey] {
        var first = body
        first.insert(contentsOf: Array("\"\(spelling)\":null,".utf8), at: first.index(after: open))
        // An accepted body is strict JSON: no trailing comma stands before its `}`.
        var last = body
        last.insert(contentsOf: Array(",\"\(spelling)\":\"2001004014\"".utf8), at: close)
        for twice in [first, last] where twice.count <= CreateSessionRequest.maximumBodySize {
            let result = CreateSessionRequest.validate(twice, maximumHold: maximumHold)
            guard case .failure(.malformed(let detail)) = result, detail.contains("\"phoneNumber\"") else {
                fail("a body with phoneNumber twice, \(escaped(text(twice))), gave \(result)")
            }
        }
    }
}

private func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }
