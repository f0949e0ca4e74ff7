import Foundation
import LinkRelayCore
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
}
