import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ProveAPI
import Synchronization

/// Told of every HTTP attempt of a Nevis client, for metrics: the endpoint ("approval", "status",
/// "dispatch", "fido-status"), the HTTP status as a string (or "timeout" / "error"), and the time it took.
public typealias NevisCallObserver = @Sendable (_ endpoint: String, _ status: String, _ duration: Duration) -> Void

/// Draws the QR code of a link, as a `data:image/png;base64,…` URI (nil when it cannot).
public typealias NevisQRDrawer = @Sendable (_ link: String) -> String?

/// A Nevis backend configured in a way the client cannot use. Its message names no secret and no URL.
public struct NevisConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// What both Nevis clients share: the checked base URL, the transport with its retries, and the mapping of
/// HTTP answers to `NevisClientError`, logged without a secret.
struct NevisHTTP: Sendable {
    let baseURL: String
    let transport: ProviderTransport
    let logger: Logger

    /// Counts a call's attempts: `makeRequest` runs once per attempt.
    private final class AttemptCounter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Sends one call and returns the body of its 2xx answer. A 4xx other than 429 is `.rejected` (with a
    /// detail from which `secrets` are removed), anything else `.unavailable`.
    func post(
        endpoint: String,
        path: String,
        body: ByteBuffer,
        headers: HTTPHeaders,
        isIdempotent: Bool,
        deadline: ContinuousClock.Instant,
        secrets: [String]
    ) async throws -> ByteBuffer {
        var logger = self.logger
        logger[metadataKey: "nevis.endpoint"] = "\(endpoint)"
        logger.trace("Calling Nevis")
        let url = baseURL + path
        let attempts = AttemptCounter()
        let result: ProviderTransport.Response
        do {
            result = try await transport.send(
                endpoint: endpoint, isIdempotent: isIdempotent, deadline: deadline, logger: logger
            ) {
                attempts.value.add(1, ordering: .relaxed)
                var request = HTTPClientRequest(url: url)
                request.method = .POST
                request.headers = headers
                request.body = .bytes(body)
                return request
            }
        } catch let failure as ProviderTransport.Unavailable {
            throw NevisClientError.unavailable(reason: failure.reason)
        }
        let metadata: Logger.Metadata = [
            "nevis.status": "\(result.status)", "nevis.attempt": "\(attempts.value.load(ordering: .relaxed))",
        ]
        switch result.status {
        case 200..<300:
            logger.debug("Nevis answered", metadata: metadata)
            return result.body
        case 401, 403:
            logger.error("Nevis refused the credentials: configuration or secret fault", metadata: metadata)
            throw NevisClientError.rejected(
                status: result.status, detail: Self.errorDetail(result.body, redacting: secrets))
        case 400..<500:
            logger.warning("Nevis rejected the request", metadata: metadata)
            throw NevisClientError.rejected(
                status: result.status, detail: Self.errorDetail(result.body, redacting: secrets))
        default:
            // A status no call expects (a 3xx never gets here: the transport fails it as a redirect).
            logger.error("Nevis answered with an unexpected status", metadata: metadata)
            throw NevisClientError.unavailable(reason: "unexpected HTTP \(result.status)")
        }
    }

    /// Decodes a 2xx body, or logs and throws `.unavailable`.
    func decode<T: Decodable>(_ type: T.Type, from body: ByteBuffer, endpoint: String) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(body.readableBytesView))
        } catch {
            logger.error(
                "Nevis answered with an undecodable body",
                metadata: ["nevis.endpoint": "\(endpoint)", "nevis.body_bytes": "\(body.readableBytes)"])
            throw NevisClientError.unavailable(reason: "undecodable \(endpoint) response")
        }
    }

    static func encode(_ value: some Encodable) throws -> ByteBuffer {
        do {
            return ByteBuffer(bytes: try jsonEncoder.encode(value))
        } catch {
            throw NevisClientError.unavailable(reason: "could not encode the request")
        }
    }

    static var jsonEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    // MARK: Base URL

    /// A backend's HTTP side: its checked base URL, Prove's transport (retries, timeouts) for Nevis, and
    /// the logger that names the backend (`nevis.backend`).
    init(
        baseURL: String, backend: String, httpClient: ProviderHTTPClient, retry: RetryPolicy,
        observe: NevisCallObserver?,
        logger: Logger, now: @escaping @Sendable () -> ContinuousClock.Instant
    ) throws {
        self.baseURL = try Self.checkedBaseURL(baseURL)
        self.transport = ProviderTransport(
            provider: "Nevis", httpClient: httpClient, retry: retry, observe: observe, now: now)
        var logger = logger
        logger[metadataKey: "nevis.backend"] = "\(backend)"
        self.logger = logger
    }

    /// The base URL without trailing slashes: `https://HOST[:PORT][/PATH]`, or `http://` for a loopback host
    /// (the simulator). No user info, query or fragment.
    static func checkedBaseURL(_ raw: String) throws -> String {
        var base = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        while base.hasSuffix("/") { base.removeLast() }
        guard let components = URLComponents(string: base), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            throw NevisConfigurationError("the Nevis base URL is not an absolute URL")
        }
        guard components.user == nil, components.password == nil, components.query == nil,
            components.fragment == nil
        else {
            throw NevisConfigurationError("the Nevis base URL must not carry user info, a query or a fragment")
        }
        switch scheme {
        case "https": break
        case "http" where isLoopback(host): break
        case "http": throw NevisConfigurationError("the Nevis base URL must be https (http only for a loopback host)")
        default: throw NevisConfigurationError("the Nevis base URL must be https")
        }
        return base
    }

    /// `localhost`, `127.0.0.0/8` and `::1`.
    static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    // MARK: Error detail

    /// The string fields an error body may explain itself in, in the order they are read.
    private struct ErrorBody: Decodable {
        var text: String?

        private struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            for key in ["message", "error", "detail", "title"] {
                if let value = try? container.decode(String.self, forKey: Key(stringValue: key)),
                    !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
                {
                    text = value
                    return
                }
            }
        }
    }

    static let maxDetailLength = 200

    /// A short summary of a JSON error body (its `message`, `error`, `detail` or `title`), on one line, at
    /// most 200 characters. `secrets` (the call's bearer values and customer text) and anything that looks
    /// like a token or a link are cut out, so the detail is safe to log.
    static func errorDetail(_ body: ByteBuffer, redacting secrets: [String]) -> String? {
        guard body.readableBytes > 0,
            let text = (try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView)))?.text
        else { return nil }
        var summary = text
        for secret in secrets where !secret.isEmpty {
            summary = summary.replacingOccurrences(of: secret, with: "[redacted]")
        }
        summary = redactTokenLikeRuns(oneLine(summary))
        if summary.count > maxDetailLength {
            summary = String(summary.prefix(maxDetailLength - 1)) + "…"
        }
        return summary
    }

    /// Control characters become spaces, runs of whitespace one space.
    private static func oneLine(_ text: String) -> String {
        var result = ""
        var lastWasSpace = false
        for scalar in text.unicodeScalars {
            let isSpace =
                CharacterSet.whitespacesAndNewlines.contains(scalar) || CharacterSet.controlCharacters.contains(scalar)
            if isSpace {
                if !lastWasSpace, !result.isEmpty { result.unicodeScalars.append(" ") }
            } else {
                result.unicodeScalars.append(scalar)
            }
            lastWasSpace = isSpace
        }
        while result.hasSuffix(" ") { result.removeLast() }
        return result
    }

    /// Runs of 24 or more characters of the alphabets tokens and links are written in (base64, base64url,
    /// hex, JWTs, URLs) become `[redacted]`: a server that echoes a token or a link does not get it logged.
    private static func redactTokenLikeRuns(_ text: String) -> String {
        let tokenAlphabet = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=:%?&#")
        var result = ""
        var run = ""
        func flush() {
            result += run.unicodeScalars.count >= 24 ? "[redacted]" : run
            run = ""
        }
        for scalar in text.unicodeScalars {
            if tokenAlphabet.contains(scalar) {
                run.unicodeScalars.append(scalar)
            } else {
                flush()
                result.unicodeScalars.append(scalar)
            }
        }
        flush()
        return result
    }
}

/// HTTP headers for a JSON call.
extension HTTPHeaders {
    static func nevisJSON(contentType: String, bearer: String?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        headers.add(name: "Content-Type", value: contentType)
        if let bearer, !bearer.isEmpty { headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        return headers
    }
}
