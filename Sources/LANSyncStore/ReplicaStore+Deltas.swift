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
        since known: VersionVector,
        upTo bound: VersionVector? = nil,
        maxRows: Int,
        maxBytes: Int = 1 << 20
    ) throws(StoreError) -> Delta {
        precondition(maxRows > 0, "a delta batch needs room for at least one row")
        return try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                var rowReader = AppRowReader(db: db, replicas: replicas, catalog: try apps.catalogCache.catalog(db))
                var delta = Delta()
                var devices = RowDecoding.DeviceCache()
                var rowsLeft = maxRows
                var bytesLeft = maxBytes
                let ranges = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT num, replica_id, counter FROM replicas ORDER BY replica_id")
                )
                for range in ranges {
                    let id = ReplicaID(bytes: [UInt8](range[1] as Data))!
                    let number: Int64 = range[0]
                    let through = min(UInt64(range[2] as Int64), bound?[id] ?? .max)
                    let from = known[id]
                    guard through > from else { continue }
                    guard rowsLeft > 0, bytesLeft > 0 else { break }
                    let (lower, upper) = (
                        DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through)
                    )
                    var entries = [Entry]()
                    let select = try BoundStatement(
                        db,
                        sql:
                            "SELECT \(RowDecoding.entryColumns) FROM entries WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?"
                    )
                    select.bind(1, lower)
                    select.bind(2, upper)
                    select.bind(3, Int64(rowsLeft))
                    try select.forEachRow { columns in
                        entries.append(try RowDecoding.entry(columns, replicas: replicas, devices: &devices))
                    }
                    let preferences = try Row.fetchAll(
                        db.cachedStatement(
                            sql:
                                "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?"
                        ),
                        arguments: [lower, upper, rowsLeft]
                    ).map { try RowDecoding.preference($0, replicas: replicas) }
                    let changes = try rowReader.changes(lower: lower, upper: upper, limit: rowsLeft)
                    // Entries alone (a catch-up of logs) and all within the byte budget: taken whole,
                    // without the merge walk below.
                    let entryBytes = entries.reduce(0) { $0 + $1.byteEstimate }
                    if preferences.isEmpty, changes.isEmpty, entryBytes <= bytesLeft {
                        let cut = entries.count == rowsLeft
                        let reached = cut ? entries.last?.dot.counter ?? from : through
                        rowsLeft -= entries.count
                        bytesLeft -= entryBytes
                        // The first replica's rows become the batch's array as is (no copy of each entry).
                        if delta.entries.isEmpty {
                            delta.entries = entries
                        } else {
                            delta.entries.append(contentsOf: entries)
                        }
                        if reached > from { delta.coverage.append(.init(replica: id, from: from, through: reached)) }
                        if reached < through { break }
                        continue
                    }
                    // Both lists hold their smallest counters, so walking their union in counter order
                    // takes exactly the next rows; stop at either budget.
                    var rows =
                        entries.indices.map { (counter: entries[$0].dot.counter, list: 0, index: $0) }
                        + preferences.indices.map { (counter: preferences[$0].dot.counter, list: 1, index: $0) }
                        + changes.indices.map { (counter: changes[$0].dot.counter, list: 2, index: $0) }
                    rows.sort { $0.counter < $1.counter }
                    var last: UInt64?
                    var cut = entries.count == rowsLeft || preferences.count == rowsLeft || rowReader.wasCut
                    for row in rows {
                        let size: Int
                        switch row.list {
                        case 0: size = entries[row.index].byteEstimate
                        case 1: size = preferences[row.index].byteEstimate
                        default: size = changes[row.index].byteEstimate
                        }
                        let nothingYet = delta.entries.isEmpty && delta.preferences.isEmpty && delta.rows.isEmpty
                        guard rowsLeft > 0, size <= bytesLeft || nothingYet else {
                            cut = true
                            break
                        }
                        switch row.list {
                        case 0: delta.entries.append(entries[row.index])
                        case 1: delta.preferences.append(preferences[row.index])
                        default: delta.rows.append(changes[row.index])
                        }
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

/// Reads the app-table changes a delta ships: the live writes in a dot range, each rebuilt from
/// its row's state (only what still wins of it).
struct AppRowReader {
    let db: Database
    let replicas: [Int64: ReplicaID]
    private var tableNames: [Int64: String]?
    private var columnNames: [Int64: String]?
    /// Whether the last range read stopped at its limit.
    private(set) var wasCut = false

    /// The values stored states name of the app's rows.
    let appRows: AppRowValues

    init(db: Database, replicas: [Int64: ReplicaID], catalog: AppCatalog) {
        self.db = db
        self.replicas = replicas
        appRows = AppRowValues(db, catalog: catalog)
    }

    mutating func changes(lower: Int64, upper: Int64, limit: Int) throws -> [RowChange] {
        if tableNames == nil {
            tableNames = Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT num, name FROM app_tables").map {
                    ($0[0], $0[1])
                }
            )
        }
        let names = tableNames ?? [:]
        if columnNames == nil { columnNames = try ColumnNumbering.load(db).names }
        let columnNames = columnNames ?? [:]
        var changes = [RowChange]()
        guard limit > 0 else {
            wasCut = true
            return changes
        }
        // The row's key is built once for its consecutive writes (an insert, then its updates).
        var last: (table: Int64, key: [UInt8], rowKey: RowKey)?
        try IndexedWrites.forEachWithState(
            db,
            lower: lower,
            upper: upper,
            limit: limit,
            columns: columnNames,
            replicas: replicas,
            rows: appRows
        ) { write, state in
            let dot = try RowDecoding.dot(write.dot, replicas: replicas)
            if last == nil || last!.table != write.table || last!.key != write.key {
                guard let name = names[write.table] else {
                    throw StoreError(
                        .database,
                        "a write names app table \(write.table), which is not registered; the database is damaged"
                    )
                }
                last = (write.table, write.key, RowKey(table: name, primaryKey: try SQLValue.key(from: write.key)))
            }
            guard let change = state.change(key: last!.rowKey, dot: dot) else {
                // A run's write that a later one superseded (see `DotRun`).
                if write.inRun { return true }
                throw StoreError(
                    .database,
                    "write \(dot) of \(last!.rowKey) is indexed but not in the row; the database is damaged"
                )
            }
            changes.append(change)
            return changes.count < limit
        }
        wasCut = changes.count == limit
        return changes
    }
}

extension Entry {
    /// About what the entry costs on the wire: what sizes a delta's batches and a chain's ranges.
    var byteEstimate: Int { payload.utf8.count + id.utf8.count + 64 }
}

extension PreferenceWrite {
    /// About what the write costs on the wire.
    var byteEstimate: Int { (value?.utf8.count ?? 0) + key.utf8.count + 64 }
}

extension PreferenceStub {
    /// About what the stub costs on the wire (its key, dot, clock and element hash).
    var byteEstimate: Int { key.utf8.count + 96 }
}

extension RowChange {
    /// About what the change costs on the wire with `lost` cells beside it (signed ranges).
    func byteEstimate(lost: [LostCell]) -> Int {
        lost.reduce(byteEstimate) { $0 + $1.column.utf8.count + $1.standIn.count + 8 }
    }

    /// About what the change costs on the wire: what sizes a delta's batches.
    var byteEstimate: Int {
        64 + key.table.utf8.count + key.primaryKey.reduce(0) { $0 + $1.byteCount }
            + values.reduce(0) { $0 + $1.column.utf8.count + $1.value.byteCount + 2 }
            + totals.reduce(0) { $0 + $1.column.utf8.count + 10 }
    }
}
