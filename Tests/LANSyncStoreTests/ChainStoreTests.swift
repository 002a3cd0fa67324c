import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

@testable import LANSyncStore

/// Each replica's own change chain as the store keeps it (docs/signed-changes.md): extended over
/// the changes made here, its heads signed by the device, and the leaves rebuilt from what the
/// store holds — winning rows and the stubs of superseded ones — lead exactly to those heads,
/// however other replicas' writes superseded this one's and whenever the chain was extended.
@Suite struct ChainStoreTests {
    static let zeros = [UInt8](repeating: 0, count: 32)

    static func verifier(_ key: SigningKey) -> ChainVerifier {
        let publicKey = key.publicKey
        return ChainVerifier(hasher: ReplicaStore.elementHasher) {
            SigningKey.verify($0.signature, of: $0.head.signedMessage, by: publicKey)
        }
    }

    /// The store's own chain, once extended: a signed genesis, a signed head at its counter,
    /// signed points, and the leaves of every counter since the genesis leading to each.
    static func expectOwnChainVerifies(
        _ store: ReplicaStore,
        key: SigningKey,
        noChange: Set<UInt64> = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let extended = try await store.extendOwnChain()
        #expect(try store.chainHead(of: store.replica) == extended, sourceLocation: sourceLocation)
        let counter = try store.versionVector()[store.replica]
        let stored = try store.chainHead(of: store.replica)
        guard counter > 0 else {
            #expect(stored == nil, sourceLocation: sourceLocation)
            return
        }
        let head = try #require(stored?.signed, "the head is signed", sourceLocation: sourceLocation)
        #expect(head.head.counter == counter, sourceLocation: sourceLocation)
        let points = try store.chainPoints(of: store.replica)
        let verifier = Self.verifier(key)
        // Each point verifies from the genesis before it, and the head from the last genesis.
        var genesis: SignedHead?
        for point in points.map({ $0.signed }) + [head] {
            let point = try #require(point, "every point is signed", sourceLocation: sourceLocation)
            #expect(
                SigningKey.verify(point.signature, of: point.head.signedMessage, by: key.publicKey),
                sourceLocation: sourceLocation
            )
            if point.head.hash == zeros {
                genesis = point
                continue
            }
            let from = try #require(genesis, "the chain starts at a genesis", sourceLocation: sourceLocation).head
            let held = Dictionary(
                uniqueKeysWithValues: try store.chainLeaves(
                    of: store.replica,
                    from: from.counter,
                    through: point.head.counter
                )
            )
            let leaves = ((from.counter + 1)...point.head.counter).map {
                held[$0] ?? ChangeLeaf.none(replica: store.replica, counter: $0, hasher: ReplicaStore.elementHasher)
            }
            #expect(
                held.count + noChange.filter { $0 > from.counter && $0 <= point.head.counter }.count == leaves.count,
                "a leaf for every counter but those that hold no change",
                sourceLocation: sourceLocation
            )
            #expect(
                verifier.verify(from: from, leaves: leaves, to: point) == .success(point.head),
                sourceLocation: sourceLocation
            )
        }
        #expect(points.first?.head.hash == zeros, "the first point is a genesis", sourceLocation: sourceLocation)
    }

    static func store(_ number: UInt8, key: SigningKey) throws -> ReplicaStore {
        try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!).signingHeads(
            with: key
        )
    }

    static func sync(_ from: ReplicaStore, to: ReplicaStore, maxRows: Int = 4) async throws {
        while true {
            let delta = try from.delta(since: try to.versionVector(), maxRows: maxRows)
            if delta.isEmpty { return }
            _ = try await to.merge(delta)
        }
    }

    /// Preference writes overwritten here and there and entries written under one id on several
    /// replicas (a retried import), the chain extended now and then: each replica's own chain
    /// still verifies from what it keeps, whenever it was extended.
    @Test func overwrittenPreferencesAndLosingEntriesKeepTheirLeaves() async {
        await propertyCheck(count: 30, input: Gen.int(in: 0...1_000_000).array(of: 1...50)) { steps in
            do {
                let keys = (0..<3).map { _ in SigningKey(derivedFrom: KeyPair.generate()) }
                let stores = try (0..<3).map { try Self.store(UInt8($0 + 1), key: keys[$0]) }
                // One extends its chain in its small commits, as while an agent runs.
                stores[0].extendChainInCommits(true)
                var now: UInt64 = 1_000
                for step in steps {
                    now += UInt64(step % 3)
                    let store = stores[step % 3]
                    switch (step / 3) % 5 {
                    case 0:
                        _ = try await store.setPreferences(
                            [PreferenceRequest(key: "k\(step / 15 % 2)", value: step % 5 == 0 ? nil : "\(step)")],
                            now: now
                        )
                    case 1:
                        _ = try await store.append(
                            [AppendRequest(id: "id-\(step / 15 % 3)", stream: "taps", payload: "\(step)")],
                            now: now
                        )
                    case 2:
                        _ = try await store.append([AppendRequest(stream: "taps", payload: "\(step)")], now: now)
                    case 3:
                        try await store.extendOwnChain()
                    default:
                        try await Self.sync(stores[(step / 15) % 3], to: store)
                    }
                }
                for _ in 0..<2 { for from in stores { for to in stores { try await Self.sync(from, to: to) } } }
                for (store, key) in zip(stores, keys) { try await Self.expectOwnChainVerifies(store, key: key) }
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    /// While asked (an agent runs), a small commit extends and signs the chain itself: the head
    /// is at the replica's counter when the write returns, and the store knows that the chain
    /// covers every write it knows of. A commit of more changes than the limit, a chain already
    /// further behind, and another process's write leave the chain to `extendOwnChain`.
    @Test func smallCommitsExtendTheChainThemselvesWhileAsked() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let store = try Self.store(1, key: key)
        func head() throws -> (counter: UInt64, signed: Bool, replica: UInt64) {
            let head = try store.chainHead(of: store.replica)
            let signed =
                head?.signed.map { SigningKey.verify($0.signature, of: $0.head.signedMessage, by: key.publicKey) }
                ?? false
            return (head?.head.counter ?? 0, signed, try store.versionVector()[store.replica])
        }
        _ = try await store.append([AppendRequest(stream: "taps", payload: "0")], now: 1_000)
        #expect(try head().counter == 0, "not asked yet: the commit leaves the chain alone")
        #expect(!store.chainCoversKnownWrites)

        store.extendChainInCommits(true)
        _ = try await store.append([AppendRequest(stream: "taps", payload: "1")], now: 1_001)
        #expect(try head() == (2, true, 2), "the commit extended the chain over both changes")
        #expect(!store.chainCoversKnownWrites, "what was written before the store opened is not known to be covered")
        try await store.extendOwnChain()
        #expect(store.chainCoversKnownWrites)
        for step in 0..<6 {
            if step % 2 == 0 {
                _ = try await store.append(
                    (0...step).map { AppendRequest(stream: "taps", payload: "\($0)") },
                    now: 1_010 + UInt64(step)
                )
            } else {
                _ = try await store.setPreferences(
                    [PreferenceRequest(key: "theme", value: "\"\(step)\"")],
                    now: 1_010 + UInt64(step)
                )
            }
            let now = try head()
            #expect(now.counter == now.replica && now.signed, "step \(step): \(now)")
            #expect(store.chainCoversKnownWrites)
        }

        // More changes than the limit: left to `extendOwnChain`, and so is the next small commit.
        _ = try await store.append(
            (0..<Int(ChainCoverage.limit) + 1).map { AppendRequest(stream: "taps", payload: "\($0)") },
            now: 2_000
        )
        #expect(try head().counter < head().replica)
        #expect(!store.chainCoversKnownWrites)
        _ = try await store.append([AppendRequest(stream: "taps", payload: "after")], now: 2_001)
        #expect(try head().counter < head().replica)
        try await store.extendOwnChain()
        #expect(try head().counter == head().replica && store.chainCoversKnownWrites)

        store.noteWriteByAnotherProcess()
        #expect(!store.chainCoversKnownWrites)
        try await store.extendOwnChain()
        #expect(store.chainCoversKnownWrites)

        store.extendChainInCommits(false)
        _ = try await store.append([AppendRequest(stream: "taps", payload: "off")], now: 3_000)
        #expect(try head().counter < head().replica && !store.chainCoversKnownWrites)
        try await Self.expectOwnChainVerifies(store, key: key)
        #expect(store.chainCoversKnownWrites)

        // Without the device's key there is nothing to sign with: commits leave the chain alone.
        let unsigned = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 2, count: 16))!)
        unsigned.extendChainInCommits(true)
        _ = try await unsigned.append([AppendRequest(stream: "taps", payload: "0")], now: 1_000)
        #expect(try unsigned.chainHead(of: unsigned.replica) == nil)
    }

    /// Extensions read the replica beside the writer and store what they made afterwards; with
    /// commits extending the chain meanwhile (and bulk commits that do not), each stores only what
    /// still follows from the head it read: the stored head never moves back, and the chain
    /// verifies whole.
    @Test func extensionsRacingCommitsKeepOneChain() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let path = NSTemporaryDirectory() + "chain-race-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try ReplicaStore.openOrCreate(
            path: path,
            device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
        ).0.signingHeads(with: key)
        store.extendChainInCommits(true)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for step in 0..<300 {
                    let count = step % 50 == 49 ? 100 : 1 + step % 3
                    _ = try await store.append(
                        (0..<count).map { AppendRequest(stream: "taps", payload: "\($0)") },
                        now: 1_000 + UInt64(step)
                    )
                }
            }
            for _ in 0..<2 {
                tasks.addTask { for _ in 0..<100 { try await store.extendOwnChain() } }
            }
            tasks.addTask {
                var seen: UInt64 = 0
                for _ in 0..<2_000 {
                    let counter = try store.chainHead(of: store.replica)?.head.counter ?? 0
                    #expect(counter >= seen, "the stored head moved back from \(seen) to \(counter)")
                    seen = max(seen, counter)
                    await Task.yield()
                }
            }
            try await tasks.waitForAll()
        }
        try await Self.expectOwnChainVerifies(store, key: key)
        #expect(store.chainCoversKnownWrites)
    }

    /// A large commit keeps a signed point at every 256th counter (where catch-ups are cut).
    @Test func aLargeCommitKeepsASignedPointEvery256Changes() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let store = try Self.store(1, key: key)
        _ = try await store.append((0..<600).map { AppendRequest(stream: "metrics", payload: "\($0)") }, now: 1_000)
        try await Self.expectOwnChainVerifies(store, key: key)
        #expect(try store.chainPoints(of: store.replica).map(\.head.counter) == [0, 256, 512])
    }

    /// Large changes get points closer together: at most 1 MiB of changes between two, so that a
    /// range and its signature fit in one wire message.
    @Test func largeChangesGetAPointEveryMebibyte() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let store = try Self.store(1, key: key)
        let payload = "\"" + String(repeating: "x", count: 60_000) + "\""
        // Three commits of 10 entries of about 60 kB: 1.8 MB in all.
        for commit in 0..<3 {
            _ = try await store.append(
                (0..<10).map { _ in AppendRequest(stream: "photos", payload: payload) },
                now: UInt64(1_000 + commit)
            )
        }
        try await Self.expectOwnChainVerifies(store, key: key)
        #expect(try store.chainPoints(of: store.replica).map(\.head.counter) == [0, 17])
    }

    /// Opened without the device's key (a tool that only has the database), a store keeps its
    /// heads unsigned; the next extension with the key signs them.
    @Test func headsKeptWithoutTheKeyAreSignedByTheNextExtensionWithIt() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let unsigned = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!)
        _ = try await unsigned.append((0..<300).map { AppendRequest(stream: "metrics", payload: "\($0)") }, now: 1_000)
        #expect(try await unsigned.extendOwnChain()?.signature == nil)
        #expect(try unsigned.chainHead(of: unsigned.replica)?.signature == nil)
        #expect(try unsigned.chainPoints(of: unsigned.replica).allSatisfy { $0.signature == nil })
        let signing = unsigned.signingHeads(with: key)
        _ = try await signing.setPreferences([PreferenceRequest(key: "theme", value: "\"dark\"")], now: 2_000)
        #expect(try await signing.extendOwnChain()?.signature != nil)
        #expect(try signing.chainPoints(of: signing.replica).allSatisfy { $0.signature != nil })
        try await Self.expectOwnChainVerifies(signing, key: key)
    }

    /// A replica upgraded from schema 2 with changes of its own starts its chain at a genesis at
    /// the counter it had reached (they were written unsigned); the changes after it verify.
    @Test func anUpgradedReplicaStartsItsChainAtAGenesis() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let path = NSTemporaryDirectory() + "chain-upgrade-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let (created, _) = try ReplicaStore.openOrCreate(
            path: path,
            device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
        )
        _ = try await created.append((0..<5).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        let replica = created.replica
        try await created.writer.write { db in
            // Back to what schema 2 held: no chain, no stubs.
            try db.execute(
                sql: """
                    DROP TABLE chain_heads; DROP TABLE chain_points; DROP TABLE preference_stubs; DROP TABLE entry_stubs;
                    DROP TABLE row_stubs; ALTER TABLE app_ops DROP COLUMN stub;
                    DELETE FROM grdb_migrations WHERE identifier IN ('v3 signed changes', 'v4 protocol 4 genesis');
                    PRAGMA user_version = 2;
                    """
            )
        }
        try created.writer.close()
        let store = try ReplicaStore.open(path: path).signingHeads(with: key)
        let genesis = try #require(try store.chainHead(of: replica))
        #expect(genesis.head.counter == 5 && genesis.head.hash == Self.zeros && genesis.signature == nil)
        _ = try await store.append((0..<3).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 2_000)
        try await Self.expectOwnChainVerifies(store, key: key)
        #expect(try store.chainPoints(of: replica).map(\.head.counter) == [5])
    }

    /// A replica upgraded from schema 3 (protocol version 3) starts its chain again at a genesis at
    /// the counter it had reached: peers hold its earlier changes in version 3's form, whose
    /// leaves are not its own. Its earlier points go; the changes after the genesis verify.
    @Test func theProtocol4UpgradeStartsTheChainAgain() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let path = NSTemporaryDirectory() + "chain-upgrade4-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let (created, _) = try ReplicaStore.openOrCreate(
            path: path,
            device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
        )
        let signing = created.signingHeads(with: key)
        _ = try await signing.append((0..<300).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        try await signing.extendOwnChain()
        #expect(try signing.chainPoints(of: signing.replica).map(\.head.counter) == [0, 256])
        let replica = created.replica
        try await created.writer.write { db in
            try db.execute(
                sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4 protocol 4 genesis'; PRAGMA user_version = 3;"
            )
        }
        try created.writer.close()
        let store = try ReplicaStore.open(path: path).signingHeads(with: key)
        let genesis = try #require(try store.chainHead(of: replica))
        #expect(genesis.head.counter == 300 && genesis.head.hash == Self.zeros && genesis.signature == nil)
        #expect(try store.chainPoints(of: replica).map(\.head.counter) == [300])
        _ = try await store.append((0..<3).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 2_000)
        try await Self.expectOwnChainVerifies(store, key: key)
        #expect(try store.chainPoints(of: replica).allSatisfy { $0.signature != nil })
    }

    /// A new replica's ID is derived from its device (`ReplicaBinding`); a replica made before
    /// (schema 7, a random ID) keeps its ID and has no nonce after the upgrade, read-only too.
    @Test func newReplicasAreDerivedAndOlderOnesKeepTheirID() async throws {
        let device = DeviceID(bytes: [UInt8](repeating: 7, count: 16))!
        let path = NSTemporaryDirectory() + "replica-id-\(UInt64.random(in: 0...UInt64.max)).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let fresh = try ReplicaStore.inMemory(device: device)
        #expect(ReplicaBinding.isDerived(fresh.replica))
        #expect(fresh.replicaNonce.map { ReplicaBinding.binds(fresh.replica, to: device, nonce: $0) } == true)
        let other = DeviceID(bytes: [UInt8](repeating: 8, count: 16))!
        #expect(fresh.replicaNonce.map { ReplicaBinding.binds(fresh.replica, to: other, nonce: $0) } == false)

        let legacy = ReplicaID(high: 0x0123_4567_89AB_CDEF, low: 42)
        #expect(!ReplicaBinding.isDerived(legacy))
        let (created, _) = try ReplicaStore.openOrCreate(path: path, device: device, choosing: .exactly(legacy))
        _ = try await created.append([AppendRequest(stream: "taps", payload: "1")], now: 1_000)
        try await created.writer.write { db in
            try db.execute(
                sql: """
                    ALTER TABLE meta DROP COLUMN replica_nonce;
                    DELETE FROM grdb_migrations WHERE identifier = 'v8 replica nonce';
                    PRAGMA user_version = 7;
                    """
            )
        }
        _ = try await created.writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        try created.writer.close()
        let readOnly = try ReplicaStore.openReadOnly(path: path)
        #expect(readOnly.replica == legacy && readOnly.replicaNonce == nil)
        try readOnly.writer.close()
        let upgraded = try ReplicaStore.open(path: path)
        #expect(upgraded.replica == legacy && upgraded.replicaNonce == nil)
        #expect(try upgraded.status().entries == 1)
    }

    /// Counters of this replica that a version-3 peer claimed without changes take the "none"
    /// leaf: the chain runs on through them, and what follows verifies.
    @Test func claimedCountersWithoutChangesTakeTheNoneLeaf() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let store = try Self.store(1, key: key)
        _ = try await store.append((0..<3).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        _ = try await store.merge(Delta(coverage: [.init(replica: store.replica, from: 3, through: 10)]))
        #expect(try store.versionVector()[store.replica] == 10)
        _ = try await store.append([AppendRequest(stream: "taps", payload: "after")], now: 2_000)
        try await Self.expectOwnChainVerifies(store, key: key, noChange: Set(4...10))
        #expect(try store.chainPoints(of: store.replica).map(\.head.counter) == [0])
    }

    /// A change is kept by its dot: tampering with what is stored (here, an overwritten
    /// preference's stub) breaks the chain, so the check above can fail.
    @Test func aTamperedStubNoLongerVerifies() async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let store = try Self.store(1, key: key)
        _ = try await store.setPreferences([PreferenceRequest(key: "theme", value: "\"dark\"")], now: 1_000)
        _ = try await store.setPreferences([PreferenceRequest(key: "theme", value: "\"light\"")], now: 2_000)
        let head = try #require(try await store.extendOwnChain()?.signed)
        try await store.writer.write { db in try db.execute(sql: "UPDATE preference_stubs SET hlc = hlc + 1") }
        let leaves = try store.chainLeaves(of: store.replica, from: 0, through: 2).map(\.leaf)
        #expect(
            Self.verifier(key).verify(from: .genesis(of: store.replica), leaves: leaves, to: head)
                == .failure(.hashMismatch(counter: 2))
        )
    }
}
