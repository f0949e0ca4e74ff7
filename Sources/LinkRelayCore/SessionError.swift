/// Why a change to a session was refused. The server answers each with its own status (404, 409, 410, 422).
public enum SessionError: Error, Sendable, Equatable {
    /// No session has this id.
    case notFound
    /// The session has ended; it changes no more.
    case alreadyEnded
    /// The session's hold has passed.
    case expired
    /// The Idempotency-Key came before with a different request body.
    case idempotencyKeyReused
    /// Another instance is still making the session of this Idempotency-Key: the client retries.
    case idempotencyKeyInProgress
    /// A bind on a session whose outcome is not `possession_required`, bound already, or past Prove's
    /// 15-minute flow (409).
    case bindNotAllowed
    /// A Pre-Fill step that Prove's last `next` does not offer, or one past Prove's 15-minute flow, or
    /// one while another step of the session is under way (409); the detail says which.
    case stepNotAllowed(String)
    /// A step of another flow than the session's (`challenge` on a Unify session, `bind` on a Pre-Fill
    /// one): the session exists, its flow has no such step (409).
    case stepNotOffered(flow: Flow, step: String)
}
