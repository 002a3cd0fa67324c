import Foundation
import GRDB
import LANSyncCore

/// Stubs of superseded changes (docs/signed-changes.md, "Leaves"): what stays of a change the
/// merge rules pruned, so that its leaf can still be rebuilt and sent. App-table changes keep
/// theirs in `WriteContext+AppRows`.
extension WriteContext {
    /// Keeps an entry that lost to another version of its id, whole, so that its leaf can still be
    /// sent (the receiver's merge drops it again).
    mutating func keepLosingEntry(_ entry: Entry) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO entry_stubs (dot, id, stream, origin_device, hlc, wall_ms, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        try statement.execute(arguments: [
            try dotKey(entry.dot), entry.id, entry.stream, blob(entry.originDevice), Int64(entry.hlc.rawValue),
            entry.wallMilliseconds, entry.payload,
        ])
    }

    /// Keeps what a superseded preference write's leaf needs (`PreferenceStub`).
    mutating func keepLosingPreference(_ write: PreferenceWrite, elementHash: [UInt8]) throws {
        try keepLosingPreference(PreferenceStub(key: write.key, hlc: write.hlc, dot: write.dot, elementHash: elementHash))
    }

    mutating func keepLosingPreference(_ stub: PreferenceStub) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO preference_stubs (dot, key, hlc, element_hash) VALUES (?, ?, ?, ?)")
        try statement.execute(arguments: [try dotKey(stub.dot), stub.key, Int64(stub.hlc.rawValue), Data(stub.elementHash)])
    }

    /// Checks, after merging all of `delta`, that every change it says lost at the sender lost
    /// here too — each lost cell of a row change, each preference stub — and keeps the preference
    /// stubs that did. Returns the replicas whose ranges hold a claim that did not: their coverage
    /// must not count. Either the change that superseded it has not reached this replica yet (it
    /// may come in a later batch: the range is sent again once it has), or the sender passes off a
    /// live change as superseded; in neither case may the range be taken as complete. What was
    /// merged stays: merging part of a change is always safe.
    mutating func unheldLosses(of delta: Delta) throws -> Set<ReplicaID> {
        var failed: Set<ReplicaID> = []
        for stub in delta.preferenceStubs {
            if stub.isSuperseded(by: try preference(key: stub.key)) {
                try keepLosingPreference(stub)
            } else {
                failed.insert(stub.dot.replica)
            }
        }
        guard !delta.lostCells.isEmpty else { return failed }
        for change in delta.rows where !failed.contains(change.dot.replica) {
            guard let cells = delta.lostCells[change.dot] else { continue }
            let table = try appTable(named: change.key.table).number
            let state = try heldRow(table: table, key: SQLValue.keyBytes(change.key.primaryKey)) ?? RowState()
            if cells.contains(where: { !state.hasSuperseded($0, ofChangeAt: change.stamp, life: change.causalLength, kind: change.kind) }) {
                failed.insert(change.dot.replica)
            }
        }
        return failed
    }
}
