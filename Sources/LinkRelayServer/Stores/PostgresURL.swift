import Foundation
import NIOSSL
import PostgresNIO

/// Where the PostgreSQL store is: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE]`
/// (also `postgresql://`), where MODE is `disable`, `prefer` (the default) or `require`.
public struct PostgresURL: Sendable, Equatable {
    public enum TLSMode: String, Sendable { case disable, prefer, require }

    /// The form, as `serve --help`, the errors and the docs write it.
    public static let form = "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]"

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String?
    public var tls: TLSMode

    public init(_ url: String) throws(ConfigurationError) {
        guard let parts = URLComponents(string: url), parts.scheme == "postgres" || parts.scheme == "postgresql",
            let host = parts.host, !host.isEmpty, let user = parts.user, !user.isEmpty
        else {
            throw ConfigurationError("--store: a PostgreSQL URL looks like \(Self.form) (also postgresql://)")
        }
        let mode = parts.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        guard let tls = TLSMode(rawValue: mode) else {
            throw ConfigurationError("--store: sslmode \"\(mode)\" is not disable, prefer or require")
        }
        let database = parts.path.hasPrefix("/") ? String(parts.path.dropFirst()) : parts.path
        (self.host, self.port, self.username, self.password) = (host, parts.port ?? 5432, user, parts.password)
        (self.database, self.tls) = (database.isEmpty ? nil : database, tls)
    }

    /// For the pool of the store.
    var clientConfiguration: PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch self.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(.makeClientConfiguration())
        case .require: tls = .require(.makeClientConfiguration())
        }
        return PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
    }

    /// For a connection of its own (the listener's).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch self.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        return PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
    }
}
