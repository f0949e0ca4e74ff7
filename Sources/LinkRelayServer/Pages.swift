import Foundation
import Hummingbird
import Mustache

/// The HTML pages, rendered from the Mustache templates in `templates/`.
struct Pages: Sendable {
    let library: MustacheLibrary
    let sandbox: Bool
    let stylesheet: String
    let demoScript: String

    static func load(directory: String?, sandbox: Bool) async throws -> Pages {
        let path = try directory ?? locateTemplates()
        let library = try await MustacheLibrary(directory: path)
        func asset(_ name: String) throws -> String {
            try String(contentsOfFile: path + "/" + name, encoding: .utf8)
        }
        return Pages(
            library: library, sandbox: sandbox, stylesheet: try asset("relay.css"), demoScript: try asset("demo.js"))
    }

    /// `templates/` in the working directory, else the one in the source tree this was built from.
    static func locateTemplates() throws -> String {
        let candidates = [
            FileManager.default.currentDirectoryPath + "/templates",
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("templates").path,
        ]
        guard let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0 + "/landing.mustache") })
        else {
            throw ConfigurationError("templates/ not found; run from the repository or set --templates")
        }
        return found
    }

    /// A page with the landing page's headers (API.md): nothing cached, no referrer, nothing framed.
    func render(
        _ template: String, _ values: [String: Any] = [:], status: HTTPResponse.Status = .ok,
        extraCSP: String = "", headers: HTTPFields = [:]
    ) -> Response {
        Response(
            status: status,
            headers: Self.htmlHeaders(extraCSP: extraCSP) + headers,
            body: .init(byteBuffer: ByteBuffer(string: html(template, values))))
    }

    func html(_ template: String, _ values: [String: Any] = [:]) -> String {
        var values = values
        values["sandbox"] = sandbox
        return library.render(values, withTemplate: template) ?? "<!doctype html><title>LinkRelay</title>"
    }

    static func htmlHeaders(extraCSP: String = "") -> HTTPFields {
        [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            .init("Referrer-Policy")!: "no-referrer",
            .init("X-Content-Type-Options")!: "nosniff",
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
                + extraCSP,
        ]
    }
}
