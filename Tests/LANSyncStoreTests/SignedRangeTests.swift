import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

@testable import LANSyncStore

/// Signed ranges between stores, without the wire (docs/signed-changes.md, step 3): an origin's
/// changes, superseded ones included as stubs, reach a receiver through a relay, and every store
/// on the way keeps what rebuilds the origin's leaves exactly, so the origin's signed head
/// verifies there (`ProvenanceCheck`). A relay that says a live change lost gets its range left
/// uncounted.
@Suite struct SignedRangeTests {
    typealias Replica = AppTableConvergenceTests.Replica
    static let hasher = ReplicaStore.elementHasher
    static let check = ProvenanceCheck(hasher: hasher) {
        SigningKey.verify($0.signature, of: $0.head.signedMessage, by: $1)
    }

    /// Every range `from` holds beyond `known`, whole: one delta.
    static func everything(_ from: ReplicaStore, beyond known: VersionVector = VersionVector()) throws -> Delta {
        var delta = Delta()
        for (replica, counter) in try from.versionVector().counters where counter > known[replica] {
            let range = try from.signedRange(of: replica, after: known[replica], through: counter)
            delta.entries += range.entries
            delta.preferences += range.preferences
            delta.rows += range.rows
            delta.coverage += range.coverage
            delta.preferenceStubs += range.preferenceStubs
            delta.lostCells.merge(range.lostCells) { a, _ in a }
        }
        return delta
    }

    /// Sync in signed ranges: what `to` lacks of every replica, in one delta, checked and merged
    /// as version 4 will (again, when a range was left uncounted because the change that
    /// superseded part of it came in another range).
    static func ship(_ from: ReplicaStore, to: ReplicaStore, keys: [ReplicaID: [UInt8]]) async throws {
        try await from.extendOwnChain()
        for _ in 0..<3 {
            let delta = try everything(from, beyond: try to.versionVector())
            if delta.isEmpty { return }
            _ = try await to.mergeSigned(delta, keys: keys)
        }
    }

    static func allLeaves(_ store: ReplicaStore, of replica: ReplicaID) throws -> [UInt64: [UInt8]] {
        let counter = try store.versionVector()[replica]
        guard counter > 0 else { return [:] }
        return Dictionary(uniqueKeysWithValues: try store.chainLeaves(of: replica, from: 0, through: counter))
    }

