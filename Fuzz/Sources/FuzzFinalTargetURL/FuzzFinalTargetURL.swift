import Foundation
import FuzzSupport
import LinkRelayCore

/// libFuzzer entry point for `FinalTargetURL.validate`: the input bytes are the URL.
///
/// Each verdict is checked against Prove's rules read on bytes, and every accepted URL must be one a phone can
/// open: Foundation parses it as http(s) with a host and a usable port.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFinalTargetURL(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let url = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let bytes = Array(url.utf8)
    let verdict = FinalTargetURL.validate(url)
    check(FinalTargetURL.validate(url) == verdict, "validate(\(escaped(url))) is not deterministic")
    if let verdict { check(!verdict.description.isEmpty, "\(verdict) has no description") }

    switch verdict {
    case .empty:
        check(bytes.isEmpty, "\(escaped(url)) called empty")
    case .forbiddenCharacter(let character):
        // The first character that is not one allowed byte, and it really holds a forbidden byte.
        let index = url.firstIndex(of: character)
        check(index != nil, "\(escaped(url)): reported \(escaped(String(character))) is not in it")
        let before = url.utf8[..<index!.samePosition(in: url.utf8)!]
        check(before.allSatisfy(FinalTargetURL.isAllowed), "\(escaped(url)): a forbidden byte came earlier")
        check(character.utf8.contains { !FinalTargetURL.isAllowed($0) }, "\(escaped(url)): nothing forbidden")
    case .tooLong(let length):
        check(length == bytes.count && length > FinalTargetURL.maximumLength, "\(escaped(url)): bad length")
        check(bytes.allSatisfy(FinalTargetURL.isAllowed), "\(escaped(url)): too long before forbidden")
    case .notAbsoluteHTTP:
        check(
            bytes.allSatisfy(FinalTargetURL.isAllowed) && bytes.count <= FinalTargetURL.maximumLength,
            "\(escaped(url)): \(verdict!) before an earlier rule")
        check(scheme(of: bytes) == nil, "\(escaped(url)) starts with http(s):// but was refused for it")
    case .missingHost:
        check(
            bytes.allSatisfy(FinalTargetURL.isAllowed) && bytes.count <= FinalTargetURL.maximumLength,
            "\(escaped(url)): \(verdict!) before an earlier rule")
        check(scheme(of: bytes).map { host(of: bytes, after: $0).isEmpty } == true, "\(escaped(url)) has a host")
    case .invalidPort:
        check(
            bytes.allSatisfy(FinalTargetURL.isAllowed) && bytes.count <= FinalTargetURL.maximumLength,
            "\(escaped(url)): \(verdict!) before an earlier rule")
        guard let scheme = scheme(of: bytes) else { fail("\(escaped(url)): a port checked before the scheme") }
        check(!host(of: bytes, after: scheme).isEmpty, "\(escaped(url)): a port checked before the host")
        check(port(of: bytes, after: scheme).map(isValidPort) == false, "\(escaped(url)) has a valid port")
    case nil:
        // Prove's rules: 1 to 128 characters, each one of A-Z a-z 0-9 - . _ + = / : ?
        check(!bytes.isEmpty && bytes.count <= FinalTargetURL.maximumLength, "accepted \(escaped(url)): length")
        check(bytes.allSatisfy(FinalTargetURL.isAllowed), "accepted \(escaped(url)): forbidden byte")
        check(url.count == bytes.count, "accepted \(escaped(url)): not one byte per character")
        // The relay's: absolute http(s) with a host...
        guard let scheme = scheme(of: bytes) else { fail("accepted \(escaped(url)): not http(s)://") }
        check(!host(of: bytes, after: scheme).isEmpty, "accepted \(escaped(url)): no host")
        check(port(of: bytes, after: scheme).map(isValidPort) != false, "accepted \(escaped(url)): invalid port")
        // ...that a phone can open.
        guard let components = URLComponents(string: url) else {
            fail("accepted \(escaped(url)), which Foundation cannot parse as a URL")
        }
        check(components.scheme == "http" || components.scheme == "https", "accepted \(escaped(url)): scheme")
        check(components.host?.isEmpty == false, "accepted \(escaped(url)): Foundation finds no host")
        if let port = components.port {
            check((1...65535).contains(port), "accepted \(escaped(url)) with port \(port)")
        }
    }
    return 0
}

/// The length of an `http://` or `https://` prefix, compared byte for byte.
private func scheme(of bytes: [UInt8]) -> Int? {
    if bytes.starts(with: "https://".utf8) { return 8 }
    if bytes.starts(with: "http://".utf8) { return 7 }
    return nil
}

/// The host: after the scheme, up to the first `/`, `?` or `:`.
private func host(of bytes: [UInt8], after scheme: Int) -> ArraySlice<UInt8> {
    bytes[scheme...].prefix { !"/?:".utf8.contains($0) }
}

/// The port: after the host's `:`, up to the first `/` or `?`; nil without a `:`.
private func port(of bytes: [UInt8], after scheme: Int) -> ArraySlice<UInt8>? {
    let host = host(of: bytes, after: scheme)
    guard host.endIndex < bytes.endIndex, bytes[host.endIndex] == UInt8(ascii: ":") else { return nil }
    return bytes[(host.endIndex + 1)...].prefix { !"/?".utf8.contains($0) }
}

/// 1 to 5 decimal digits for a number from 1 to 65535.
private func isValidPort(_ port: ArraySlice<UInt8>) -> Bool {
    guard (1...5).contains(port.count), port.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
    else { return false }
    let value = port.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    return (1...65535).contains(value)
}
