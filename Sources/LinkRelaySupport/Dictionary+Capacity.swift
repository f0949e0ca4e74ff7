extension Dictionary {
    /// Moves the entries into storage sized for them when they fill less than a quarter of it (above
    /// room for 64), and lets an emptied one of any size go: a dictionary keeps the capacity of its
    /// largest size, so a burst of sessions or connections would hold its memory for good (docs/memory.md).
    /// Cheap enough to call after every removal: it moves entries only once their count has fallen by
    /// three quarters.
    public mutating func releaseUnusedCapacity() {
        guard count < capacity / 4, isEmpty || capacity > 64 else { return }
        self = Dictionary(uniqueKeysWithValues: Array(self))
    }
}
