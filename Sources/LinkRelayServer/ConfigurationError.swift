/// A setting that stops start-up, with the one line to print.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
