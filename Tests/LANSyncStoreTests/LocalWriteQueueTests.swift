import Foundation
import LANSyncCore
import Synchronization
import Testing

@testable import LANSyncStore

/// Local writes that arrive while a merge runs wait for a merge transaction to make way, and
/// commit in their own durable transaction (`LocalWriteQueue`); most of these tests drive the
/// queue directly, so they do not depend on timing.
@Suite struct LocalWriteQueueTests {
    let replica = ReplicaID(high: 7, low: 7)

    /// A peer's delta of `count` entries from one replica, counters from 1. With
    /// `reusingDotOneAt`, the entry at that index is another one under dot 1 (a delta the merge
    /// refuses once it reaches it).
    func peerDelta(count: Int, reusingDotOneAt reused: Int? = nil) -> Delta {
        var entries = (1...count).map { counter in
            Entry(
                id: "peer-\(counter)",
                stream: "taps",
                originDevice: device,
                dot: Dot(replica: replica, counter: UInt64(counter)),
                hlc: HybridTimestamp(physicalMilliseconds: 1_000, logical: UInt16(counter % 60_000)),
                wallMilliseconds: 1_000,
                payload: "{\"n\":\(counter)}"
            )
        }
        if let reused {
            entries[reused] = Entry(
                id: "impostor",
                stream: "taps",
                originDevice: device,
                dot: Dot(replica: replica, counter: 1),
                hlc: HybridTimestamp(physicalMilliseconds: 1_000, logical: 1),
                wallMilliseconds: 1_000,
                payload: "1"
            )
        }
        return Delta(entries: entries, coverage: [.init(replica: replica, from: 0, through: UInt64(count))])
    }

    /// What the caller of a queued write would hear: nothing yet, its entries, or an error.
    final class Heard: Sendable {
        private let value = Mutex<Result<[Entry], StoreError>?>(nil)
        func set(_ result: Result<[Entry], StoreError>) { value.withLock { $0 = result } }
        var result: Result<[Entry], StoreError>? { value.withLock { $0 } }
    }

    /// Queues an append the way `ReplicaStore.append` does, minus its own transaction.
    func queueAppend(_ store: ReplicaStore, payload: String) -> Heard {
        let heard = Heard()
        store.localWrites.add(
            LocalWrite(
                apply: { context in
                    let entries = try ReplicaStore.append(
                        [AppendRequest(stream: "local", payload: payload)],
                        now: 2_000,
                        context: &context
                    )
                    return { heard.set(.success(entries)) }
                },
                fail: { error in heard.set(.failure(StoreError(.database, "\(error)"))) }
            )
        )
        return heard
    }

    @Test func aMergeLeavesAWaitingWriteToItsOwnDurableTransaction() async throws {
        let directory = TemporaryDirectory()
        let (store, _) = try ReplicaStore.openOrCreate(path: directory.path + "/replica.sqlite", device: device)
        let heard = queueAppend(store, payload: "{\"tap\":\"more\"}")
        // No transaction of its own was asked for, and the merge, which commits without flushing
        // the WAL, does not commit it: a reader could send it on before it is on disk.
        _ = try await store.merge(peerDelta(count: 3_000))
        #expect(heard.result == nil)
        #expect(store.localWrites.hasWaiting)
        #expect(try store.versionVector()[store.replica] == 0)
        #expect(try store.status().entries == 3_000)
        // The next local write's own transaction commits both, durably.
        let next = try await store.append([AppendRequest(stream: "local", payload: "2")], now: 2_001)
        let appended = try #require(heard.result).get()
        #expect(try store.entry(id: appended[0].id) == appended[0])
        #expect(try store.entry(id: next[0].id) != nil)
        #expect(!store.localWrites.hasWaiting)
        #expect(try DurableCommitTests.synchronous(store) == 2)
        #expect(try store.status().entries == 3_002)
        #expect(try store.recomputeDigest() == store.status().digest)
        #expect(try store.versionVector()[replica] == 3_000)
        #expect(try store.versionVector()[store.replica] == 2)
        // The local write's clock reading is past every merged one: it wins any tie later.
        #expect(appended[0].hlc > HybridTimestamp(physicalMilliseconds: 1_000, logical: 3_000))
    }

    @Test func aFailedMergeLeavesAWaitingWriteUnharmed() async throws {
        let store = try ReplicaStore.inMemory(device: device)
        _ = try await store.merge(peerDelta(count: 1))
        let heard = queueAppend(store, payload: "{\"tap\":\"stop\"}")
        // Fails inside its transaction, past its first look at the queue (every 16 rows).
        let bad = peerDelta(count: 400, reusingDotOneAt: LocalWriteQueue.rowsBetweenLooks + 1)
        await #expect(throws: StoreError.self) { _ = try await store.merge(bad) }
        #expect(heard.result == nil)
        #expect(store.localWrites.hasWaiting)
        let next = try await store.append([AppendRequest(stream: "local", payload: "2")], now: 2_001)
        let appended = try #require(heard.result).get()
        #expect(try store.entry(id: appended[0].id) != nil)
        #expect(try store.entry(id: next[0].id) != nil)
        #expect(try store.status().entries == 3)
        #expect(try store.recomputeDigest() == store.status().digest)
    }

    /// A merge transaction commits once a write has waited `yieldDelay`, whatever its share.
    @Test func aMergeTransactionYieldsOnceAWriteHasWaitedItsDelay() {
        let queue = LocalWriteQueue()
        var yield = MergeYield()
        let every = LocalWriteQueue.rowsBetweenLooks
        var looks: [Bool] = []
        looks.append(yield.isDue(afterRows: every, queue: queue))
        queue.add(LocalWrite(apply: { _ in {} }, fail: { _ in }))
        // Seen for the first time: not due yet.
        looks.append(yield.isDue(afterRows: 2 * every, queue: queue))
        let seen = ContinuousClock.now
        while ContinuousClock.now - seen < LocalWriteQueue.yieldDelay * 2 {}
        // Between two looks the queue is not looked at; at the next look, due.
        looks.append(yield.isDue(afterRows: 2 * every + 1, queue: queue))
        looks.append(yield.isDue(afterRows: 3 * every, queue: queue))
        // Nothing waiting: no reason to commit early.
        _ = queue.takeAll()
        looks.append(yield.isDue(afterRows: 4 * every, queue: queue))
        #expect(looks == [false, false, false, true, false])
    }

    @Test func appendsDuringALargeMergeAllLandOnce() async throws {
        let directory = TemporaryDirectory()
        let (store, _) = try ReplicaStore.openOrCreate(path: directory.path + "/replica.sqlite", device: device)
        let merging = Task { try await store.merge(peerDelta(count: 30_000)) }
        var appended = [Entry]()
        while appended.count < 200 {
            appended += try await store.append(
                [AppendRequest(stream: "local", payload: "\(appended.count)")],
                now: 2_000
            )
        }
        _ = try await merging.value
        #expect(Set(appended.map(\.id)).count == 200)
        #expect(try store.status().entries == 30_200)
        #expect(try store.versionVector()[store.replica] == 200)
        #expect(try store.recomputeDigest() == store.status().digest)
        #expect(try store.integrityProblems().isEmpty)
    }
}
