/// Who the client is, for per-IP limits and logs, honouring `X-Forwarded-For` only as far as it
/// was written by trusted proxies.
public enum ClientAddress {
    /// The client's address, given the TCP peer, every `X-Forwarded-For` header value, and the
    /// networks of the proxies we trust.
    ///
    /// The rule:
    /// 1. No peer: nil (without a verified hop the header proves nothing).
    /// 2. The peer is not in `trustedProxies` (or there are none): the peer. The header is ignored,
    ///    since anyone can send it.
    /// 3. Otherwise the header values are joined in order and split on commas; entries are trimmed
    ///    of spaces and tabs, and empty entries are skipped. Walking from the right (the entry the
    ///    nearest proxy appended), trusted-proxy addresses are skipped; the first address that is
    ///    not a trusted proxy is the client.
    /// 4. A malformed entry (not exactly one IP address: a host name, a port, "unknown", garbage)
    ///    stops the walk: the client is the last trusted hop, the rightmost trusted address that
    ///    handed the request over (the peer if the garbage is rightmost). Nothing left of garbage
    ///    is believed.
    /// 5. If every entry is a trusted proxy (or the header is empty), the leftmost trusted hop
    ///    (the leftmost entry, or the peer when there are none).
    public static func resolve(peer: IPAddress?, forwardedFor: [String], trustedProxies: [IPNetwork]) -> IPAddress? {
        guard let peer else { return nil }
        func isTrusted(_ address: IPAddress) -> Bool { trustedProxies.contains { $0.contains(address) } }
        guard isTrusted(peer) else { return peer }
        let entries = forwardedFor.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false)
        var lastTrusted = peer
        for entry in entries.reversed() {
            let trimmed = entry.trimmingSpacesAndTabs()
            if trimmed.isEmpty { continue }
            guard let address = IPAddress(trimmed) else { return lastTrusted }
            guard isTrusted(address) else { return address }
            lastTrusted = address
        }
        return lastTrusted
    }
}

extension Substring {
    fileprivate func trimmingSpacesAndTabs() -> Substring {
        let isBlank = { (character: Character) in character == " " || character == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
