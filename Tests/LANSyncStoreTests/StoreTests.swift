import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto
import LANSyncTestSupport
import PropertyBased
import Testing

@testable import LANSyncStore

let device = DeviceID(bytes: [UInt8](repeating: 9, count: 16))!

/// A temporary directory removed when the test ends.
final class TemporaryDirectory {
    let path = NSTemporaryDirectory() + "lansync-store-\(UUID().uuidString)"
    init() { try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

func fileHash(_ path: String) throws -> [UInt8] {
    SHA256.hash([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
}

@Suite struct LocalWriteTests {
    @Test func writesSurviveReopening() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        var digest: StateDigest
        do {
            let (store, created) = try ReplicaStore.openOrCreate(path: path, device: device)
            #expect(created)
            _ = try await store.append([AppendRequest(stream: "taps", payload: "{\"s\":1}")], now: 1_000)
            _ = try await store.setPreferences([PreferenceRequest(key: "a/b", value: "1")], now: 1_001)
            digest = try store.status().digest
        }
        let reopened = try ReplicaStore.open(path: path)
        let status = try reopened.status()
        #expect(status.entries == 1)
        #expect(status.preferences == 1)
        #expect(status.digest == digest)
        #expect(try reopened.recomputeDigest() == digest)
        #expect(try reopened.integrityProblems().isEmpty)
        // Opening again for init keeps the replica ID: init changes nothing on an existing node.
        let (again, created) = try ReplicaStore.openOrCreate(path: path, device: device)
        #expect(!created)
        #expect(again.replica == reopened.replica)
    }

    @Test func appendsGetConsecutiveDotsAndRetriesAreIdempotent() async throws {
        let store = try ReplicaStore.inMemory(device: device)
        let first = try await store.append(
            [AppendRequest(stream: "taps", payload: "1"), AppendRequest(id: "tap-7", stream: "taps", payload: "2")],
            now: 5_000
        )
        #expect(first.map(\.dot.counter) == [1, 2])
        #expect(first[1].hlc > first[0].hlc)
        let retry = try await store.append([AppendRequest(id: "tap-7", stream: "taps", payload: "2")], now: 6_000)
        #expect(retry == [first[1]])
        #expect(try store.status().entries == 2)
        #expect(try store.versionVector()[store.replica] == 2)
    }

    @Test func preferencesKeepTheLastWriteAndTombstones() async throws {
        let store = try ReplicaStore.inMemory(device: device)
        _ = try await store.setPreferences([PreferenceRequest(key: "caregiver/active", value: "\"mum\"")], now: 1_000)
        // The physical clock went backwards: the HLC still orders the later write after.
        _ = try await store.setPreferences([PreferenceRequest(key: "caregiver/active", value: "\"dad\"")], now: 900)
        #expect(try store.preference(key: "caregiver/active")?.value == "\"dad\"")
        _ = try await store.setPreferences([PreferenceRequest(key: "caregiver/active", value: nil)], now: 950)
        let held = try #require(try store.preference(key: "caregiver/active"))
        #expect(held.isTombstone)
        let status = try store.status()
        #expect(status.preferences == 0)
        #expect(status.tombstones == 1)
        #expect(try store.recomputeDigest() == status.digest)
    }

    @Test func entriesAreQueriedByStreamAndTime() async throws {
        let store = try ReplicaStore.inMemory(device: device)
        for (index, stream) in ["taps", "phrases", "taps", "taps"].enumerated() {
            _ = try await store.append(
                [AppendRequest(stream: stream, payload: "\(index)")],
                now: UInt64(1_000 + index * 100)
            )
        }
        #expect(try store.entries(EntryQuery(stream: "taps")).map(\.payload) == ["0", "2", "3"])
        #expect(try store.entries(EntryQuery(stream: "taps", since: 1_100, until: 1_300)).map(\.payload) == ["2"])
        #expect(try store.entries(EntryQuery(limit: 2)).map(\.payload) == ["0", "1"])
    }
}

@Suite struct MergeTests {
    static let operations = Gen.int(in: 0...10_000).array(of: 0...50)

    /// The SQLite store follows the in-memory reference model exactly: same rows, same version
    /// vector, same digest, for any history and any delivery order.
    @Test func storeMatchesTheReferenceModel() async {
        await propertyCheck(count: 60, input: Self.operations, Gen.int(in: 0...1_000_000).array(of: 0...100)) {
            operations,
            keys in
            let s = Scenario(operations: operations)
            let deliveries = Scenario.ordered(s.deltas, by: keys)
            var model = Scenario.fresh()
            let store = try! ReplicaStore.inMemory(device: device)
            for delta in deliveries {
                let expected = model.merge(delta)
                let actual = try! await store.merge(delta).outcome
                #expect(actual == expected)
            }
            let status = try! store.status()
            #expect(status.digest == model.digest)
            #expect(try! store.recomputeDigest() == model.digest)
            var vector = status.versionVector
            vector[store.replica] = 0
            #expect(vector == model.versionVector)
            let entries = try! store.entries(EntryQuery())
            #expect(Dictionary(uniqueKeysWithValues: entries.map { ($0.id, $0) }) == model.entries)
            #expect(
                Dictionary(uniqueKeysWithValues: try! store.preferences().map { ($0.key, $0) }) == model.preferences
            )
        }
    }

    /// Bounded delta batches copy a whole replica, and an in-sync pair owes each other nothing.
    @Test func deltaBatchesReplicateEverything() async {
        await propertyCheck(count: 40, input: Self.operations, Gen.int(in: 1...7)) { operations, batchRows in
            let s = Scenario(operations: operations)
            let source = try! ReplicaStore.inMemory(device: device)
            for delta in s.deltas { _ = try! await source.merge(delta) }
            _ = try! await source.append([AppendRequest(stream: "local", payload: "1")], now: 2_000)
            let target = try! ReplicaStore.inMemory(device: device)
            var batches = 0
            while true {
                let delta = try! source.delta(since: try! target.versionVector(), maxRows: batchRows)
                if delta.isEmpty { break }
                #expect(delta.entries.count + delta.preferences.count <= batchRows)
                #expect(delta.problem() == nil)
                _ = try! await target.merge(delta)
                batches += 1
                #expect(batches < 1_000)
                if batches >= 1_000 { break }
            }
            #expect(try! target.status().digest == source.status().digest)
            #expect(try! target.versionVector().dominates(source.versionVector()))
        }
    }

    @Test func largeDeltasAreCommittedInPacedChunksWithCoverageLast() async throws {
        let replica = ReplicaID(high: 3, low: 3)
        let entries = (1...2_500).map { counter in
            Entry(
                id: "e\(counter)",
                stream: "taps",
                originDevice: device,
                dot: Dot(replica: replica, counter: UInt64(counter)),
                hlc: HybridTimestamp(physicalMilliseconds: 10, logical: UInt16(counter)),
                wallMilliseconds: 10,
                payload: "1"
            )
        }
        let writes = [
            PreferenceWrite(
                key: "k",
                value: "1",
                originDevice: device,
                dot: Dot(replica: replica, counter: 2_501),
                hlc: HybridTimestamp(physicalMilliseconds: 11, logical: 0),
                wallMilliseconds: 11
            )
        ]
        let delta = Delta(
            entries: entries,
            preferences: writes,
            coverage: [.init(replica: replica, from: 0, through: 2_501)]
        )
        var pacer = MergePacer(cost: MergeCost())
        var chunks = [Delta]()
        while let share = pacer.next(of: delta, appWriting: true) {
            chunks.append(
                Delta(
                    entries: Array(delta.entries[share.entries]),
                    preferences: Array(delta.preferences[share.preferences]),
                    coverage: share.isLast ? delta.coverage : []
                )
            )
            pacer.record(share, merged: (share.entries.count, share.preferences.count, 0), elapsed: .milliseconds(100))
        }
        #expect(chunks.count > 3)
        // The target at the first guess.
        #expect(chunks[0].entries.count == MergePacer(cost: MergeCost()).rows(appWriting: true))
        #expect(chunks[1].entries.count < chunks[0].entries.count)  // rows measured slower: shorter transactions
        #expect(chunks.dropLast().allSatisfy { $0.coverage.isEmpty })
        #expect(chunks.last?.coverage == delta.coverage)
        #expect(chunks.flatMap(\.entries) == entries)
        #expect(chunks.flatMap(\.preferences) == writes)

        // A transaction that stopped early (a local write rode along): the next share starts
        // where it stopped, and only a share merged to the end carries the coverage.
        let small = Delta(
            entries: Array(entries.prefix(300)),
            coverage: [.init(replica: replica, from: 0, through: 300)]
        )
        let cost = MergeCost()
        var partial = MergePacer(cost: cost)
        guard let first = partial.next(of: small, appWriting: true) else {
            Issue.record("no first share")
            return
        }
        #expect(first.isLast)  // 300 rows fit in one transaction at the first guess
        partial.record(first, merged: (100, 0, 0), elapsed: .microseconds(500))
        guard let second = partial.next(of: small, appWriting: true) else {
            Issue.record("no second share")
            return
        }
        #expect(second.entries.lowerBound == 100)
        #expect(second.isLast)
        partial.record(second, merged: (second.entries.count, second.preferences.count, 0), elapsed: .milliseconds(5))
        #expect(partial.next(of: small, appWriting: true) == nil)
        // What a row cost is remembered for the next merge.
        #expect(MergePacer(cost: cost).rows(appWriting: true) != MergePacer(cost: MergeCost()).rows(appWriting: true))
        // While the app is not writing, transactions are four times as long: 4 ms and 16 ms at 10 µs a row.
        let tenMicroseconds = MergeCost()
        tenMicroseconds.perRow = 10_000
        #expect(MergePacer(cost: tenMicroseconds).rows(appWriting: true) == 400)
        #expect(MergePacer(cost: tenMicroseconds).rows(appWriting: false) == 1_600)
        // The app counts as writing from its first write on (for `writingWindow`), not before.
        let queue = LocalWriteQueue()
        #expect(!queue.appIsWriting)
        queue.add(LocalWrite(apply: { _ in {} }, fail: { _ in }))
        #expect(queue.appIsWriting)
        let store = try ReplicaStore.inMemory(device: device)
        #expect(try await store.merge(delta).outcome == MergeOutcome(entriesAdded: 2_500, preferencesChanged: 1))
        #expect(try store.versionVector()[replica] == 2_501)
    }

    /// Large payloads: every batch stays within its byte budget (at least one row), and the
    /// batches still copy everything.
    @Test func deltaBatchesAreBoundedInBytes() async throws {
        let source = try ReplicaStore.inMemory(device: device)
        let big = "\"" + String(repeating: "x", count: 40_000) + "\""
        _ = try await source.append((0..<60).map { _ in AppendRequest(stream: "photos", payload: big) }, now: 1_000)
        _ = try await source.setPreferences([PreferenceRequest(key: "board/layout", value: big)], now: 1_001)
        let target = try ReplicaStore.inMemory(device: device)
        var batches = 0
        while true {
            let delta = try source.delta(since: try target.versionVector(), maxRows: 1_000, maxBytes: 200_000)
            if delta.isEmpty { break }
            let bytes =
                delta.entries.map { $0.payload.utf8.count }.reduce(0, +)
                + delta.preferences.map { $0.value?.utf8.count ?? 0 }.reduce(0, +)
            #expect(bytes <= 200_000)
            #expect(delta.problem() == nil)
            _ = try await target.merge(delta)
            batches += 1
            #expect(batches < 100)
            if batches >= 100 { break }
        }
        #expect(batches >= 12)
        #expect(try target.status().digest == source.status().digest)
        // A single row larger than the budget still travels, alone.
        let lone = try source.delta(since: VersionVector(), maxRows: 1_000, maxBytes: 10)
        #expect(lone.entries.count == 1 && lone.coverage.first?.through == 1)
    }

    /// A bound leaves out rows beyond it, and every row of a replica it does not name: the agent
    /// sends no more than it held when a sending run started, less the rows it holds back.
    @Test func deltaStopsAtItsBound() async throws {
        let source = try ReplicaStore.inMemory(device: device)
        _ = try await source.append((0..<10).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        let ours = source.replica
        let other = ReplicaID(high: 9, low: 9)
        let entries = (1...4).map {
            Entry(
                id: "other-\($0)",
                stream: "taps",
                originDevice: device,
                dot: Dot(replica: other, counter: UInt64($0)),
                hlc: HybridTimestamp(physicalMilliseconds: 2_000 + UInt64($0), logical: 0),
                wallMilliseconds: 2_000,
                payload: "1"
            )
        }
        _ = try await source.merge(Delta(entries: entries, coverage: [.init(replica: other, from: 0, through: 4)]))
        let bounded = try source.delta(since: VersionVector([ours: 2]), upTo: VersionVector([ours: 6]), maxRows: 100)
        #expect(bounded.coverage == [.init(replica: ours, from: 2, through: 6)])
        #expect(bounded.entries.map(\.dot.counter) == [3, 4, 5, 6])
        let unbounded = try source.delta(since: VersionVector([ours: 2]), maxRows: 100)
        #expect(unbounded.entries.count == 8 + 4)
    }

    @Test func malformedDeltaIsRejectedWhole() async throws {
        let store = try ReplicaStore.inMemory(device: device)
        let before = try store.status()
        let replica = ReplicaID(high: 5, low: 5)
        let good = Entry(
            id: "good",
            stream: "taps",
            originDevice: device,
            dot: Dot(replica: replica, counter: 1),
            hlc: HybridTimestamp(physicalMilliseconds: 10, logical: 0),
            wallMilliseconds: 10,
            payload: "1"
        )
        let bad = Entry(
            id: "bad",
            stream: "Not A Stream",
            originDevice: device,
            dot: Dot(replica: replica, counter: 2),
            hlc: HybridTimestamp(physicalMilliseconds: 10, logical: 1),
            wallMilliseconds: 10,
            payload: "1"
        )
        let delta = Delta(entries: [good, bad], coverage: [.init(replica: replica, from: 0, through: 2)])
        await #expect(throws: StoreError.self) { try await store.merge(delta) }
        let after = try store.status()
        #expect(after == before)
    }

    @Test func duplicateIDsResolveTheSameWayEverywhere() async throws {
        let (a, b) = (ReplicaID(high: 1, low: 0), ReplicaID(high: 2, low: 0))
        func version(_ replica: ReplicaID, _ millis: UInt64) -> Entry {
            Entry(
                id: "session-1",
                stream: "sessions",
                originDevice: device,
                dot: Dot(replica: replica, counter: 1),
                hlc: HybridTimestamp(physicalMilliseconds: millis, logical: 0),
                wallMilliseconds: Int64(millis),
                payload: "\(millis)"
            )
        }
        let early = Delta(entries: [version(b, 10)], coverage: [.init(replica: b, from: 0, through: 1)])
        let late = Delta(entries: [version(a, 20)], coverage: [.init(replica: a, from: 0, through: 1)])
        let one = try ReplicaStore.inMemory(device: device)
        let two = try ReplicaStore.inMemory(device: device)
        _ = try await one.merge(early)
        _ = try await one.merge(late)
        _ = try await two.merge(late)
        _ = try await two.merge(early)
        #expect(try one.entry(id: "session-1")?.payload == "10")
        #expect(try two.entry(id: "session-1")?.payload == "10")
        #expect(try one.status().digest == two.status().digest)
        #expect(try one.status().entries == 1)
    }
}

/// Entries go into the replica many to a statement; a statement with one entry held already (a
/// range sent again, a relay's overlap) or an id taken (two versions of one entry) inserts
/// nothing, and each of its entries is merged alone. Either way the replica ends as if every
/// entry had been merged alone: same rows, counts and digest as a reference merged one by one.
@Suite struct EntryBatchTests {
    static let replica = ReplicaID(high: 7, low: 7)

    static func entry(_ counter: UInt64, id: String? = nil, millis: UInt64? = nil) -> Entry {
        Entry(
            id: id ?? "tap-\(counter)",
            stream: "taps",
            originDevice: device,
            dot: Dot(replica: replica, counter: counter),
            hlc: HybridTimestamp(physicalMilliseconds: millis ?? (1_000 + counter), logical: 0),
            wallMilliseconds: Int64(millis ?? (1_000 + counter)),
            payload: "{\"n\":\(counter)}"
        )
    }

    static func delta(_ entries: [Entry]) -> Delta {
        Delta(
            entries: entries,
            coverage: [.init(replica: replica, from: 0, through: entries.map(\.dot.counter).max()!)]
        )
    }

    @Test func overlapsAndTakenIdsMergeAsIfOneByOne() async throws {
        let batched = try ReplicaStore.inMemory(device: device)
        let oneByOne = try ReplicaStore.inMemory(device: device)
        let first = (1...40).map { Self.entry($0) }
        // 21…70 overlaps the first delta by 20; counter 65 carries an earlier version of tap-3
        // (the earliest version of an entry wins: it replaces the one held), counter 66 a later
        // one of tap-5 (it loses, and is kept as a losing change).
        var second = (21...70).map { Self.entry($0) }
        second[65 - 21] = Self.entry(65, id: "tap-3", millis: 500)
        second[66 - 21] = Self.entry(66, id: "tap-5", millis: 9_000)
        for delta in [Self.delta(first), Self.delta(second), Self.delta(second)] {
            let outcome = try await batched.merge(delta).outcome
            var expected = MergeOutcome()
            for entry in delta.entries {
                expected.entriesAdded += try await oneByOne.merge(Self.delta([entry])).outcome.entriesAdded
            }
            #expect(outcome == expected)
        }
        let (a, b) = (try batched.status(), try oneByOne.status())
        #expect(a.entries == b.entries && a.entries == 68, "70 counters, two of them versions of held ids")
        #expect(a.digest == b.digest)
        #expect(try batched.recomputeDigest() == a.digest)
        #expect(try batched.entry(id: "tap-3")?.dot.counter == 65)
        #expect(try batched.entry(id: "tap-5")?.dot.counter == 5)
        #expect(try batched.entries(EntryQuery()).map(\.id) == (try oneByOne.entries(EntryQuery()).map(\.id)))
    }
}

@Suite struct OpeningTests {
    @Test func missingReplicaIsNotCreatedByOpen() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        #expect(throws: StoreError.self) { try ReplicaStore.open(path: path) }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func fileThatIsNotSQLiteIsRefusedAndUntouched() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: path))
        let before = try fileHash(path)
        do {
            _ = try ReplicaStore.open(path: path)
            Issue.record("opened a file that is not a database")
        } catch {
            #expect(error.code == .notAReplica)
            #expect(error.message.contains("not a LANSync replica"))
        }
        #expect(throws: StoreError.self) { try ReplicaStore.openOrCreate(path: path, device: device) }
        #expect(try fileHash(path) == before)
    }

    @Test func otherSQLiteDatabaseIsRefusedAndUntouched() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.write {
                try $0.execute(sql: "CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x')")
            }
        }
        let before = try fileHash(path)
        do {
            _ = try ReplicaStore.openOrCreate(path: path, device: device)
            Issue.record("opened another application's database")
        } catch {
            #expect(error.code == .notAReplica)
        }
        #expect(try fileHash(path) == before)
    }

