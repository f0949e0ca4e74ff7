import FuzzSupport
import LinkRelayCore

/// libFuzzer entry point for `LandingParameters.parse(query:)`: the input bytes are the raw query string.
///
/// Beyond "does not crash", every result is checked against a byte-level reading of the query, which is how
/// Prove, proxies and logs see it: split on `&` bytes, name and value split at the first `=` byte.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLanding(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let query = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let result = LandingParameters.parse(query: query)
    let pairs = bytePairs(Array(query.utf8))
    let ascValues = pairs.filter { $0.name == Array("asc".utf8) }.map(\.value)
    let authIdValues = pairs.filter { $0.name == Array("authId".utf8) }.map(\.value)

    // The result is exactly what the byte-level specification says, rejection reason included.
    let expected = specification(ascValues: ascValues, authIdValues: authIdValues)
    check(result == expected, "parse(\(escaped(query))) = \(result), the bytes say \(expected)")

    if case .success(let parameters) = result {
        // Accepted: exactly one asc and one authId, asc written exactly true or false.
        check(ascValues.count == 1 && authIdValues.count == 1, "accepted without exactly one asc and authId")
        check(ascValues[0] == Array((parameters.asc ? "true" : "false").utf8), "asc value mismatch")
        // The authId is 36 characters of lower-case hex and dashes at 8-4-4-4-12, equal to the sent one.
        let authId = Array(parameters.authId.utf8)
        check(authId.count == 36, "authId \(parameters.authId) is not 36 bytes")
        for (index, byte) in authId.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                check(byte == UInt8(ascii: "-"), "authId \(parameters.authId) has no dash at \(index)")
            } else {
                check(isLowerHex(byte), "authId \(parameters.authId) has \(byte) at \(index)")
            }
        }
        check(authId == authIdValues[0].map(lowercased), "authId is not the sent one lower-cased")
        // Round trip: the canonical query of an accepted landing parses to the same landing.
        let canonical = "asc=\(parameters.asc)&authId=\(parameters.authId)"
        check(LandingParameters.parse(query: canonical) == result, "\(canonical) does not round-trip")
        check(
            LandingParameters.parse(query: "authId=\(parameters.authId)&asc=\(parameters.asc)") == result,
            "the reversed canonical query does not round-trip")
        // A second asc or authId, wherever it goes, makes an accepted query a rejection.
        check(
            LandingParameters.parse(query: query + "&asc=" + (parameters.asc ? "false" : "true"))
                == .failure(.duplicateAsc),
            "\(escaped(query)) is still accepted with a second asc")
        check(
            LandingParameters.parse(query: "authId=00000000-0000-0000-0000-000000000000&" + query)
                == .failure(.duplicateAuthId), "\(escaped(query)) is still accepted with a second authId")
    }

    // Unrelated parameters around the query never change the answer.
    check(
        LandingParameters.parse(query: "next=x&" + query + "&url=//evil") == result,
        "\(escaped(query)) changes its answer with unrelated parameters around it")
    return 0
}

private struct Pair {
    var name: [UInt8]
    var value: [UInt8]
}

/// The query read as bytes: pairs between `&`, empty ones skipped, split at the first `=`.
private func bytePairs(_ bytes: [UInt8]) -> [Pair] {
    bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { pair in
        guard let equals = pair.firstIndex(of: UInt8(ascii: "=")) else { return Pair(name: Array(pair), value: []) }
        return Pair(name: Array(pair[..<equals]), value: Array(pair[(equals + 1)...]))
    }
}

/// The documented rules, checked in the documented order, on byte values.
private func specification(ascValues: [[UInt8]], authIdValues: [[UInt8]]) -> Result<
    LandingParameters, LandingParameters.Rejection
> {
    guard ascValues.count <= 1 else { return .failure(.duplicateAsc) }
    guard let ascValue = ascValues.first else { return .failure(.missingAsc) }
    let asc: Bool
    switch ascValue {
    case Array("true".utf8): asc = true
    case Array("false".utf8): asc = false
    default: return .failure(.invalidAsc)
    }
    guard authIdValues.count <= 1 else { return .failure(.duplicateAuthId) }
    guard let authIdValue = authIdValues.first else { return .failure(.missingAuthId) }
    let shape =
        authIdValue.count == 36
        && authIdValue.enumerated().allSatisfy { index, byte in
            [8, 13, 18, 23].contains(index) ? byte == UInt8(ascii: "-") : isLowerHex(lowercased(byte))
        }
    guard shape else { return .failure(.invalidAuthId) }
    return .success(LandingParameters(asc: asc, authId: String(decoding: authIdValue.map(lowercased), as: UTF8.self)))
}

private func isLowerHex(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
}

private func lowercased(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
}
