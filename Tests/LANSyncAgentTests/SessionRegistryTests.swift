import LANSyncCore
import Testing

@testable import LANSyncAgent

/// When two connections to one peer exist, both sides must keep the same one, or each closes
/// the one the other kept and they never settle. The rule, seen from both ends.
@Suite struct SessionRegistryTests {
    static let small = ReplicaID(high: 1, low: 1)
    static let large = ReplicaID(high: 2, low: 2)

    /// What the side with `ours` decides when a connection initiated by `newBy` meets one by `oldBy`.
    static func keeps(ours: ReplicaID, peer: ReplicaID, old: ReplicaID, new: ReplicaID, stuck: Bool = false) -> Bool {
        SessionRegistry.keepsNewConnection(
            existingIsStuck: stuck,
            existingInitiatedByUs: old == ours,
            newInitiatedByUs: new == ours,
            ourReplica: ours,
            peerReplica: peer
        )
    }

    @Test func crossedDialsKeepTheOneTheSmallerReplicaInitiatedOnBothSides() {
        // The smaller replica's connection arrives second on both sides, then first.
        for (old, new) in [(Self.large, Self.small), (Self.small, Self.large)] {
            let atSmall = Self.keeps(ours: Self.small, peer: Self.large, old: old, new: new)
            let atLarge = Self.keeps(ours: Self.large, peer: Self.small, old: old, new: new)
            #expect(atSmall == atLarge)
            #expect(atSmall == (new == Self.small))
        }
    }

    @Test func aRedialFromTheSameSideReplacesTheOlderConnection() {
        #expect(Self.keeps(ours: Self.small, peer: Self.large, old: Self.large, new: Self.large))
        #expect(Self.keeps(ours: Self.large, peer: Self.small, old: Self.large, new: Self.large))
        #expect(Self.keeps(ours: Self.small, peer: Self.large, old: Self.small, new: Self.small))
    }

    @Test func aStuckConnectionLosesToANewOneWhoeverDialed() {
        // Without the outage, the larger replica's new connection would lose at the smaller one.
        #expect(!Self.keeps(ours: Self.small, peer: Self.large, old: Self.small, new: Self.large))
        #expect(Self.keeps(ours: Self.small, peer: Self.large, old: Self.small, new: Self.large, stuck: true))
    }
}
