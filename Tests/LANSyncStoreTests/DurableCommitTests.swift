import Foundation
import GRDB
import LANSyncCore
import Testing

@testable import LANSyncStore

/// An acknowledged write survives power loss, not only a crash of the process (DESIGN.md,
/// promises 1 and 6): the writer commits at `synchronous = FULL`, which flushes the WAL at every
/// commit. GRDB's WAL setup sets NORMAL on the writer after the store's own setup has run, so the
/// store sets FULL again; a merge's transactions run at NORMAL and hand the writer back at FULL.
/// The app's writes never commit in a merge's transaction (`LocalWriteQueueTests`).
@Suite struct DurableCommitTests {
    /// The writer connection's `PRAGMA synchronous`: 2 is FULL, 1 NORMAL.
    static func synchronous(_ store: ReplicaStore) throws -> Int? {
        try store.writer.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
    }

    @Test func theWriterCommitsDurablyWhenCreatedAndWhenOpenedAgain() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        let (created, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        #expect(try Self.synchronous(created) == 2)
        let reopened = try ReplicaStore.open(path: path)
        #expect(try Self.synchronous(reopened) == 2)
    }

    @Test func aMergeHandsTheWriterBackDurableWhetherItCommitsOrFails() async throws {
        let directory = TemporaryDirectory()
        let (store, _) = try ReplicaStore.openOrCreate(path: directory.path + "/replica.sqlite", device: device)
        let peer = LocalWriteQueueTests()
        _ = try await store.merge(peer.peerDelta(count: 3_000))
        #expect(try store.versionVector()[peer.replica] == 3_000)
        #expect(try Self.synchronous(store) == 2)
        // A delta that reuses a dot fails inside the merge's first transaction (every transaction
        // takes 16 rows at least, however slow the machine): nothing of it commits.
        await #expect(throws: StoreError.self) {
            _ = try await store.merge(peer.peerDelta(count: 3_100, reusingDotOneAt: 10))
        }
        #expect(try store.status().entries == 3_000)
        #expect(try Self.synchronous(store) == 2)
        // The app's writes after it commit as before.
        _ = try await store.append([AppendRequest(stream: "local", payload: "1")], now: 2_000)
        #expect(try store.status().entries == 3_001)
    }
}
