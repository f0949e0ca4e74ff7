import Foundation
import Mustache
import NIOCore
import NIOHTTP1

/// The HTML pages, rendered from the Mustache templates in `templates/`, and the assets beside them.
final class Pages: Sendable {
    let library: MustacheLibrary
    let sandbox: Bool
    let stylesheet: String
    let demoScript: String
    /// The ops page's own style sheet and the script that refreshes it in place.
    let opsStylesheet: String
    let opsScript: String
    /// The pages' icon (SVG), `GET /favicon.ico`: browsers ask for it on every site.
    let favicon: String
    /// The browser client, `GET /v1/client.js`.
    /// `GET /v1/client.js`: integrators' pages load it from the relay, so a browser revalidates it on every
    /// load and gets a bodiless 304 while the relay's copy is unchanged.
    let clientScript: ETaggedDocument
    /// Every template rendered without values, once at start: the landing and the error pages need
    /// nothing else, so a landing costs no render.
    private let plain: [String: ByteBuffer]
    /// The final page for a session the phone turned down ("Not me"), rendered once too.
    private let finalRejected: ByteBuffer

    private init(
        library: MustacheLibrary, sandbox: Bool, stylesheet: String, demoScript: String, clientScript: String,
        ops: (css: String, js: String), favicon: String,
        templates: [String]
    ) {
        self.library = library
        self.sandbox = sandbox
        self.stylesheet = stylesheet
        self.demoScript = demoScript
        (opsStylesheet, opsScript) = ops
        self.favicon = favicon
        self.clientScript = ETaggedDocument(Array(clientScript.utf8), contentType: "text/javascript; charset=utf-8")
        plain = Dictionary(
            uniqueKeysWithValues: templates.map { ($0, ByteBuffer(string: Self.html(library, sandbox, $0, [:]))) })
        finalRejected = ByteBuffer(string: Self.html(library, sandbox, "final", ["rejected": true]))
    }

    static func load(directory: String?, sandbox: Bool) async throws -> Pages {
        let path = try directory ?? locateTemplates()
        let library = try await MustacheLibrary(directory: path)
        func asset(_ name: String) throws -> String {
            do {
                return try String(contentsOfFile: path + "/" + name, encoding: .utf8)
            } catch {
                throw ConfigurationError("\(path)/\(name) cannot be read; --templates needs every file of templates/")
            }
        }
        let templates = try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(".mustache") }
            .map { String($0.dropLast(".mustache".count)) }
        return Pages(
            library: library, sandbox: sandbox, stylesheet: try asset("relay.css"), demoScript: try asset("demo.js"),
            clientScript: try asset("client.js"),
            ops: (try asset("ops.css"), try asset("ops.js")), favicon: try asset("favicon.svg"), templates: templates)
    }

    /// No templates: every page is a bare HTML title. For a server without pages (`linkrelay sandbox`), which
    /// needs no `templates/` directory.
    static func withoutTemplates() -> Pages {
        Pages(
            library: MustacheLibrary(), sandbox: true, stylesheet: "", demoScript: "", clientScript: "",
            ops: ("", ""), favicon: "", templates: [])
    }

    /// `templates/` in the working directory, else the one in the source tree this was built from.
    static func locateTemplates() throws -> String {
        let candidates = [
            FileManager.default.currentDirectoryPath + "/templates",
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("templates").path,
        ]
        guard let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0 + "/landing.mustache") })
        else {
            throw ConfigurationError("templates/ not found; run from the repository or set --templates")
        }
        return found
    }

    /// A page with the landing page's headers (API.md): nothing cached, no referrer, nothing framed.
    /// Without values, the page rendered at start. `dataImages`: the page shows images from `data:` URIs
    /// (a Nevis QR code), which its CSP then allows.
    func page(
        _ template: String, _ values: [String: Any] = [:], status: HTTPResponseStatus = .ok, extraCSP: String = "",
        dataImages: Bool = false, headers: HTTPHeaders = [:]
    ) -> Answer {
        let body = values.isEmpty ? plain[template] : nil
        var all =
            extraCSP.isEmpty && !dataImages
            ? Self.plainHeaders : Self.htmlHeaders(extraCSP: extraCSP, dataImages: dataImages)
        all.add(contentsOf: headers)
        return Answer(status: status, headers: all, body: body ?? ByteBuffer(string: html(template, values)))
    }

    /// The page for a repeat of a seen `authId` on an ended session ("Cancelled" after "Not me").
    func final(rejected: Bool) -> Answer {
        rejected ? Answer(status: .ok, headers: Self.plainHeaders, body: finalRejected) : page("final")
    }

    func html(_ template: String, _ values: [String: Any] = [:]) -> String {
        Self.html(library, sandbox, template, values)
    }

    private static func html(
        _ library: MustacheLibrary, _ sandbox: Bool, _ template: String, _ values: [String: Any]
    ) -> String {
        var values = values
        values["sandbox"] = sandbox
        return library.render(values, withTemplate: template) ?? "<!doctype html><title>LinkRelay</title>"
    }

    /// The headers of a page without an extra CSP source, built once.
    static let plainHeaders = htmlHeaders()

    /// `extraCSP` is appended; `dataImages` adds `data:` to `img-src` itself, since a directive given
    /// twice counts only the first time.
    static func htmlHeaders(extraCSP: String = "", dataImages: Bool = false) -> HTTPHeaders {
        [
            "Content-Type": "text/html; charset=utf-8",
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "Content-Security-Policy":
                "default-src 'none'; style-src 'self'; img-src 'self'\(dataImages ? " data:" : ""); "
                + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'" + extraCSP,
        ]
    }
}
