import Foundation
import LANSyncCore
import Synchronization
import Testing

@testable import LANSyncStore

/// Local writes that arrive while a merge runs ride along in the merge's transactions
/// (`LocalWriteQueue`); these tests drive the queue directly, so they do not depend on timing.
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

    @Test func aWaitingAppendCommitsWithTheMergeTransaction() async throws {
        let store = try ReplicaStore.inMemory(device: device)
        let heard = queueAppend(store, payload: "{\"tap\":\"more\"}")
        // No transaction of its own was asked for: only the merge can have committed it.
        _ = try await store.merge(peerDelta(count: 500))
        let appended = try #require(heard.result).get()
        #expect(appended.count == 1)
        #expect(try store.entry(id: appended[0].id) == appended[0])
        #expect(!store.localWrites.hasWaiting)
        // Everything is accounted for: the merged rows, the append, and the digest of both.
        #expect(try store.status().entries == 501)
        #expect(try store.recomputeDigest() == store.status().digest)
        #expect(try store.versionVector()[replica] == 500)
        #expect(try store.versionVector()[store.replica] == 1)
        // The local write's clock reading is past every merged one: it wins any tie later.
        #expect(appended[0].hlc > HybridTimestamp(physicalMilliseconds: 1_000, logical: 500))
    }

    @Test func aFailedMergeHandsTheWritesItTookBackUnharmed() async throws {
        // The merge commits early when applying the write it took outlasts the ride-along delay
        // (0.5 ms; a busy machine preempts that long): right, but not the path under test, so
        // a fresh store tries again.
        for _ in 0..<20 {
            let store = try ReplicaStore.inMemory(device: device)
            let (heard, mergeFailure) = try await failAMergeAfterItTookAnAppend(store)
            guard try store.status().entries == 1 else { continue }
            #expect(mergeFailure is StoreError, "the merge with the bad row fails: \(String(describing: mergeFailure))")
            // Not reported either way, and back in the queue...
            #expect(heard.result == nil)
            #expect(store.localWrites.hasWaiting)
            // ...so the next local write's own transaction commits both.
            let next = try await store.append([AppendRequest(stream: "local", payload: "2")], now: 2_001)
            let appended = try #require(heard.result).get()
            #expect(try store.entry(id: appended[0].id) != nil)
            #expect(try store.entry(id: next[0].id) != nil)
            #expect(try store.status().entries == 3)
            #expect(try store.recomputeDigest() == store.status().digest)
            return
        }
        Issue.record("in 20 tries, every merge committed before the bad row: the failure path never ran")
    }

    /// Queues an append, then merges a delta whose 17th entry reuses dot 1 for another entry, right
    /// after the merge's first look at the queue (every 16 rows): the transaction fails just after
    /// it took the waiting append. Returns what the append heard and how the merge failed (nil if
    /// it did not).
    func failAMergeAfterItTookAnAppend(_ store: ReplicaStore) async throws -> (Heard, (any Error)?) {
        _ = try await store.merge(peerDelta(count: 1))
        let bad = peerDelta(count: 400, reusingDotOneAt: LocalWriteQueue.rowsBetweenLooks)
        let heard = queueAppend(store, payload: "{\"tap\":\"stop\"}")
        do {
            _ = try await store.merge(bad)
            return (heard, nil)
        } catch {
            return (heard, error)
        }
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
