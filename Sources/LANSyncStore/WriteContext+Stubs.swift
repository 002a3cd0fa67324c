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
                """
        )
        try statement.execute(arguments: [
            try dotKey(entry.dot), entry.id, entry.stream, blob(entry.originDevice), Int64(entry.hlc.rawValue),
            entry.wallMilliseconds, entry.payload,
        ])
    }

    /// Keeps what a superseded preference write's leaf needs (`PreferenceStub`).
    mutating func keepLosingPreference(_ write: PreferenceWrite, elementHash: [UInt8]) throws {
        try keepLosingPreference(
            PreferenceStub(key: write.key, hlc: write.hlc, dot: write.dot, elementHash: elementHash)
        )
    }

    mutating func keepLosingPreference(_ stub: PreferenceStub) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO preference_stubs (dot, key, hlc, element_hash) VALUES (?, ?, ?, ?)"
        )
        try statement.execute(arguments: [
            try dotKey(stub.dot), stub.key, Int64(stub.hlc.rawValue), Data(stub.elementHash),
        ])
    }

    /// Checks, after merging all of `delta`, that every change it says lost at the sender lost
    /// here too — each lost cell of a row change, each preference stub — and keeps the preference
    /// stubs. A claim that does not hold yet is kept as an open claim (`open_claims`) and the
    /// range counts all the same: the change that superseded it at the sender has simply not
    /// reached this replica, and often cannot have — it lies further along the same replica's
    /// chain, past where the sender cut the batch (a preference its writer set again thousands of
    /// changes later), so asking for the range again would bring the same range forever. Each
    /// open claim closes when a change that supersedes it is merged (`closeOpenClaims`); one that
    /// stays open once this replica holds all its sender held is a loss the sender made up
    /// (`docs/protocol.md` §12.4). Returns the replicas whose ranges opened claims. What was
    /// merged stays: merging part of a change is always safe.
    mutating func openClaims(of delta: Delta) throws -> Set<ReplicaID> {
        var opened: Set<ReplicaID> = []
        for stub in delta.preferenceStubs {
            let held = try preference(key: stub.key)
            // Held live here (its superseder has not come yet): it becomes a stub when that comes.
            if held?.dot != stub.dot { try keepLosingPreference(stub) }
            if !stub.isSuperseded(by: held) {
                var hlc = [UInt8]()
                hlc.appendBigEndian(stub.hlc.rawValue)
                try recordOpenClaim(dot: stub.dot, table: nil, key: Array(stub.key.utf8), stub: hlc)
                opened.insert(stub.dot.replica)
            }
        }
        guard !delta.lostCells.isEmpty else { return opened }
        for change in delta.rows {
            guard let cells = delta.lostCells[change.dot] else { continue }
            let table = try appTable(named: change.key.table).number
            let keyBytes = SQLValue.keyBytes(change.key.primaryKey)
            let state = try heldRow(table: table, key: keyBytes) ?? RowState()
            let open = cells.filter {
                !state.hasSuperseded($0, ofChangeAt: change.stamp, life: change.causalLength, kind: change.kind)
            }
            guard !open.isEmpty else { continue }
            let stub = RowChangeStub(kind: change.kind, causalLength: change.causalLength, hlc: change.hlc, lost: open)
            try recordOpenClaim(dot: change.dot, table: change.key.table, key: keyBytes, stub: stub.canonicalBytes)
            opened.insert(change.dot.replica)
        }
        return opened
    }

    private mutating func recordOpenClaim(dot: Dot, table: String?, key: [UInt8], stub: [UInt8]) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO open_claims (dot, tbl, key, stub) VALUES (?, ?, ?, ?)",
            arguments: [try dotKey(dot), table, Data(key), Data(stub)]
        )
    }

    /// Closes the open claims that hold now (a change that supersedes each was merged or
    /// written); returns how many stay open. Cheap when there are none, as almost always.
    mutating func closeOpenClaims() throws -> Int {
        let claims = try Row.fetchAll(db.cachedStatement(sql: "SELECT dot, tbl, key, stub FROM open_claims"))
        guard !claims.isEmpty else { return 0 }
        var open = 0
        for claim in claims {
            let dotKey: Int64 = claim[0]
            let dot = try RowDecoding.dot(dotKey, replicas: replicasByNumber)
            let key = [UInt8](claim[2] as Data)
            let stubBytes = [UInt8](claim[3] as Data)
            let holds: Bool
            if let tableName = claim[1] as String? {
                let stub = try RowChangeStub(canonicalBytes: stubBytes)
                let table = try appTable(named: tableName).number
                let state = try heldRow(table: table, key: key) ?? RowState()
                let stamp = RowState.Stamp(hlc: stub.hlc, dot: dot)
                // Each cell lost here too, or holds this very change: a sender's copy of the
                // change, live, came after the claim (the claim was false, and is moot now).
                holds = stub.lost.allSatisfy {
                    state.hasSuperseded($0, ofChangeAt: stamp, life: stub.causalLength, kind: stub.kind)
                        || state.shows($0, ofChangeAt: stamp, life: stub.causalLength, kind: stub.kind)
                }
            } else {
                guard stubBytes.count == 8 else { throw StoreError(.database, "an open claim's stub is damaged") }
                let hlc = HybridTimestamp(rawValue: stubBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
                let name = String(decoding: key, as: UTF8.self)
                let held = try preference(key: name)
                if held?.dot == dot {
                    // The write itself came, live: the claim was false, and its stub goes.
                    try db.execute(sql: "DELETE FROM preference_stubs WHERE dot = ?", arguments: [dotKey])
                    holds = true
                } else {
                    holds = PreferenceStub(key: name, hlc: hlc, dot: dot, elementHash: []).isSuperseded(by: held)
                }
            }
            if holds {
                try db.execute(sql: "DELETE FROM open_claims WHERE dot = ?", arguments: [dotKey])
            } else {
                open += 1
            }
        }
        return open
    }
}
