public enum StoreError: Error, Sendable, Equatable {
    case duplicateIdempotencyKey
    /// The store cannot take writes now (its disk is read-only or full, its file was removed, its
    /// database is out of reach); the write changed nothing. The relay answers 503 until one goes
    /// through again.
    case unavailable
    /// The store's file is damaged (SQLite met a corrupt page). Nothing the store answers can be
    /// trusted, so the relay answers 503 for everything that needs the store until an operator restores
    /// the file and restarts it.
    case corrupt
}
