/// How a handler answers.
enum Reply: Sendable {
    /// At once, on the connection's event loop.
    case now(Answer)
    /// From a task that runs on the connection's event loop (it reads the store or asks Prove).
    case later(@Sendable () async throws -> Answer)
    /// The connection becomes a desktop channel's (`ChannelsController.open`).
    case channel(ChannelRequest)
}
