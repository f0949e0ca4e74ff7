import Foundation
import Hummingbird
import Synchronization

/// `/healthz`, `/readyz` and `/metrics` for operators.
struct OpsController {
    let service: SessionService
    let draining: Draining
    let pages: Pages
    /// With PostgreSQL: the bus from other instances, without which a tap there would not wake a channel here.
    var listener: PostgresListener?

    func addRoutes(to router: Router<RelayContext>) {
        // HEAD too, for the health checks that send it: the same status, no body.
        router.get("healthz") { _, _ in Self.text("ok\n") }
        router.head("healthz") { _, _ in Self.text("ok\n").withoutBody() }
        router.get("readyz") { _, _ in await readiness() }
        router.head("readyz") { _, _ in await readiness().withoutBody() }
        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: service.metrics.registry.emitToBuffer())))
        }
        router.get("assets/relay.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "max-age=300"],
                body: .init(byteBuffer: ByteBuffer(string: pages.stylesheet)))
        }
    }

    private func readiness() async -> Response {
        if draining.isDraining { return Self.text("draining\n", status: .serviceUnavailable) }
        if let listener, !listener.isListening {
            return Self.text("not listening to other instances\n", status: .serviceUnavailable)
        }
        do {
            try await service.store.ping()
            return Self.text("ready\n")
        } catch {
            return Self.text("store unreachable\n", status: .serviceUnavailable)
        }
    }

    static func text(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Set when the relay starts shutting down, so `/readyz` turns 503 at once.
final class Draining: Sendable {
    private let flag = Atomic<Bool>(false)

    var isDraining: Bool { flag.load(ordering: .relaxed) }

    func start() { flag.store(true, ordering: .relaxed) }
}

extension Response {
    /// The answer to a HEAD: this one's status and headers, no body.
    func withoutBody() -> Response {
        var response = self
        response.body = .init()
        return response
    }
}