    @Test func newerSchemaIsRefusedAndUntouched() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        _ = try ReplicaStore.openOrCreate(path: path, device: device)
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA user_version = 99") }
            try queue.close()
        }
        let before = try fileHash(path)
        do {
            _ = try ReplicaStore.open(path: path)
            Issue.record("opened a replica with a newer schema")
        } catch {
            #expect(error.code == .newerSchema)
            #expect(error.message.contains("upgrade"))
        }
        #expect(try fileHash(path) == before)
    }
}

@Suite struct CheckpointTests {
    /// A long merge, its transactions back to back, would keep the WAL from ever rewinding (see
    /// `Checkpointer`): it must stay near the rewind threshold instead of growing by all it wrote.
    @Test func aLongMergeRewindsTheWAL() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        let checkpointer = try #require(store.checkpointer)
        checkpointer.rewindBytes.store(256 << 10, ordering: .relaxed)
        let replica = ReplicaID(high: 7, low: 7)
        let payload = "{\"text\":\"" + String(repeating: "x", count: 400) + "\"}"
        let count = 30_000
        let entries = (1...count).map { index in
            Entry(
                id: "e-\(index)",
                stream: "taps",
                originDevice: device,
                dot: Dot(replica: replica, counter: UInt64(index)),
                hlc: HybridTimestamp(physicalMilliseconds: 1_000 + UInt64(index), logical: 0),
                wallMilliseconds: Int64(1_000 + index),
                payload: payload
            )
        }
        // One delta, so its paced transactions follow each other with no pause between them, and
        // short ones: the app has just written (see `MergePacer`). Longer transactions leave the
        // background checkpoint time to catch up, and the WAL often rewinds by itself.
        _ = try await store.append([AppendRequest(stream: "taps", payload: "{}")], now: 1_000)
        _ = try await store.merge(
            Delta(entries: entries, coverage: [.init(replica: replica, from: 0, through: UInt64(count))])
        )
        #expect(try store.status().entries == count + 1)
        let database = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let wal = try #require(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
        // About 15 MB written; the WAL holds the transactions since the last rewind, not all of it.
        // How far past the threshold it got depends on how soon the background checkpoint ran
        // (3.5-4.0 MB alone, 5.2 MB once with the whole suite beside it), so the bound is what
        // tells a rewinding WAL from one that grew by everything: half of what the merge wrote.
        #expect(database > 12_000_000)
        #expect(wal < database / 2, "WAL of \(wal) bytes after merging \(count) entries into \(database)")
    }
}