    /// Two writers edit the same rows and preferences and sync with each other in signed ranges
    /// (so each holds changes the other's superseded); a relay then takes both whole from one of
    /// them, and a receiver takes them from the relay. Relay and receiver hold leaves equal to the writers', each writer's signed
    /// head verifies against what the receiver got, and everyone ends with the same state.
    @Test func rangesThroughARelayKeepTheOriginsLeaves() async {
        await propertyCheck(count: 25, input: Gen.int(in: 0...1_000_000).array(of: 4...50)) { steps in
            do {
                let writers = [try Replica(1), try Replica(2)]
                let relay = try Replica(3)
                let receiver = try Replica(4)
                let keys = Dictionary(uniqueKeysWithValues: writers.map { ($0.store.replica, $0.key.publicKey) })
                var now: UInt64 = 1_000_000
                for step in steps {
                    now += UInt64(1 + step % 3)
                    let writer = writers[step % 2]
                    switch (step / 2) % 4 {
                    case 0, 1: _ = try await AppTableConvergenceTests.write(writer, step / 8, now: now)
                    case 2:
                        _ = try await writer.store.setPreferences(
                            [PreferenceRequest(key: "k\(step / 8 % 2)", value: step % 5 == 0 ? nil : "\(step)")],
                            now: now
                        )
                    default: try await Self.ship(writers[1 - step % 2].store, to: writer.store, keys: keys)
                    }
                }
                for (a, b) in [(0, 1), (1, 0)] {
                    try await Self.ship(writers[a].store, to: writers[b].store, keys: keys)
                }
                try await Self.ship(writers[0].store, to: relay.store, keys: keys)
                let sent = try Self.everything(relay.store)
                try await Self.ship(relay.store, to: receiver.store, keys: keys)
                let digest = try writers[0].store.status().digest
                for store in [relay.store, receiver.store] {
                    #expect(try store.status().digest == digest)
                    #expect(
                        try store.versionVector() == writers[0].store.versionVector(),
                        "every range counted: every claim held"
                    )
                }
                let carried = sent.leaves(hasher: Self.hasher)
                for writer in writers {
                    let replica = writer.store.replica
                    let origin = try Self.allLeaves(writer.store, of: replica)
                    #expect(try Self.allLeaves(relay.store, of: replica) == origin)
                    #expect(try Self.allLeaves(receiver.store, of: replica) == origin)
                    guard let head = try await writer.store.extendOwnChain()?.signed else { continue }
                    let genesis = try #require(try writer.store.chainPoints(of: replica).first?.signed)
                    let range = ProvenanceCheck.Range(
                        replica: replica,
                        from: 0,
                        through: head.head.counter,
                        signature: head.signature,
                        genesis: .init(counter: genesis.head.counter, signature: genesis.signature)
                    )
                    #expect(
                        Self.check.check([range], verified: [:], keys: [replica: writer.key.publicKey], leaves: carried)
                            == .success([.verified(head.head)])
                    )
                }
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    /// Batches of signed ranges, each ending at a signed point, bring a peer up to date however
    /// small the batches, and what they carry verifies: 600 appends (points at 256 and 512) and
    /// some preference overwrites, sent in batches of at most 100 rows where a range allows.
    @Test func batchesEndAtSignedPointsAndBringAPeerUpToDate() async throws {
        let writer = try Replica(1)
        _ = try await writer.store.append((0..<600).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        for index in 0..<5 {
            _ = try await writer.store.setPreferences(
                [PreferenceRequest(key: "theme", value: "\"v\(index)\"")],
                now: 2_000 + UInt64(index)
            )
        }
        try await writer.store.extendOwnChain()
        let keys = [writer.store.replica: writer.key.publicKey]
        let peer = try Replica(2)
        var batches = 0
        while true {
            let delta = try writer.store.signedDelta(since: try peer.store.versionVector(), maxRows: 100)
            if delta.isEmpty { break }
            #expect(delta.coverage.allSatisfy { [256, 512, 605].contains($0.through) })
            _ = try await peer.store.mergeSigned(delta, keys: keys)
            batches += 1
            #expect(batches < 10)
        }
        #expect(batches == 3)
        #expect(try peer.store.status().digest == writer.store.status().digest)
        #expect(try peer.store.versionVector() == writer.store.versionVector())
        // The peer can now send the same ranges on, cut where it received them.
        let third = try Replica(3)
        _ = try await third.store.mergeSigned(
            try peer.store.signedDelta(since: VersionVector(), maxRows: 10_000),
            keys: keys
        )
        #expect(try third.store.status().digest == writer.store.status().digest)
    }

    /// A relay that alters, drops or invents a change of another replica, or claims its range
    /// without the rows, has its delta refused whole: nothing of it is merged.
    @Test func tamperedSignedRangesAreRefusedWhole() async throws {
        let writer = try Replica(1)
        _ = try await writer.store.append(
            (0..<4).map { AppendRequest(stream: "taps", payload: "{\"n\":\($0)}") },
            now: 1_000
        )
        _ = try await writer.store.write(now: 1_001) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('a', 'Ada')")
        }
        try await writer.store.extendOwnChain()
        let keys = [writer.store.replica: writer.key.publicKey]
        let honest = try Self.everything(writer.store)
        var altered = honest
        altered.entries[1] = Entry(
            id: altered.entries[1].id,
            stream: "taps",
            originDevice: altered.entries[1].originDevice,
            dot: altered.entries[1].dot,
            hlc: altered.entries[1].hlc,
            wallMilliseconds: altered.entries[1].wallMilliseconds,
            payload: "{\"n\":99}"
        )
        var dropped = honest
        dropped.entries.remove(at: 2)
        var withoutRows = honest
        withoutRows.entries = []
        withoutRows.rows = []
        var unsigned = honest
        unsigned.coverage = honest.coverage.map { .init(replica: $0.replica, from: $0.from, through: $0.through) }
        for tampered in [altered, dropped, withoutRows, unsigned] {
            let receiver = try Replica(2)
            await #expect(throws: StoreError.self) { try await receiver.store.mergeSigned(tampered, keys: keys) }
            #expect(try receiver.store.versionVector()[writer.store.replica] == 0)
            #expect(try receiver.store.status().entries == 0, "nothing of a refused delta is merged")
        }
        // With no key for the writer's device yet, nothing is merged and the range is asked for
        // again; with it, all is accepted.
        let receiver = try Replica(2)
        let withoutKey = try await receiver.store.mergeSigned(honest, keys: [:])
        #expect(withoutKey.rangesNotTaken == [writer.store.replica])
        #expect(try receiver.store.status().entries == 0 && receiver.store.versionVector()[writer.store.replica] == 0)
        _ = try await receiver.store.mergeSigned(honest, keys: keys)
        #expect(try receiver.store.status().digest == writer.store.status().digest)
        #expect(
            try receiver.store.verifiedHeads()[writer.store.replica]
                == writer.store.chainHead(of: writer.store.replica)?.head
        )
    }

