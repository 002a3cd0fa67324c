package import LANSyncCore

/// Which rows from other origins to hold back from a peer for now, so that a dense group does not
/// carry every new row several times.
///
/// In a full mesh every node hears a new row from its origin directly. A node that relayed each
/// row it merged to every peer whose state did not show it yet would race the origin's own push:
/// in a burst on 24 nodes each node received about 20 copies of every new entry. So rows are
/// pushed eagerly only by their origin; a row merged from elsewhere is *fresh* for `grace`, and a
/// session leaves fresh rows out. Meanwhile the peer announces its state (`SyncProtocol` sends
/// it after merges, at most every announce interval); if it still lacks the rows once they
/// settle, it cannot be hearing them from their origin (it is not connected to it, or that
/// connection is stuck), and the rows go to it as any catch-up would. Rows held for longer than
/// `grace` are never held back, so a newcomer's catch-up starts at once.
///
/// A value type with no clock of its own: the agent keeps one, shared by its sessions, and
/// passes the time in.
package struct RelayGrace: Sendable {
    /// How long a merged row counts as fresh.
    package let grace: Duration
    /// Per replica, the merges of its rows still fresh: the counter we held before each merge,
    /// and when it happened.
    private var fresh: [ReplicaID: [(before: UInt64, at: ContinuousClock.Instant)]] = [:]

    package init(grace: Duration) { self.grace = grace }

    /// Rows of other origins were merged at `now`; `coverage` says which (the rows a range
    /// covers below what we held already only wait with them, for at most `grace`).
    package mutating func merged(_ coverage: [Delta.Coverage], at now: ContinuousClock.Instant) {
        guard grace > .zero else { return }
        for range in coverage where range.through > range.from {
            fresh[range.replica, default: []].append((before: range.from, at: now))
        }
    }

    /// What to hold back at `now`: per replica with fresh rows, the highest counter that may go
    /// (the rows above it are fresh), and when the next of them settles.
    package mutating func holdBack(
        at now: ContinuousClock.Instant
    ) -> (cap: [ReplicaID: UInt64], settles: ContinuousClock.Instant?) {
        var cap: [ReplicaID: UInt64] = [:]
        var settles: ContinuousClock.Instant?
        for (replica, merges) in fresh {
            let stillFresh = merges.filter { now - $0.at < grace }
            if stillFresh.isEmpty {
                fresh[replica] = nil
                continue
            }
            fresh[replica] = stillFresh
            cap[replica] = stillFresh.map(\.before).min()
            let next = stillFresh.map { $0.at + grace }.min()!
            settles = settles.map { min($0, next) } ?? next
        }
        return (cap, settles)
    }
}
