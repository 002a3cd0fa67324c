/// Events in simulated time, earliest first; events at the same millisecond in the order they
/// were scheduled (a binary heap on (time, sequence)), so a run is a pure function of its seed.
struct EventQueue<Event> {
    private var heap: [(at: Int64, sequence: Int, event: Event)] = []
    private var scheduled = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    mutating func schedule(_ event: Event, at time: Int64) {
        heap.append((time, scheduled, event))
        scheduled += 1
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.earlier(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func next() -> (at: Int64, event: Event)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, Self.earlier(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, Self.earlier(heap[right], heap[smallest]) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return (first.at, first.event)
    }

    private static func earlier(
        _ a: (at: Int64, sequence: Int, event: Event),
        _ b: (at: Int64, sequence: Int, event: Event)
    ) -> Bool {
        (a.at, a.sequence) < (b.at, b.sequence)
    }
}