    /// A change every cell of which a relay called lost is kept as a stub of a change nothing of
    /// which wins; when the honest copy comes and wins, the change is live, and a range of it
    /// carries it once, live (it went both ways at once, naming one dot twice, and receivers
    /// refused the delta as malformed: group simulator, honest seed 121418).
    @Test func aChangeCalledLostWholeThatWinsAfterAllIsSentOnceLive() async throws {
        let writer = try Replica(1)
        _ = try await writer.store.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name, weight) VALUES ('a', 'Ada', 61.5)")
        }
        _ = try await writer.store.write(now: 1_001) { db in
            try db.execute(sql: "UPDATE athletes SET name = 'Bea' WHERE id = 'a'")
        }
        let honest = try Self.everything(writer.store)
        var hidden = honest
        let index = try #require(hidden.rows.firstIndex { $0.values.map(\.column) == ["name"] })
        let change = hidden.rows[index]
        let lost = change.values.map { RowChange.lost($0, hasher: Self.hasher) }
        hidden.lostCells[change.dot] = lost
        hidden.rows[index] = change.without(lost)
        let fooled = try Replica(2)
        _ = try await fooled.store.merge(hidden)
        _ = try await fooled.store.merge(honest)
        #expect(try fooled.store.openClaims().isEmpty)
        #expect(try fooled.store.status().digest == writer.store.status().digest)

        let sent = try Self.everything(fooled.store)
        #expect(sent.rows.filter { $0.dot == change.dot }.count == 1, "the change goes once")
        #expect(sent.rows.first { $0.dot == change.dot } == change, "live, whole")
        #expect(sent.lostCells[change.dot] == nil)
        #expect(sent.problem() == nil)
        #expect(
            try Self.allLeaves(fooled.store, of: writer.store.replica)
                == Self.allLeaves(writer.store, of: writer.store.replica)
        )
        let receiver = try Replica(3)
        _ = try await receiver.store.merge(sent)
        #expect(try receiver.store.status().digest == writer.store.status().digest)
    }

    /// A relay that calls a live cell, or a live preference write, lost: the receiver counts the
    /// range (an honest sender's claim may rest on a change further along the chain, which a
    /// range cut before it cannot carry) but keeps the claim open; the honest copy of the range,
    /// which a session asks for once it lacks nothing the peer holds, closes it.
    @Test func aLiveChangeCalledLostStaysAnOpenClaimUntilTheTruthComes() async throws {
        let writer = try Replica(1)
        _ = try await writer.store.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name, weight) VALUES ('a', 'Ada', 61.5)")
        }
        _ = try await writer.store.setPreferences([PreferenceRequest(key: "theme", value: "\"dark\"")], now: 1_001)
        let honest = try Self.everything(writer.store)
        let counter = try writer.store.versionVector()[writer.store.replica]

        // The name, which wins, passed off as lost.
        var hidden = honest
        let index = try #require(hidden.rows.firstIndex { !$0.values.isEmpty })
        let change = hidden.rows[index]
        let name = try #require(change.values.first { $0.column == "name" })
        hidden.lostCells[change.dot] = [RowChange.lost(name, hasher: Self.hasher)]
        hidden.rows[index] = change.without([RowChange.lost(name, hasher: Self.hasher)])
        #expect(
            hidden.leaves(hasher: Self.hasher) == honest.leaves(hasher: Self.hasher),
            "the leaves still match the origin's"
        )
        let fooled = try Replica(2)
        let opened = try await fooled.store.merge(hidden)
        #expect(opened.claimsOpened == [writer.store.replica])
        #expect(opened.rangesNotTaken.isEmpty)
        #expect(try fooled.store.openClaims() == [writer.store.replica: change.dot.counter])
        #expect(try fooled.store.status().digest != writer.store.status().digest)
        _ = try await fooled.store.merge(honest)
        #expect(try fooled.store.openClaims().isEmpty, "the truth closed the claim")
        #expect(try fooled.store.versionVector()[writer.store.replica] == counter)
        #expect(try fooled.store.status().digest == writer.store.status().digest)

        // The preference write, which wins, passed off as superseded.
        var stubbed = honest
        let write = try #require(stubbed.preferences.first)
        stubbed.preferences = []
        stubbed.preferenceStubs = [PreferenceStub(write, hasher: Self.hasher)]
        let other = try Replica(3)
        #expect(try await other.store.merge(stubbed).claimsOpened == [writer.store.replica])
        #expect(try other.store.openClaims() == [writer.store.replica: write.dot.counter])
        #expect(try other.store.preferences(withPrefix: "theme").isEmpty)
        _ = try await other.store.merge(honest)
        #expect(try other.store.openClaims().isEmpty)
        #expect(try other.store.status().digest == writer.store.status().digest)
        #expect(
            try Self.allLeaves(other.store, of: writer.store.replica)
                == Self.allLeaves(writer.store, of: writer.store.replica),
            "the false stub went: one leaf per counter"
        )
    }

    /// A range sent again, below where the receiver verified its writer's chain, is not checked
    /// by its signature (which covers only what lies above): a relay that alters a change there
    /// (a record given a later clock and another value) has its delta refused whole, while the
    /// honest copy passes.
    @Test func anAlteredChangeBelowTheVerifiedHeadIsRefused() async throws {
        let writer = try Replica(1)
        _ = try await writer.store.setPreferences([PreferenceRequest(key: "theme", value: "\"dark\"")], now: 1_000)
        _ = try await writer.store.append((0..<5).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_001)
        try await writer.store.extendOwnChain()
        let keys = [writer.store.replica: writer.key.publicKey]
        let receiver = try Replica(2)
        let honest = try writer.store.signedDelta(since: VersionVector(), maxRows: 100)
        _ = try await receiver.store.mergeSigned(honest, keys: keys)
        let digest = try receiver.store.status().digest
        #expect(digest == (try writer.store.status().digest))

        var altered = honest
        let write = try #require(altered.preferences.first)
        altered.preferences[0] = PreferenceWrite(
            key: write.key,
            value: "\"light\"",
            originDevice: write.originDevice,
            dot: write.dot,
            hlc: HybridTimestamp(physicalMilliseconds: 9_000, logical: 0),
            wallMilliseconds: 9_000
        )
        await #expect(throws: StoreError.self) { try await receiver.store.mergeSigned(altered, keys: keys) }
        #expect(try receiver.store.status().digest == digest, "nothing of it merged")
        _ = try await receiver.store.mergeSigned(honest, keys: keys)
        #expect(try receiver.store.status().digest == digest)
    }

    /// A delta that carries a preference write and a stub of it under one counter (found by the
    /// Byzantine group simulator: it trapped the receiver's range check on an overflow) is refused.
    @Test func twoChangesUnderOneCounterAreRefusedNotATrap() async throws {
        let writer = try Replica(1)
        _ = try await writer.store.setPreferences([PreferenceRequest(key: "theme", value: "\"dark\"")], now: 1_000)
        try await writer.store.extendOwnChain()
        var doubled = try writer.store.signedDelta(since: VersionVector(), maxRows: 100)
        let write = try #require(doubled.preferences.first)
        doubled.preferenceStubs.append(PreferenceStub(write, hasher: Self.hasher))
        let receiver = try Replica(2)
        await #expect(throws: StoreError.self) {
            try await receiver.store.mergeSigned(doubled, keys: [writer.store.replica: writer.key.publicKey])
        }
        // The same as a session merges it: its chain's hashes worked out ahead first (which runs
        // before anything refused the delta, and must not trap on it either).
        let folded = try receiver.store.foldingAhead(receiver.store.check(doubled, signed: true), expected: [:])
        await #expect(throws: StoreError.self) {
            try await receiver.store.mergeSigned(folded.checked, keys: [writer.store.replica: writer.key.publicKey])
        }
        #expect(try receiver.store.versionVector()[writer.store.replica] == 0)
    }
}
