import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOWebSocket
import Testing
import WSClient

/// Channel clients as a desktop browser would use them, each delivering events into a stream
/// that a test awaits (so a test knows the channel is open once the first event arrived).
enum ChannelClient {
    /// Opens a WebSocket and yields every event; the stream ends when the server closes.
    /// Returns the close code through `closeCode`.
    static func webSocket(_ url: String) -> (AsyncThrowingStream<WireEvent, any Error>, Task<Int?, any Error>) {
        let (stream, continuation) = AsyncThrowingStream<WireEvent, any Error>.makeStream()
        let task = Task<Int?, any Error> {
            do {
                let close = try await WebSocketClient.connect(url: url, logger: Logger(label: "test.ws")) {
                    inbound, _, _ in
                    for try await message in inbound.messages(maxSize: 1 << 14) {
                        if case .text(let text) = message {
                            continuation.yield(try JSONDecoder().decode(WireEvent.self, from: Data(text.utf8)))
                        }
                    }
                }
                continuation.finish()
                return close.map { Int(UInt16(webSocketErrorCode: $0.closeCode)) }
            } catch {
                continuation.finish(throwing: error)
                throw error
            }
        }
        return (stream, task)
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
