extension Dictionary {
    /// Moves the entries into storage sized for them when they fill less than a quarter of it (above
    /// room for 64), and lets an emptied one of any size go: a dictionary keeps the capacity of its
    /// largest size, so a burst of 15,000 sessions or connections would hold its memory for good, and
    /// 100 ended sessions kept 205 KiB of the store's cache at rest (Benchmarks/HISTORY.md). Cheap enough
    /// to call after every removal: it moves entries only once their count has fallen by three quarters.
    public mutating func releaseUnusedCapacity() {
        guard count < capacity / 4, isEmpty || capacity > 64 else { return }
        self = Dictionary(uniqueKeysWithValues: Array(self))
    }
}
