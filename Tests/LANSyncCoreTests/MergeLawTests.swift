import LANSyncCore
import LANSyncTestSupport
import PropertyBased
import Testing

/// The CRDT laws, checked on generated histories of three replicas (see `Scenario`).
@Suite struct MergeLawTests {
    static let operations = Gen.int(in: 0...10_000).array(of: 0...60)

    @Test func mergeIsCommutative() async {
        await propertyCheck(input: Self.operations) { operations in
            let s = Scenario(operations: operations)
            var ab = s.replicas[0]
            ab.merge(s.replicas[1])
            var ba = s.replicas[1]
            ba.merge(s.replicas[0])
            expectSameState(ab, ba)
        }
    }

    @Test func mergeIsAssociative() async {
        await propertyCheck(input: Self.operations) { operations in
            let s = Scenario(operations: operations)
            let (a, b, c) = (s.replicas[0], s.replicas[1], s.replicas[2])
            let left = Scenario.merged(Scenario.merged(a, b), c)
            let right = Scenario.merged(a, Scenario.merged(b, c))
            expectSameState(left, right)
        }
    }

    @Test func mergeIsIdempotent() async {
        await propertyCheck(input: Self.operations) { operations in
            let s = Scenario(operations: operations)
            var a = s.replicas[0]
            let before = a
            a.merge(before)
            #expect(a.digest == before.digest)
            #expect(a.versionVector == before.versionVector)
            // A delta applied a second time changes nothing.
            var b = s.replicas[1]
            let delta = s.replicas[2].delta(since: b.versionVector)
            b.merge(delta)
            let again = b.merge(delta)
            #expect(!again.changedAnything)
        }
    }

    /// Any delivery order of the deltas, each delivered twice, reaches the digest of the union.
    @Test func anyDeliveryOrderConverges() async {
        await propertyCheck(input: Self.operations, Gen.int(in: 0...1_000_000).array(of: 0...200)) { operations, keys in
            let s = Scenario(operations: operations)
            let union = Scenario.merged(s.replicas[0], s.replicas[1], s.replicas[2])
            let deliveries = Scenario.ordered(s.deltas + s.deltas, by: keys)
            var receiver = Scenario.fresh()
            for delta in deliveries { receiver.merge(delta) }
            expectSameState(receiver, union, comparingVectors: false)
        }
    }

    /// For a replica that pulls deltas computed for its own vector (how sync works), the vector
    /// never claims more than the state holds: whenever it covers a dot, the state holds that write
    /// or one that supersedes it. This is what lets a sender skip superseded rows.
    @Test func versionVectorIsSoundForTheIntendedReceiver() async {
        await propertyCheck(input: Self.operations) { operations in
            let s = Scenario(operations: operations)
            for replica in s.replicas {
                for entry in s.entriesMade where replica.versionVector.covers(entry.dot) {
                    let held = replica.entries[entry.id]
                    #expect(held != nil && (held == entry || Entry.precedes(held!, entry)))
                }
                for write in s.writesMade where replica.versionVector.covers(write.dot) {
                    let held = replica.preferences[write.key]
                    #expect(held != nil && !PreferenceWrite.loses(held!, to: write))
                }
            }
        }
    }

    /// Deltas delivered anywhere, in any order: a delta may cover a dot whose row the sender
    /// skipped because a newer write superseded it. Then that newer write is not covered yet, so
    /// the receiver still asks for it. Invariant: for each key, the greatest covered write is held
    /// (or bettered), or a write that beats it is still uncovered. When everything is covered,
    /// everything is held.
    @Test func versionVectorStaysSoundUnderAnyDelivery() async {
        await propertyCheck(input: Self.operations, Gen.int(in: 0...1_000_000).array(of: 0...200)) { operations, keys in
            let s = Scenario(operations: operations)
            var receiver = Scenario.fresh()
            let deliveries = Scenario.ordered(s.deltas, by: keys)
            for delta in deliveries {
                receiver.merge(delta)
                let vector = receiver.versionVector
                for (id, versions) in Dictionary(grouping: s.entriesMade, by: \.id) {
                    guard let best = versions.filter({ vector.covers($0.dot) }).min(by: Entry.precedes) else {
                        continue
                    }
                    let held = receiver.entries[id]
                    let holdsIt = held != nil && (held == best || Entry.precedes(held!, best))
                    let betterPending = versions.contains { Entry.precedes($0, best) && !vector.covers($0.dot) }
                    #expect(holdsIt || betterPending)
                }
                for (key, writes) in Dictionary(grouping: s.writesMade, by: \.key) {
                    guard let best = writes.filter({ vector.covers($0.dot) }).max(by: PreferenceWrite.loses) else {
                        continue
                    }
                    let held = receiver.preferences[key]
                    let holdsIt = held != nil && !PreferenceWrite.loses(held!, to: best)
                    let betterPending = writes.contains {
                        PreferenceWrite.loses(best, to: $0) && !vector.covers($0.dot)
                    }
                    #expect(holdsIt || betterPending)
                }
            }
            // Every full delta was delivered: everything is covered and held.
            let union = Scenario.merged(s.replicas[0], s.replicas[1], s.replicas[2])
            #expect(receiver.versionVector == union.versionVector)
            #expect(receiver.digest == union.digest)
        }
    }

    /// A delta since a replica's own vector brings it to the sender's state, and nothing more is owed.
    @Test func deltaCarriesExactlyWhatIsMissing() async {
        await propertyCheck(input: Self.operations) { operations in
            let s = Scenario(operations: operations)
            var a = s.replicas[0]
            let b = s.replicas[1]
            a.merge(b.delta(since: a.versionVector))
            #expect(a.versionVector.dominates(b.versionVector))
            #expect(b.delta(since: a.versionVector).isEmpty)
            let union = Scenario.merged(s.replicas[0], b)
            #expect(a.digest == union.digest)
        }
    }

    /// Two replicas hold the same elements (and, unless told otherwise, the same version vector).
    func expectSameState(
        _ a: ReplicaState,
        _ b: ReplicaState,
        comparingVectors: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(a.digest == b.digest, sourceLocation: sourceLocation)
        #expect(a.entries == b.entries, sourceLocation: sourceLocation)
        #expect(a.preferences == b.preferences, sourceLocation: sourceLocation)
        if comparingVectors { #expect(a.versionVector == b.versionVector, sourceLocation: sourceLocation) }
    }
}
