import GRDB
import LANSyncCore

/// Finds a row's stored state in either place it may be kept: `app_rows`, by the row's key, or
/// `app_rowid_states`, by the rowid of the app's row that shows it (for a table that keeps its
/// rows' states so, `AppCatalog.Table.keepsStatesByRowid`). A state is in one of the two, never
/// in both, so a reader looks by key first (every table's deleted rows, and states stored before
/// schema 12), then asks the app's key index for the row's rowid.
///
/// A class, so that a read of many states prepares each statement once.
final class StoredStates {
    /// Where a state was found.
    enum Place: Equatable {
        case key
        case rowid(Int64)
    }

    private let db: Database
    private let catalog: AppCatalog
    private let byKey: BoundStatement
    private let byRowid: BoundStatement
    private var rowidSelects: [Int64: BoundStatement] = [:]

    init(_ db: Database, catalog: AppCatalog) throws {
        self.db = db
        self.catalog = catalog
        byKey = try BoundStatement(db, sql: "SELECT state FROM app_rows WHERE tbl = ? AND key = ?")
        byRowid = try BoundStatement(db, sql: "SELECT state FROM app_rowid_states WHERE tbl = ? AND rid = ?")
    }

    /// Calls `body` with the stored bytes of the state of row `key` (its key bytes) of table
    /// number `table`, and where they are; nil when the row was never heard of. `rowid`: where
    /// the row was, when the app's statements deleted it since (a local write's `LocalRow`).
    func withState<T>(
        table: Int64,
        key: [UInt8],
        rowid known: Int64? = nil,
        _ body: (UnsafeRawBufferPointer, Place) throws -> T
    ) throws -> T? {
        byKey.bind(1, table)
        byKey.bind(2, key)
        var result: T?
        try byKey.forEachRow { columns in result = try columns.withBlob(0) { try body($0, .key) } }
        if result != nil { return result }
        guard let entry = catalog.tables[table], entry.keepsStatesByRowid else { return nil }
        guard let rowid = try known ?? self.rowid(of: entry, key: key) else { return nil }
        byRowid.bind(1, table)
        byRowid.bind(2, rowid)
        try byRowid.forEachRow { columns in result = try columns.withBlob(0) { try body($0, .rowid(rowid)) } }
        return result
    }

    /// The rowid at which the app's table shows row `key`, if it does.
    func rowid(of table: AppCatalog.Table, key: [UInt8]) throws -> Int64? {
        try rowid(of: table, key: try SQLValue.key(from: key))
    }

    /// The same for a key given as its values.
    func rowid(of table: AppCatalog.Table, key: [SQLValue]) throws -> Int64? {
        let select = try rowidSelect(table)
        var position: Int32 = 1
        select.bind(key, [], from: &position)
        var rowid: Int64?
        try select.forEachRow { rowid = $0.int64(0) }
        return rowid
    }

    private func rowidSelect(_ table: AppCatalog.Table) throws -> BoundStatement {
        if let select = rowidSelects[table.number] { return select }
        let select = try BoundStatement(db, sql: Self.rowidSQL(table.declared!))
        rowidSelects[table.number] = select
        return select
    }

    /// The rowids the next `count` rows one INSERT writes into `table`'s app table (with no rowid
    /// of their own) will take: SQLite numbers them one after another from the greatest rowid on,
    /// unless that is the greatest there can be, when it picks free ones at random (nil). One
    /// seek to the end of the table, where a read of the rows after the insert would read each.
    func nextRowids(of table: AppCatalog.Table, count: Int) throws -> ClosedRange<Int64>? {
        // `BoundStatement` takes the prepared statement from GRDB's cache.
        let select = try BoundStatement(
            db,
            sql: "SELECT coalesce(max(rowid), 0) FROM \(table.declared!.name.quotedDatabaseIdentifier)"
        )
        var greatest: Int64 = .max
        try select.forEachRow { greatest = $0.int64(0) }
        guard count > 0, greatest >= 0, greatest <= Int64.max - Int64(count) else { return nil }
        return (greatest + 1)...(greatest + Int64(count))
    }

    /// The key bytes of the rows table number `table` shows at `rowids` (a run of the dot
    /// index, see `DotRun`), in the same order; nil where it shows no row. Rowids close together
    /// (rows inserted one after another) are read as one range; others one at a time.
    func keys(of table: Int64, atRowids rowids: [Int64]) throws -> [[UInt8]?] {
        guard let entry = catalog.tables[table], entry.namesRowsByRowid, let declared = entry.declared else {
            throw StoreError(
                .database,
                "a run of the dot index names rows of app table \(table) by rowid, which that table does not keep; "
                    + "the database is damaged"
            )
        }
        guard let lowest = rowids.min(), let highest = rowids.max() else { return [] }
        var found = [Int64: [UInt8]](minimumCapacity: rowids.count)
        let (span, overflow) = highest.subtractingReportingOverflow(lowest)
        if !overflow, span < Int64(2 * rowids.count + 64) {
            try forEachKey(of: declared, where: "BETWEEN ? AND ?", [lowest, highest]) { found[$0] = $1 }
        } else {
            for rowid in rowids { try forEachKey(of: declared, where: "= ?", [rowid]) { found[$0] = $1 } }
        }
        return rowids.map { found[$0] }
    }

    /// Calls `body` with the rowid and key bytes of each row of `declared` whose rowid matches
    /// `condition` (SQL after `WHERE rowid`) with `arguments`.
    private func forEachKey(
        of declared: AppSchema.Table,
        where condition: String,
        _ arguments: [Int64],
        _ body: (Int64, [UInt8]) -> Void
    ) throws {
        let key = declared.primaryKey.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let select = try BoundStatement(
            db,
            sql:
                "SELECT rowid, lansync_key_bytes(\(key)) FROM \(declared.name.quotedDatabaseIdentifier) WHERE rowid \(condition)"
        )
        for (index, argument) in arguments.enumerated() { select.bind(Int32(index + 1), argument) }
        try select.forEachRow { row in body(row.int64(0), row.withBlob(1) { Array($0) }) }
    }

    /// The SELECT of a row's rowid by its key.
    static func rowidSQL(_ declared: AppSchema.Table) -> String {
        let match = declared.primaryKey.map { "\($0.quotedDatabaseIdentifier) = ?" }.joined(separator: " AND ")
        return "SELECT rowid FROM \(declared.name.quotedDatabaseIdentifier) WHERE \(match)"
    }

    /// The SELECT of every state a table keeps by rowid as `key, state, rowid`, the key as its
    /// bytes (`SQLValue.keyBytes`), in the order of those bytes (`lansync_key_bytes`): SQLite
    /// sorts them, spilling to a temporary file, so a reader of every row holds none of them.
    static func statesByRowidSQL(_ declared: AppSchema.Table) -> String {
        let key = declared.primaryKey.map { "t.\($0.quotedDatabaseIdentifier)" }.joined(separator: ", ")
        return "SELECT lansync_key_bytes(\(key)) AS key, s.state, s.rid FROM app_rowid_states s "
            + "JOIN \(declared.name.quotedDatabaseIdentifier) t ON t.rowid = s.rid WHERE s.tbl = ? ORDER BY key"
    }
}

/// A row of an app table by its table number and key bytes.
struct RowAddress: Hashable {
    let table: Int64
    let key: [UInt8]
}
