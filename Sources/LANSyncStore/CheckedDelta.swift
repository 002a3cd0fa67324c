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
    /// `delta.rows[i]`'s key and first state (see `FirstRow`) at index `i`, or empty: what a merge
    /// writes for a row it has never heard of, computed with the rest of the check, off the
    /// writer's path.
    let firstRows: [FirstRow]
    /// The heads some of its ranges lead to, worked out ahead of the merge
    /// (`ReplicaStore.foldingAhead`); the merge's check looks them up instead of hashing again.
    var folds: [ProvenanceCheck.Fold: ChainHead] = [:]

    init(delta: Delta, entryHashes: [[UInt8]], leaves: ChangeLeaves? = nil, firstRows: [FirstRow] = []) {
        precondition(entryHashes.count == delta.entries.count, "one hash per entry")
        precondition(firstRows.isEmpty || firstRows.count == delta.rows.count, "one first row per change, or none")
        self.delta = delta
        self.entryHashes = entryHashes
        self.leaves = leaves
        self.firstRows = firstRows
    }

    /// The first row at `index` of `delta.rows`, when the check made them.
    func firstRow(_ index: Int) -> FirstRow? { firstRows.isEmpty ? nil : firstRows[index] }
}

/// What a change makes of a row no replica had told this one of, as the store keeps it: the
/// row's key bytes (`SQLValue.keyBytes`), the digest's hash of its state (the change alone,
/// `RowState.appendFirst`), and whether anything of the change wins (so it is indexed by its dot).
/// None of it depends on the database, so a receiver computes it beside the merge before.
struct FirstRow: Sendable {
    let key: [UInt8]
    let digestHash: [UInt8]
    let isLive: Bool
    /// The state as `app_rows` stores it (`StoredRowState.encodeFirst`), when the numbers it
    /// needs were known (`StoredNumbering`).
    let stored: [UInt8]?

    /// `key`: the change's key bytes, when the caller has them already; `stored`: its state as
    /// `app_rows` keeps it, when the caller could encode it.
    init(_ change: RowChange, key: [UInt8]? = nil, hasher: ElementHasher, buffer: inout [UInt8], stored: [UInt8]? = nil)
    {
        self.stored = stored
        self.key = key ?? SQLValue.keyBytes(change.key.primaryKey)
        buffer.removeAll(keepingCapacity: true)
        FirstRow.appendIdentity(table: change.key.table, key: self.key, to: &buffer)
        isLive = RowState.appendFirst(change, to: &buffer)
        digestHash = hasher.hash(buffer)
    }

    /// What the digest hashes for a row before its state: the row's identity (table, key).
    static func appendIdentity(table: String, key: [UInt8], to bytes: inout [UInt8]) {
        bytes.appendField(table)
        bytes.append(contentsOf: key)
    }
}
