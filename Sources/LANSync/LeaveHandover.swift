package import LANSyncCore

/// What a device that says it leaves must see a member take before it drops the group's secret
/// (`lansync group leave`): afterwards it reaches nobody in the group, so whatever only it holds
/// goes now or never.
///
/// Everything it holds, not only what it wrote: a write of another device relayed to it alone
/// leaves with it otherwise, for good once that device is gone too (it left, or was wiped). And
/// a member that says it leaves as well does not count: it may drop what it took before handing
/// it on. Two devices leaving at once cannot both count on the other, since each counts a member
/// only when that member holds its "left" record, and so was told it leaves.
package struct LeaveHandover: Sendable, Equatable {
    /// How much of the handover a member took, least first.
    package enum Taken: Int, Comparable, Sendable {
        /// Not even the "left" record.
        case nothing
        /// The "left" record, not all this device wrote since.
        case news
        /// Everything this device wrote, not all it holds of the others' writes.
        case ownWrites
        /// Everything this device held when it said it leaves, and all it wrote since.
        case everything

        package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// This device's replica.
    package let replica: ReplicaID
    /// Its counter once its "left" record was written: a member whose vector reaches it holds the record.
    package let recordCounter: UInt64
    /// What this device held, replica by replica, once the record was written.
    package let held: VersionVector

    package init(replica: ReplicaID, recordCounter: UInt64, held: VersionVector) {
        self.replica = replica
        self.recordCounter = recordCounter
        self.held = held
    }

    /// How much a member took whose version vector is `vector`. `ownCounter`: this device's
    /// counter now (an app may write on through the wait, and that goes too). `memberLeaves`:
    /// whether this device's records say the member leaves as well (or was removed); such a
    /// member takes the news and this device's writes, never "everything".
    package func taken(by vector: VersionVector, ownCounter: UInt64, memberLeaves: Bool) -> Taken {
        guard vector[replica] >= recordCounter else { return .nothing }
        guard vector[replica] >= max(ownCounter, recordCounter) else { return .news }
        guard !memberLeaves, held.counters.allSatisfy({ vector[$0.key] >= $0.value }) else { return .ownWrites }
        return .everything
    }
}
