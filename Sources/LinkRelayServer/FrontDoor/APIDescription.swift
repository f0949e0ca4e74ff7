import Foundation

/// `GET /openapi.json`: the hand-written OpenAPI 3.1 document of the contract, `templates/openapi.json`,
/// with this relay's `--public-url` as its one server, so that a tool pointed at a relay calls that relay.
///
/// It lives beside the pages because the relay already finds that directory at start (`--templates`,
/// the working directory, or the source tree) and every deployment ships it.
enum APIDescription {
    static let fileName = "openapi.json"

    /// The document as served, from the file in `directory` (the templates' when nil).
    static func load(directory: String?, publicURL: String) throws -> ETaggedDocument {
        let path = try (directory ?? Pages.locateTemplates()) + "/" + fileName
        guard let source = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("\(path) not found; the templates directory holds the API description")
        }
        return try document(source, publicURL: publicURL)
    }

    /// `source` with `publicURL` as its server, pretty-printed with sorted keys: the same bytes, and so
    /// the same ETag, on every instance. Throws unless `source` is an OpenAPI 3.1 object.
    static func document(_ source: Data, publicURL: String) throws -> ETaggedDocument {
        guard var document = try? JSONSerialization.jsonObject(with: source) as? [String: Any],
            let version = document["openapi"] as? String, version.hasPrefix("3.1.")
        else { throw ConfigurationError("\(fileName) is not an OpenAPI 3.1 document") }
        document["servers"] = [["url": publicURL, "description": "This relay (its --public-url)."]]
        let bytes = try JSONSerialization.data(
            withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return ETaggedDocument(Array(bytes) + [UInt8(ascii: "\n")], contentType: "application/json")
    }
}
