import Foundation
import LinkRelayTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// A webhook receiver on loopback: answers each POST with the next step of its script (204 once the
/// script is spent) and records what came.
actor WebhookReceiver {
    enum Step: Sendable {
        case status(Int, location: String? = nil)
        /// Never answers (until the receiver stops).
        case hang
        /// 200, then a byte of body every 50 ms for a minute.
        case drip
        /// 200 with a body of `megabytes` MiB.
        case huge(megabytes: Int)
    }

    struct Received: Sendable {
        var headers: [String: String]
        var body: String
        func json() throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        }
    }

    private var steps: [Step]
    private(set) var received: [Received] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var hanging: [CheckedContinuation<Void, Never>] = []
    private var stopped = false

    init(_ steps: [Step] = []) { self.steps = steps }

    func script(_ more: Step...) { steps += more }

    /// Drops what is left of the script: every request gets 204 from now on.
    func recover() { steps = [] }

    /// Returns once `count` requests have come.
    func waitFor(_ count: Int) async {
        if received.count >= count { return }
        await withCheckedContinuation { waiters.append((count, $0)) }
    }

    private func take(_ request: Received) -> Step {
        received.append(request)
        let ready = waiters.filter { $0.count <= received.count }
        waiters.removeAll { $0.count <= received.count }
        for waiter in ready { waiter.continuation.resume() }
        return steps.isEmpty ? .status(204) : steps.removeFirst()
    }

    private func hang() async {
        if stopped { return }
        await withCheckedContinuation { hanging.append($0) }
    }

    private func stop() {
        stopped = true
        for waiter in hanging { waiter.resume() }
        hanging = []
    }

    /// Serves at `http://127.0.0.1:PORT/hook` for the duration of `body`.
    func serve<T: Sendable>(_ body: @escaping @Sendable (String) async throws -> T) async throws -> T {
        let answer: TestHTTPServer.Handler = { request in
            guard request.method == .POST else { return .init(status: .notFound) }
            if request.path == "/elsewhere" {
                Issue.record("a redirect was followed")
                return .init(status: .noContent)
            }
            guard request.path == "/hook" else { return .init(status: .notFound) }
            var headers: [String: String] = [:]
            for (name, value) in request.headers { headers[name.lowercased()] = value }
            switch await self.take(Received(headers: headers, body: String(buffer: request.body))) {
            case .status(let code, let location):
                var fields = HTTPHeaders()
                if let location { fields.add(name: "Location", value: location) }
                return .init(status: HTTPResponseStatus(statusCode: code), headers: fields)
            case .hang:
                await self.hang()
                return .init(status: .serviceUnavailable)
            case .drip:
                return .init(
                    status: .ok,
                    body: .stream { writer in
                        for _ in 0..<1200 {
                            try await writer.write(ByteBuffer(string: "."))
                            try await Task.sleep(for: .milliseconds(50))
                        }
                    })
            case .huge(let megabytes):
                let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1 << 20)
                return .init(
                    status: .ok,
                    body: .stream { writer in
                        for _ in 0..<megabytes { try await writer.write(chunk) }
                    })
            }
        }
        return try await TestHTTPServer.serve(answer) { port in
            defer { Task { await self.stop() } }
            return try await body("http://127.0.0.1:\(port)/hook")
        }
    }
}
