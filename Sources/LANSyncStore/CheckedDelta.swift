package import LANSyncCore

/// A delta from another replica that passed every check a merge makes before it touches the
/// database, with each entry's element hash (what the state digest adds) computed. Only
/// `ReplicaStore.check(_:)` makes one, so holding one is proof of both.
package struct CheckedDelta: Sendable {
    package let delta: Delta
    /// `delta.entries[i]`'s hash at index `i` (also its leaf in its replica's `ChainHead` chain).
    package let entryHashes: [[UInt8]]
    /// The leaf of every change it carries (`Delta.changeLeaves`), when the check was asked for
    /// them (`check(_:signed:)`): computed with the rest, off the merge's path.
    let leaves: ChangeLeaves?

    init(delta: Delta, entryHashes: [[UInt8]], leaves: ChangeLeaves? = nil) {
        precondition(entryHashes.count == delta.entries.count, "one hash per entry")
        self.delta = delta
        self.entryHashes = entryHashes
        self.leaves = leaves
    }
}
