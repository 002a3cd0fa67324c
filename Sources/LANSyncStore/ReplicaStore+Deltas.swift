import Foundation
import GRDB
package import LANSyncCore

/// What another replica lacks, in bounded batches: the rows sync sends.
extension ReplicaStore {
    /// One bounded batch of what a replica covering `known` lacks: at most `maxRows` rows and
    /// about `maxBytes` bytes (always at least one row), in dot order per replica, with coverage
    /// ranges that say exactly how far the batch goes. Call again with `known` advanced by the
    /// returned coverage until the delta comes back empty. The byte bound keeps every batch far
    /// inside the wire's message limit, whatever the payload sizes. With a `bound`, rows beyond it
    /// are left out (the agent holds rows from other origins back for a moment, and sends no more
    /// than it held when it started sending; see `RelayGrace`).
    package func delta(
        since known: VersionVector, upTo bound: VersionVector? = nil, maxRows: Int, maxBytes: Int = 1 << 20
    ) throws(StoreError) -> Delta {
        precondition(maxRows > 0, "a delta batch needs room for at least one row")
        return try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                var delta = Delta()
                var devices = RowDecoding.DeviceCache()
                var rowsLeft = maxRows
                var bytesLeft = maxBytes
                let ranges = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT num, replica_id, counter FROM replicas ORDER BY replica_id"))
                for range in ranges {
                    let id = ReplicaID(bytes: [UInt8](range[1] as Data))!
                    let number: Int64 = range[0]
                    let through = min(UInt64(range[2] as Int64), bound?[id] ?? .max)
                    let from = known[id]
                    guard through > from else { continue }
                    guard rowsLeft > 0, bytesLeft > 0 else { break }
                    let (lower, upper) = (DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through))
                    var entries = [Entry]()
                    let select = try BoundStatement(
                        db, sql: "SELECT \(RowDecoding.entryColumns) FROM entries WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?")
                    select.bind(1, lower)
                    select.bind(2, upper)
                    select.bind(3, Int64(rowsLeft))
                    try select.forEachRow { columns in
                        entries.append(try RowDecoding.entry(columns, replicas: replicas, devices: &devices))
                    }
                    let preferences = try Row.fetchAll(
                        db.cachedStatement(
                            sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?"),
                        arguments: [lower, upper, rowsLeft]
                    ).map { try RowDecoding.preference($0, replicas: replicas) }
                    // Entries alone (a catch-up of logs) and all within the byte budget: taken whole,
                    // without the merge walk below.
                    let entryBytes = entries.reduce(0) { $0 + $1.payload.utf8.count + $1.id.utf8.count + 64 }
                    if preferences.isEmpty, entryBytes <= bytesLeft {
                        let cut = entries.count == rowsLeft
                        let reached = cut ? entries.last?.dot.counter ?? from : through
                        rowsLeft -= entries.count
                        bytesLeft -= entryBytes
                        // The first replica's rows become the batch's array as is (no copy of each entry).
                        if delta.entries.isEmpty { delta.entries = entries } else { delta.entries.append(contentsOf: entries) }
                        if reached > from { delta.coverage.append(.init(replica: id, from: from, through: reached)) }
                        if reached < through { break }
                        continue
                    }
                    // Both lists hold their smallest counters, so walking their union in counter order
                    // takes exactly the next rows; stop at either budget.
                    var rows = entries.indices.map { (counter: entries[$0].dot.counter, entry: $0, preference: -1) }
                        + preferences.indices.map { (counter: preferences[$0].dot.counter, entry: -1, preference: $0) }
                    rows.sort { $0.counter < $1.counter }
                    var last: UInt64?
                    var cut = entries.count == rowsLeft || preferences.count == rowsLeft
                    for row in rows {
                        let size = row.entry >= 0
                            ? entries[row.entry].payload.utf8.count + entries[row.entry].id.utf8.count + 64
                            : (preferences[row.preference].value?.utf8.count ?? 0) + preferences[row.preference].key.utf8.count + 64
                        let nothingYet = delta.entries.isEmpty && delta.preferences.isEmpty
                        guard rowsLeft > 0, size <= bytesLeft || nothingYet else {
                            cut = true
                            break
                        }
                        if row.entry >= 0 { delta.entries.append(entries[row.entry]) }
                        else { delta.preferences.append(preferences[row.preference]) }
                        rowsLeft -= 1
                        bytesLeft -= size
                        last = row.counter
                    }
                    let reached = cut ? (last ?? from) : through
                    if reached > from { delta.coverage.append(.init(replica: id, from: from, through: reached)) }
                    if reached < through { break }
                }
                return delta
            }
        }
    }
}
