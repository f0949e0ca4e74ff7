public enum StoreError: Error, Sendable, Equatable {
    case duplicateIdempotencyKey
}
