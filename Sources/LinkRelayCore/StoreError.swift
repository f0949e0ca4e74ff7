public enum StoreError: Error, Sendable, Equatable {
    case duplicateIdempotencyKey
    /// The store cannot take writes now (its disk is read-only or full, its file was removed, its
    /// database is out of reach); the write changed nothing. The relay answers 503 until one goes
    /// through again.
    case unavailable
}
