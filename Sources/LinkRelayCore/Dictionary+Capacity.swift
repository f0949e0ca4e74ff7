extension Dictionary {
    /// Moves the entries into storage sized for them when they fill less than a quarter of a large
    /// one, and lets an emptied one of any size go: a dictionary keeps the capacity of its largest
    /// size, so a burst of 15,000 sessions would hold its memory for good, and 100 ended sessions kept
    /// 205 KiB of the store's cache at rest (README, Performance).
    public mutating func releaseUnusedCapacity() {
        guard count < capacity / 4, isEmpty || capacity > 1024 else { return }
        self = Dictionary(uniqueKeysWithValues: Array(self))
    }
}
