import Foundation
import LinkRelaySupport
import Testing

@Suite struct DeadlineHeapTests {
    @Test func popsInDateOrderAndOnlyWhatIsDue() {
        var heap = DeadlineHeap<Int>()
        var generator = SystemRandomNumberGenerator()
        let offsets = (0..<500).map { _ in Double.random(in: 0..<100, using: &generator) }
        let start = Date(timeIntervalSinceReferenceDate: 0)
        for (index, offset) in offsets.enumerated() { heap.insert(index, at: start + offset) }

        let due = heap.popDue(at: start + 50)
        #expect(due.map(\.date) == due.map(\.date).sorted())
        #expect(Set(due.map(\.value)) == Set(offsets.indices.filter { offsets[$0] <= 50 }))
        #expect(heap.count == offsets.count - due.count)
        #expect(heap.first.map { $0.date > start + 50 } ?? true)

        var rest: [Date] = []
        while let item = heap.popFirst() { rest.append(item.date) }
        #expect(rest == rest.sorted() && rest.count == offsets.count - due.count)
        #expect(heap.popFirst() == nil)
    }

    @Test func removingEntriesKeepsTheRestInDateOrder() {
        var heap = DeadlineHeap<Int>()
        let start = Date(timeIntervalSinceReferenceDate: 0)
        for value in (0..<1000).shuffled() { heap.insert(value, at: start + Double(value)) }
        heap.removeAll { $0.value % 3 != 0 }
        var left: [Int] = []
        while let item = heap.popFirst() { left.append(item.value) }
        #expect(left == Array(stride(from: 0, to: 1000, by: 3)))

        heap.insert(1, at: start)
        heap.removeAll { _ in true }
        #expect(heap.count == 0 && heap.first == nil)
    }

    @Test func aDictionaryGivesBackTheRoomItNoLongerUses() {
        var dictionary = Dictionary(uniqueKeysWithValues: (0..<20_000).map { ("key\($0)", $0) })
        let large = dictionary.capacity
        for index in 100..<20_000 { dictionary["key\(index)"] = nil }
        #expect(dictionary.capacity == large, "Swift keeps it")
        dictionary.releaseUnusedCapacity()
        #expect(dictionary.capacity < large / 16)
        #expect(dictionary == Dictionary(uniqueKeysWithValues: (0..<100).map { ("key\($0)", $0) }))

        var small = Dictionary(uniqueKeysWithValues: (0..<100).map { ($0, $0) })
        small[0] = nil
        let room = small.capacity
        small.releaseUnusedCapacity()
        #expect(small.capacity == room, "small ones in use are left alone")
        for key in 1..<100 { small[key] = nil }
        small.releaseUnusedCapacity()
        #expect(small.capacity == 0, "an emptied one lets its room go")
    }
}
