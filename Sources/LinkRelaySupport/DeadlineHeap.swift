import Foundation

/// A binary min-heap of values by date: the earliest first.
///
/// Inlinable, so that the modules using it compile it for their own values rather than running generic
/// code that looks up the value's type at every move.
public struct DeadlineHeap<Value> {
    @usableFromInline var items: [(date: Date, value: Value)] = []

    public init() {}

    @inlinable
    public var first: (date: Date, value: Value)? { items.first }

    @inlinable
    public var count: Int { items.count }

    @inlinable
    public mutating func insert(_ value: Value, at date: Date) {
        items.append((date, value))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].date < items[parent].date else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest, or nil when empty.
    @inlinable
    public mutating func popFirst() -> (date: Date, value: Value)? {
        guard let first = items.first else { return nil }
        let last = items.removeLast()
        guard !items.isEmpty else { return first }
        items[0] = last
        siftDown(0)
        return first
    }

    @inlinable
    mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, items[left].date < items[smallest].date { smallest = left }
            if right < items.count, items[right].date < items[smallest].date { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// Drops the entries `shouldRemove` picks, into storage sized for those left (an array keeps the
    /// capacity of its largest size).
    @inlinable
    public mutating func removeAll(where shouldRemove: ((date: Date, value: Value)) -> Bool) {
        items = items.filter { !shouldRemove($0) }
        // Every parent, from the last one up, sinks to its place.
        for parent in stride(from: items.count / 2 - 1, through: 0, by: -1) { siftDown(parent) }
    }

    /// Removes and returns, earliest first, every value due at `now`.
    @inlinable
    public mutating func popDue(at now: Date) -> [(date: Date, value: Value)] {
        var due: [(date: Date, value: Value)] = []
        while let first, first.date <= now, let item = popFirst() { due.append(item) }
        return due
    }
}
