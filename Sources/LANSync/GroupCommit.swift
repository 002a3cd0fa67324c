import LANSyncCore
import LANSyncStore

/// Batches concurrent appends into one durable commit.
///
/// With `synchronous=FULL` every commit costs a disk flush; appends that arrive while a commit is
/// under way wait for the next one and share its flush. One caller alone pays one commit and
/// waits for nothing else; many callers get high throughput without any of them waiting long.
actor GroupCommit {
    private typealias Waiter = CheckedContinuation<[Entry], any Error>
    private let store: ReplicaStore
    private let clock: NodeClock
    private let onCommit: @Sendable ([Entry]) -> Void
    private var pending: [(requests: [AppendRequest], waiter: Waiter)] = []
    private var committing = false

    init(store: ReplicaStore, clock: NodeClock, onCommit: @escaping @Sendable ([Entry]) -> Void) {
        self.store = store
        self.clock = clock
        self.onCommit = onCommit
    }

    /// Appends `requests` in the next commit; returns once that commit is durable.
    func append(_ requests: [AppendRequest]) async throws -> [Entry] {
        try await withCheckedThrowingContinuation { (waiter: Waiter) in
            pending.append((requests, waiter))
            if !committing {
                committing = true
                Task { await self.drain() }
            }
        }
    }

    private func drain() async {
        while !pending.isEmpty {
            let batch = pending
            pending.removeAll(keepingCapacity: true)
            let requests = batch.flatMap(\.requests)
            do {
                let entries = try await store.append(requests, now: clock.now())
                var offset = 0
                for item in batch {
                    item.waiter.resume(returning: Array(entries[offset..<(offset + item.requests.count)]))
                    offset += item.requests.count
                }
                onCommit(entries)
            } catch {
                // Requests are validated before they get here, so only storage failures remain,
                // and those fail the whole commit: every caller in it learns nothing was written.
                for item in batch { item.waiter.resume(throwing: error) }
            }
        }
        committing = false
    }
}

/// The node's physical clock in milliseconds since the epoch.
///
/// Test hook: `LANSYNC_TEST_CLOCK_OFFSET_MS` shifts it, so fault tests can run a node whose clock
/// is wrong without touching the machine's clock.
public struct NodeClock: Sendable {
    public let offsetMilliseconds: Int64

    public init(offsetMilliseconds: Int64 = 0) { self.offsetMilliseconds = offsetMilliseconds }

    public static func fromEnvironment(_ environment: [String: String]) -> NodeClock {
        NodeClock(offsetMilliseconds: environment["LANSYNC_TEST_CLOCK_OFFSET_MS"].flatMap { Int64($0) } ?? 0)
    }

    public func now() -> UInt64 {
        UInt64(max(0, Int64(Timestamps.nowMilliseconds()) + offsetMilliseconds))
    }
}
