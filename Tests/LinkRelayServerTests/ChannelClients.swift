import AsyncHTTPClient
import Dispatch
import Foundation
import LinkRelayCore
import LinkRelaySupport
import Logging
import NIOCore
import NIOWebSocket
import Testing
import WSClient

#if canImport(Glibc)
    import Glibc
#endif

/// Channel clients as a desktop browser would use them, each delivering events into a stream
/// that a test awaits (so a test knows the channel is open once the first event arrived).
enum ChannelClient {
    /// Opens a WebSocket and yields every event until a terminal one; then the stream ends and the
    /// client is released. (The close code is checked with a raw socket: see `rawExchange`.)
    static func webSocket(_ url: String) -> AsyncThrowingStream<WireEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await WebSocketClient.connect(url: url, logger: Logger(label: "test.ws")) { inbound, _, _ in
                        for try await message in inbound.messages(maxSize: 1 << 14) {
                            guard case .text(let text) = message else { continue }
                            let event = try JSONDecoder().decode(WireEvent.self, from: Data(text.utf8))
                            continuation.yield(event)
                            if ["result", "expired", "cancelled"].contains(event.type) {
                                continuation.finish()
                                break
                            }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// `webSocket(_:)` on a plain socket that sends `Origin: origin`, as a browser on that page would:
    /// WSClient sends the URL's own `ws://host` as its Origin, which no `--allowed-origin` may name.
    static func webSocket(_ url: String, origin: String) -> AsyncThrowingStream<WireEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let socket = try await RawWebSocket.open(
                        url, headers: "Origin: \(origin)\r\n", onEvent: { continuation.yield($0) })
                    if !socket.upgraded { throw SSEError.status(0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    struct SSEMessage: Equatable {
        var id: String?
        var event: String?
        var data: String
    }

    /// Opens an SSE stream and yields every message (comments are skipped); ends when the server ends it.
    static func serverSentEvents(_ http: HTTPClient, url: String, headers: [(String, String)] = [])
        -> AsyncThrowingStream<SSEMessage, any Error>
    {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    var request = HTTPClientRequest(url: url)
                    for (name, value) in headers { request.headers.add(name: name, value: value) }
                    let response = try await http.execute(request, timeout: .seconds(60))
                    guard response.status == .ok else {
                        throw SSEError.status(Int(response.status.code))
                    }
                    var pending = ""
                    for try await chunk in response.body {
                        pending += String(buffer: chunk)
                        while let end = pending.range(of: "\n\n") {
                            let block = String(pending[..<end.lowerBound])
                            pending = String(pending[end.upperBound...])
                            var message = SSEMessage(data: "")
                            var isMessage = false
                            for line in block.split(separator: "\n") {
                                if line.hasPrefix("id: ") { message.id = String(line.dropFirst(4)) }
                                if line.hasPrefix("event: ") { message.event = String(line.dropFirst(7)) }
                                if line.hasPrefix("data: ") {
                                    message.data = String(line.dropFirst(6))
                                    isMessage = true
                                }
                            }
                            if isMessage { continuation.yield(message) }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    enum SSEError: Error { case status(Int) }
}

/// A WebSocket read with a plain socket, for channels the server ends at once (a session that
/// already ended): every event, and the close code of the server's close frame.
struct RawWebSocket {
    var upgraded: Bool
    var events: [WireEvent] = []
    var closeCode: Int?
    /// The opcode of every frame the server sent, in order.
    var opcodes: [UInt8] = []

    /// The handshake's response head, as text.
    var head = ""

    /// Opens `url`, sends `frames` (raw bytes, see `clientFrame`) straight after the handshake, and
    /// reads until the server's close frame (or until the server closes the connection). `onFrame`
    /// hears the opcode of each frame as it arrives, `onEvent` each event. The client never answers a ping.
    static func open(
        _ url: String, headers: String = "", frames: [UInt8] = [],
        onFrame: @escaping @Sendable (UInt8) -> Void = { _ in },
        onEvent: @escaping @Sendable (WireEvent) -> Void = { _ in }
    ) async throws -> RawWebSocket {
        let components = try #require(URLComponents(string: url))
        let port = try #require(components.port)
        let target = components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let handshake =
            "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\(headers)\r\n"
        let heard = Locked((frames: 0, events: 0))
        let bytes = try await rawExchangeBytes(port: port, Array(handshake.utf8) + frames) { received in
            guard let socket = try? RawWebSocket(bytes: received) else { return false }
            let (newFrames, newEvents) = heard.withLock { count in
                defer { count = (socket.opcodes.count, socket.events.count) }
                return (socket.opcodes.dropFirst(count.frames), socket.events.dropFirst(count.events))
            }
            for opcode in newFrames { onFrame(opcode) }
            for event in newEvents { onEvent(event) }
            return socket.closeCode != nil
        }
        return try RawWebSocket(bytes: bytes)
    }

    /// A client frame: masked unless told otherwise, as RFC 6455 requires of clients.
    static func clientFrame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        switch payload.count {
        case ..<126: frame.append(maskBit | UInt8(payload.count))
        case ..<65536: frame += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: frame += [maskBit | 127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        guard masked else { return frame + payload }
        let key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return frame + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    init(bytes: [UInt8]) throws {
        upgraded = bytes.starts(with: Array("HTTP/1.1 101".utf8))
        guard upgraded, let end = Self.headerEnd(bytes) else { return }
        head = String(decoding: bytes[..<end], as: UTF8.self)
        var index = end
        while index + 2 <= bytes.count {
            let opcode = bytes[index] & 0x0F
            var length = Int(bytes[index + 1] & 0x7F)
            index += 2
            if length == 126 {
                length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
                index += 2
            }
            guard index + length <= bytes.count else { break }
            let payload = Array(bytes[index..<index + length])
            index += length
            opcodes.append(opcode)
            switch opcode {
            case 0x1: events.append(try JSONDecoder().decode(WireEvent.self, from: Data(payload)))
            case 0x8 where payload.count >= 2: closeCode = Int(payload[0]) << 8 | Int(payload[1])
            default: continue
            }
        }
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        let marker: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4 else { return nil }
        for start in 0...(bytes.count - 4) where Array(bytes[start..<start + 4]) == marker { return start + 4 }
        return nil
    }
}

/// Sends `request` on a new loopback connection and returns what the server wrote until it closed.
/// With `halfClose`, the client's side is shut once the request is sent.
func rawExchange(port: Int, _ request: String, halfClose: Bool = false) async throws -> String {
    String(decoding: try await rawExchangeBytes(port: port, Array(request.utf8), halfClose: halfClose), as: UTF8.self)
}

/// `rawExchange`, as bytes (WebSocket frames are not text), reading until the server closes or
/// `done` says enough arrived.
func rawExchangeBytes(
    port: Int, _ request: [UInt8], halfClose: Bool = false,
    until done: @escaping @Sendable ([UInt8]) -> Bool = { _ in false }
) async throws -> [UInt8] {
    try await onOwnThread { try blockingExchange(port: port, request, halfClose: halfClose, until: done) }
}

/// Runs a blocking call on a thread of its own. Not on Dispatch's global queue: on Linux, Swift's
/// tasks run on that queue's few threads too, and tests blocked there stalled every relay under test
/// for seconds, until Dispatch added threads.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

private func blockingExchange(port: Int, _ request: [UInt8], halfClose: Bool, until done: ([UInt8]) -> Bool) throws
    -> [UInt8]
{
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    try #require(connected == 0)
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = request.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count, 0) }
    if halfClose { shutdown(fd, Int32(SHUT_WR)) }
    var received = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while !done(received) {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count <= 0 { break }
        received += buffer[0..<count]
    }
    return received
}
