/// For each replica, the counter up to which this replica holds everything that still matters.
///
/// "Covers `(r, n)`" means: every operation `(r, 1…n)` has been merged, or was skipped by a sender
/// because a newer write superseded it (an older preference value, a losing duplicate entry).
/// Precisely, for each key the greatest covered write is held (or bettered), or a write that beats
/// it is not covered yet — so it is still owed and will arrive. A replica that pulls deltas made
/// for its own vector has the strong form: every covered write is held or bettered. Once a vector
/// covers every dot, the state holds every write's effect. (Both forms are property-tested.)
/// Two replicas compare vectors to ship only what the other lacks.
///
/// Merge is the pointwise maximum: commutative, associative, idempotent.
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    /// Per replica, the counter up to which every operation is held (replicas at 0 are left out).
    public private(set) var counters: [ReplicaID: UInt64]

    package init(_ counters: [ReplicaID: UInt64] = [:]) {
        self.counters = counters.filter { $0.value > 0 }
    }

    /// The counter held for `replica`: 0 when nothing of it is.
    public subscript(replica: ReplicaID) -> UInt64 {
        get { counters[replica] ?? 0 }
        set { counters[replica] = newValue == 0 ? nil : newValue }
    }

    package func covers(_ dot: Dot) -> Bool { self[dot.replica] >= dot.counter }

    /// The pointwise maximum of two vectors.
    package func merged(with other: VersionVector) -> VersionVector {
        VersionVector(counters.merging(other.counters, uniquingKeysWith: max))
    }

    /// How many operations `self` holds that `other` does not, summed over replicas. Counts dots,
    /// so it is an upper bound on the rows a delta carries (superseded writes are not shipped).
    package func operationsAhead(of other: VersionVector) -> UInt64 {
        // Saturating: counters from peers are bounded (`Dot.maxCounter`), but a count for a
        // status line must never be able to trap.
        counters.reduce(0) { sum, item in
            let ahead = item.value > other[item.key] ? item.value - other[item.key] : 0
            let (total, overflow) = sum.addingReportingOverflow(ahead)
            return overflow ? .max : total
        }
    }

    /// True when `self` covers everything `other` covers.
    package func dominates(_ other: VersionVector) -> Bool {
        other.counters.allSatisfy { self[$0.key] >= $0.value }
    }

    public var description: String {
        "[" + counters.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
    }
}
