import Foundation
import Hummingbird
import Mustache

/// The HTML pages, rendered from the Mustache templates in `templates/`.
struct Pages: Sendable {
    let library: MustacheLibrary
    let sandbox: Bool
    let stylesheet: String
    let demoScript: String
    /// Every template rendered without values, once at start: the landing and the error pages need
    /// nothing else, and Mustache's render was 2–3% of the relay's CPU at 1,000 landings a second.
    private var plain: [String: ByteBuffer] = [:]

    static func load(directory: String?, sandbox: Bool) async throws -> Pages {
        let path = try directory ?? locateTemplates()
        let library = try await MustacheLibrary(directory: path)
        func asset(_ name: String) throws -> String {
            try String(contentsOfFile: path + "/" + name, encoding: .utf8)
        }
        var pages = Pages(
            library: library, sandbox: sandbox, stylesheet: try asset("relay.css"), demoScript: try asset("demo.js"))
        for file in try FileManager.default.contentsOfDirectory(atPath: path) where file.hasSuffix(".mustache") {
            let template = String(file.dropLast(".mustache".count))
            pages.plain[template] = ByteBuffer(string: pages.html(template))
        }
        return pages
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
        page(template, values, status: status, extraCSP: extraCSP, headers: headers).response
    }

    /// What `render` answers, before it is a `Response`.
    func page(
        _ template: String, _ values: [String: Any] = [:], status: HTTPResponse.Status = .ok,
        extraCSP: String = "", headers: HTTPFields = [:]
    ) -> Page {
        let body = values.isEmpty ? plain[template] : nil
        return Page(
            status: status,
            headers: (extraCSP.isEmpty ? Self.plainHeaders : Self.htmlHeaders(extraCSP: extraCSP)) + headers,
            body: body ?? ByteBuffer(string: html(template, values)))
    }

    func html(_ template: String, _ values: [String: Any] = [:]) -> String {
        var values = values
        values["sandbox"] = sandbox
        return library.render(values, withTemplate: template) ?? "<!doctype html><title>LinkRelay</title>"
    }

    /// The headers of a page without an extra CSP source, built once.
    static let plainHeaders = htmlHeaders()

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

/// An answer with its body whole: a page, or a redirect with none. Hummingbird's routes send it as a
/// `Response`; the relay's own landing handler writes it on the event loop (`LandingHandler`).
struct Page: Sendable {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body = ByteBuffer()

    var response: Response { Response(status: status, headers: headers, body: .init(byteBuffer: body)) }
}
