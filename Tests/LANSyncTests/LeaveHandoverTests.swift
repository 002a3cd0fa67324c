import Foundation
import LANSync
import LANSyncCore
import LANSyncStore
import PropertyBased
import Testing

/// What a leaving device waits for (`LeaveHandover`): a member that stays holding everything the
/// device holds, not only what it wrote.
@Suite struct LeaveHandoverTests {
    static let replicas = (1...4).map { ReplicaID(bytes: [UInt8](repeating: UInt8($0), count: 16))! }

    /// A vector over the four replicas from four counters (0: nothing of that replica).
    static func vector(_ counters: [Int]) -> VersionVector {
        VersionVector(Dictionary(uniqueKeysWithValues: zip(replicas, counters.map { UInt64($0) })))
    }

    /// The device is replica 0: its "left" record at 5, it holds replica 1 up to 7.
    static let handover = LeaveHandover(replica: replicas[0], recordCounter: 5, held: vector([5, 7, 0, 2]))

    @Test func eachLevelNeedsWhatItSays() {
        let handover = Self.handover
        #expect(handover.taken(by: Self.vector([4, 7, 0, 2]), ownCounter: 5, memberLeaves: false) == .nothing)
        // The record, not a write made since (the app wrote on to 6).
        #expect(handover.taken(by: Self.vector([5, 7, 0, 2]), ownCounter: 6, memberLeaves: false) == .news)
        // All it wrote, not all it holds of replica 1: a write relayed to it alone.
        #expect(handover.taken(by: Self.vector([6, 6, 9, 2]), ownCounter: 6, memberLeaves: false) == .ownWrites)
        #expect(handover.taken(by: Self.vector([6, 7, 0, 2]), ownCounter: 6, memberLeaves: false) == .everything)
        // A member that leaves too may take it all along: it never counts as holding everything.
        #expect(handover.taken(by: Self.vector([6, 7, 0, 2]), ownCounter: 6, memberLeaves: true) == .ownWrites)
    }

    /// Against a reference: a member holding more never took less, and "everything" means every
    /// held counter and the device's latest one are reached by a member that stays.
    @Test func takenGrowsWithWhatTheMemberHoldsAndMatchesTheReference() async {
        let counters = Gen.int(in: 0...9).array(of: 4...4)
        await propertyCheck(input: counters, counters, Gen.int(in: 5...9), Gen.bool) { a, b, own, leaves in
            let handover = Self.handover
            let smaller = Self.vector(a)
            let larger = Self.vector(zip(a, b).map { max($0, $1) })
            let takenSmaller = handover.taken(by: smaller, ownCounter: UInt64(own), memberLeaves: leaves)
            #expect(takenSmaller <= handover.taken(by: larger, ownCounter: UInt64(own), memberLeaves: leaves))
            let everything = !leaves && a[0] >= own && zip(a, [5, 7, 0, 2]).allSatisfy { $0 >= $1 }
            #expect((takenSmaller == .everything) == everything)
            #expect((takenSmaller >= .news) == (a[0] >= 5))
        }
    }

    /// On real nodes: the tablet holds the laptop's tap, which home lacks; home holding the
    /// tablet's own writes is not enough, and the laptop, which says it leaves too, never is.
    @Test func aNodeCountsOnlyAMemberThatStaysAndHoldsWhatItHolds() async throws {
        let nodes = try await MembershipTests.group()
        let (home, laptop, tablet) = (nodes[0].node, nodes[1].node, nodes[2].node)
        _ = try await laptop.append(to: "taps", payload: "{}")
        try await tablet.merge(try MembershipTests.everything(laptop), maxSkewMilliseconds: 60_000)
        let handover = try await tablet.announceLeaving()
        func taken(by member: LANSyncNode) throws -> LeaveHandover.Taken {
            try tablet.leaveTaken(handover, by: [(member.deviceID.description, try member.store.versionVector())])[0]
        }
        #expect(try taken(by: home) == .nothing)
        // Home takes the tablet's own replica only.
        let own = try tablet.store.delta(
            since: VersionVector(),
            upTo: VersionVector([tablet.replicaID: .max]),
            maxRows: 100_000
        )
        try await home.merge(own, maxSkewMilliseconds: 60_000)
        #expect(try taken(by: home) == .ownWrites)
        try await home.merge(try MembershipTests.everything(tablet), maxSkewMilliseconds: 60_000)
        #expect(try taken(by: home) == .everything)
        // The laptop holds it all too, but said it leaves, and the tablet heard.
        _ = try await laptop.announceLeaving()
        try await laptop.merge(try MembershipTests.everything(tablet), maxSkewMilliseconds: 60_000)
        try await tablet.merge(try MembershipTests.everything(laptop), maxSkewMilliseconds: 60_000)
        #expect(try tablet.member(laptop.deviceID)?.hasLeft == true)
        #expect(try taken(by: laptop) == .ownWrites)
        // One look judges every connected member, in their order.
        let both = try [home, laptop].map { ($0.deviceID.description as String?, try $0.store.versionVector()) }
        #expect(try tablet.leaveTaken(handover, by: both) == [.everything, .ownWrites])
    }
}
