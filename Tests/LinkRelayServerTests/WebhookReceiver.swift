import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
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
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            let bytes = try await request.body.collect(upTo: 1 << 20)
            switch await self.take(Received(headers: headers, body: String(buffer: bytes))) {
            case .status(let code, let location):
                var fields = HTTPFields()
                if let location { fields[.location] = location }
                return Response(status: .init(code: code), headers: fields)
            case .hang:
                await self.hang()
                return Response(status: .serviceUnavailable)
            case .drip:
                return Response(
                    status: .ok,
                    body: ResponseBody { writer in
                        for _ in 0..<1200 {
                            try await writer.write(ByteBuffer(string: "."))
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        try await writer.finish(nil)
                    })
            case .huge(let megabytes):
                let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1 << 20)
                return Response(
                    status: .ok,
                    body: ResponseBody { writer in
                        for _ in 0..<megabytes { try await writer.write(chunk) }
                        try await writer.finish(nil)
                    })
            }
        }
        router.post("/elsewhere") { _, _ -> Response in
            Issue.record("a redirect was followed")
            return Response(status: .noContent)
        }
        let app = Application(router: router, logger: Logger(label: "receiver") { _ in SwiftLogNoOpLogHandler() })
        return try await app.test(.live) { client in
            let port = try #require(client.port)
            defer { Task { await self.stop() } }
            return try await body("http://127.0.0.1:\(port)/hook")
        }
    }
}
