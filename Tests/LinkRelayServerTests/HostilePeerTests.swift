import Foundation
import LinkRelayCore
import LinkRelayTestSupport
import Testing

@testable import LinkRelayServer

/// A plain TCP connection from a chosen loopback address, for bytes no HTTP client would send.
final class RawConnection: @unchecked Sendable {
    private let fd: Int32

    /// Connects to the relay on `port` from `source` (any 127.0.0.0/8 address is this host's).
    init(port: Int, from source: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = UInt16(port).bigEndian
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0 && connected == 0)
    }

    /// Closed already (by `reset`).
    private var closed = false

    deinit { if !closed { close(fd) } }

    /// Closes with a reset (RST) instead of a FIN: what a client does that gives up on an answer, or a
    /// middlebox that drops a connection.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
        closed = true
    }

    func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBufferPointer { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// What the relay sends until it contains `marker`; nil if the connection closes first.
    func read(until marker: String) async throws -> String? {
        try await onOwnThread { [fd] in
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var received = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: received, as: UTF8.self).contains(marker) {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { return nil }
                received += buffer[0..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }
    }

    /// Everything the relay sends until it closes the connection; nil if it is still open after
    /// `seconds` (a bound for a broken relay, not a timing the test relies on).
    func readToClose(within seconds: Int = 30) async throws -> String? {
        try await onOwnThread { [fd] in
            var timeout = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var received = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 || (count < 0 && errno == ECONNRESET) { return String(decoding: received, as: UTF8.self) }
                if count < 0 { return nil }
                received += buffer[0..<count]
            }
        }
    }
}

/// What an outside probe did to the front door, where a socket is the point: many connections from one
/// address, requests HTTP/1.1 does not allow, a body refused before it is read. Each gets one clear
/// answer or a close, is counted, and leaves everyone else served.
@Suite("Hostile peers", .timeLimit(.minutes(2)))
struct HostilePeerTests {
    static func port(_ relay: TestRelay) throws -> Int { try #require(URLComponents(string: relay.base)?.port) }

    // The header and body timeouts are tested in test time, on an EmbeddedChannel (FrontDoorTests).

    @Test("A body refused from its head is not read, and the answer reaches a client that goes on sending it")
    func refusedBeforeBody() async throws {
        try await TestRelay.run(socket: true) { relay in
            let connection = try RawConnection(port: try Self.port(relay))
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3300000000\r\n\r\n")
            // Sent after the head, while the answer is on its way: the relay drops it unread, and closing
            // with it unread would reset the connection before the client read the answer.
            connection.send(String(repeating: "x", count: 30_000))
            let answer = try #require(try await connection.readToClose())
            #expect(answer.hasPrefix("HTTP/1.1 413 "), "\(answer)")
            #expect(answer.contains("Connection: close"))
            #expect(try await relay.request(.GET, "/healthz").status == 200)
        }
    }

    @Test("An address at its connection cap gets no more, while other addresses are served")
    func connectionsPerAddress() async throws {
        try await TestRelay.run(
            socket: true, flags: ["max-connections": ["50"], "limit-connections-per-address": ["3"]]
        ) { relay in
            let port = try Self.port(relay)
            var held = try (0..<3).map { _ in try RawConnection(port: port, from: "127.0.0.2") }
            let refused = try RawConnection(port: port, from: "127.0.0.2")
            #expect(try await refused.readToClose() == "", "the fourth is closed at once")
            let other = try RawConnection(port: port, from: "127.0.0.3")
            other.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(try await other.readToClose()?.hasPrefix("HTTP/1.1 200") == true)
            let metrics = try await relay.request(.GET, "/metrics").body
            #expect(metrics.contains("linkrelay_limit_trips_total{limit=\"connections_per_address\"} 1"))
            // One of the three goes: its place is the address's again (once the relay has seen it go).
            held.removeFirst()
            var served = false
            for _ in 0..<100 where !served {
                let again = try RawConnection(port: port, from: "127.0.0.2")
                again.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                served = try await again.readToClose()?.hasPrefix("HTTP/1.1 200") == true
            }
            #expect(served)
            withExtendedLifetime(held) {}
        }
    }

    @Test(
        "A request HTTP/1.1 does not allow gets one answer, then the connection closes",
        arguments: [
            // With its key, so that the guard (which goes first, on the head) admits it and the chunk is read.
            (
                "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestRelay.apiKey)\r\n"
                    + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400
            ),
            ("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 405),
            ("GET /healthz HTTP/1.1\r\n\r\n", 400),
            ("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ])
    func nonConforming(_ request: String, _ status: Int) async throws {
        try await TestRelay.run(socket: true) { relay in
            let connection = try RawConnection(port: try Self.port(relay))
            // A well-formed request follows on the same connection: it must not be answered.
            connection.send(request + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = try #require(try await connection.readToClose())
            #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer)")
            let statusLines = answer.split(separator: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
            #expect(statusLines.count == 1, "exactly one answer: \(answer)")
            #expect(answer.contains("Connection: close"))
            #expect(answer.contains("Server: LinkRelay") && answer.contains("X-Content-Type-Options: nosniff"))
        }
    }

    @Test("A client that resets its connection between requests is let go, and the relay serves on")
    func resetBetweenRequests() async throws {
        try await TestRelay.run(socket: true) { relay in
            let connection = try RawConnection(port: try Self.port(relay))
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try await connection.read(until: "ok\n")?.hasPrefix("HTTP/1.1 200") == true)
            connection.reset()
            // The relay still answers, on a new connection; a second reset after another answer too.
            let again = try RawConnection(port: try Self.port(relay))
            again.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try await again.read(until: "ok\n")?.hasPrefix("HTTP/1.1 200") == true)
            again.reset()
            #expect(try await relay.request(.GET, "/healthz").status == 200)
        }
    }

    @Test("HTTP/1.0 may leave out Host")
    func http10WithoutHost() async throws {
        try await TestRelay.run(socket: true) { relay in
            let connection = try RawConnection(port: try Self.port(relay))
            connection.send("GET /healthz HTTP/1.0\r\n\r\n")
            #expect(try await connection.readToClose()?.hasPrefix("HTTP/1.1 200") == true)
        }
    }
}

@Suite("Security events")
struct SecurityEventsTests {
    @Test("Each kind is counted every time and logged at most once per interval, with how many more came")
    func rateLimitedLog() {
        let clock = ManualClock()
        let logs = LogCapture()
        let events = SecurityEvents(metrics: RelayMetrics(), logger: logs.logger(), clock: clock)
        for _ in 0..<5 { events.record(.headerTimeout) }
        events.record(.confirmOrigin)
        #expect(logs.all.count == 2, "one line per kind")
        clock.advance(by: SecurityEvents.logInterval)
        events.record(.headerTimeout)
        #expect(logs.all.count == 3)
        #expect(logs.all.last?.contains(#""more_since_last_line": 4"#) == true, "\(logs.all)")
        #expect(!logs.all.joined().contains("127.0.0.1"))
    }
}
