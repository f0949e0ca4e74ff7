extension Dictionary {
    /// Moves the entries into storage sized for them when they fill less than a quarter of a large
    /// one: a dictionary keeps the capacity of its largest size, so a burst of 15,000 sessions would
    /// hold its memory for good.
    public mutating func releaseUnusedCapacity() {
        guard capacity > 1024, count < capacity / 4 else { return }
        self = Dictionary(uniqueKeysWithValues: Array(self))
    }
}
