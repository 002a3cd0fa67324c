import Foundation
import GRDB
import LANSyncCore

/// Reads what an app's table holds of a row, for the cells of stored states kept as "the app's
/// row holds it" (`StoredRowState.rowValueTag`): every reader of `app_rows` reads a state through
/// one of these, beside the app's row.
///
/// A class, so that a read of many states prepares each table's statement once and the decoding
/// closures can share it without copying.
final class AppRowValues {
    private let db: Database
    private let catalog: AppCatalog
    private var selects: [Int64: (AppCatalog.Table, BoundStatement)] = [:]
    private var lookup: StoredStates?

    init(_ db: Database, catalog: AppCatalog) {
        self.db = db
        self.catalog = catalog
    }

    /// Finds rows' stored states, by key or by rowid (made on first use).
    func states() throws -> StoredStates {
        if let lookup { return lookup }
        let made = try StoredStates(db, catalog: catalog)
        lookup = made
        return made
    }

    /// The state of row `key` of table number `table`, read (with the app's row where it names
    /// its values); nil when the row was never heard of.
    func state(
        table: Int64,
        key: [UInt8],
        columns: [Int64: String],
        replicas: [Int64: ReplicaID]
    ) throws -> RowState? {
        try states().withState(table: table, key: key) { bytes, _ in
            try decode(bytes, table: table, key: key, columns: columns, replicas: replicas)
        }
    }

    /// Reads the stored state `bytes` of row `key` (its key bytes) of table number `table`,
    /// reading the app's row only when a cell of it is kept there.
    func decode(
        _ bytes: UnsafeRawBufferPointer,
        table: Int64,
        key: some Collection<UInt8>,
        columns: [Int64: String],
        replicas: [Int64: ReplicaID]
    ) throws -> RowState {
        var row: (table: AppCatalog.Table, values: [SQLValue])?
        return try StoredRowState.decode(bytes, columns: columns, replicas: replicas) { name in
            if row == nil { row = try self.row(table: table, key: Array(key)) }
            return try Self.value(of: name, in: row!.values, table: row!.table)
        }
    }

    /// The same for a state given as `Data`.
    func decode(
        _ data: Data,
        table: Int64,
        key: some Collection<UInt8>,
        columns: [Int64: String],
        replicas: [Int64: ReplicaID]
    ) throws -> RowState {
        try data.withUnsafeBytes { try decode($0, table: table, key: key, columns: columns, replicas: replicas) }
    }

    /// The value of column `name` in `row` (the table's values in declaration order).
    static func value(of name: String, in row: [SQLValue], table: AppCatalog.Table) throws -> SQLValue {
        guard let index = table.columnIndexes[name], index < row.count else {
            throw StoredRowState.rowValueMissing
        }
        return row[index]
    }

    /// Every value the app's table holds of row `key`, in declaration order, with the table;
    /// throws when the table does not show the row (a state that names its values is then damaged).
    private func row(table number: Int64, key: [UInt8]) throws -> (table: AppCatalog.Table, values: [SQLValue]) {
        let (table, select) = try prepared(number)
        var position: Int32 = 1
        select.bind(try SQLValue.key(from: key), [], from: &position)
        var values: [SQLValue]?
        try select.forEachRow { columns in
            values = (0..<Int32(table.columns.count)).map { columns.value($0) }
        }
        guard let values else { throw StoredRowState.rowValueMissing }
        return (table, values)
    }

    /// Table number `number`'s catalog entry and its row's SELECT, prepared once.
    private func prepared(_ number: Int64) throws -> (AppCatalog.Table, BoundStatement) {
        if let prepared = selects[number] { return prepared }
        guard let table = catalog.tables[number], let declared = table.declared else {
            throw StoredRowState.rowValueMissing
        }
        let prepared = (table, try BoundStatement(db, sql: Self.selectSQL(declared)))
        selects[number] = prepared
        return prepared
    }

    /// The SELECT of one row's values by its key.
    static func selectSQL(_ declared: AppSchema.Table) -> String {
        let columns = declared.columns.map(\.name.quotedDatabaseIdentifier).joined(separator: ", ")
        let match = declared.primaryKey.map { "\($0.quotedDatabaseIdentifier) = ?" }.joined(separator: " AND ")
        return "SELECT \(columns) FROM \(declared.name.quotedDatabaseIdentifier) WHERE \(match)"
    }
}

/// What the app's table holds of a row once a write of its state is done: the values a state
/// may name instead of keeping them again (`StoredRowState.rowValueTag`).
enum RowHolding {
    /// The table does not show the row (deleted, refused by a rule, or the table not declared):
    /// the state keeps every value.
    case nothing
    /// LANSync wrote these values of the table's columns (`WriteContext.materialize`); each is
    /// held exactly where its column keeps it so (`AppCatalog.Table.keepsExactly`).
    case written(AppCatalog.Table, AppCatalog.Table.Present)
    /// The app's statements left the row with these values, in declaration order, as the table
    /// shows them (what the capture read).
    case left(AppCatalog.Table, [SQLValue])
    /// LANSync writes the row that `change` alone makes (`AppCatalog.Table.present(of:)`), asked
    /// only of the change's own cells: each shows in its declared column outside the key unless
    /// a total of the change has its name. Decided cell by cell, without building the row's
    /// columns: a catch-up asks it of every new row, off the writer and on it.
    case firstWritten(AppCatalog.Table, RowChange)

    /// What the table of a row made by `change` alone will hold once a merge writes the row
    /// (`WriteContext.materialize`); `table`: the row's table, when this replica's app declares it.
    static func first(_ change: RowChange, table: AppCatalog.Table?) -> RowHolding {
        guard let table, table.declared != nil, change.causalLength % 2 == 1 else { return .nothing }
        return .firstWritten(table, change)
    }

    /// Whether the row holds `value` in column `name` exactly.
    func holds(_ name: String, _ value: SQLValue) -> Bool {
        switch self {
        case .nothing:
            return false
        case .written(let table, let present):
            guard let index = table.columnIndexes[name],
                let position = present.indexes.firstIndex(of: index)
            else { return false }
            return present.values[position] == value && table.keepsExactly(value, column: index)
        case .left(let table, let values):
            guard let index = table.columnIndexes[name], index < values.count else { return false }
            return values[index] == value
        case .firstWritten(let table, let change):
            guard let index = table.columnIndexes[name], !table.keyColumns.contains(index) else { return false }
            if change.kind != .append, change.totals.contains(where: { $0.column == name }) { return false }
            return table.keepsExactly(value, column: index)
        }
    }

    func holds(_ cell: RowState.Cell) -> Bool { holds(cell.name, cell.value) }
}

/// The app's row of a local write being turned into changes (`WriteContext.apply`): the app's
/// statements have all run, so the table already holds what the last of them left, and a state
/// of this row that names the row's values reads them from here instead.
struct LocalRow {
    let table: AppCatalog.Table
    /// The row's key bytes (`SQLValue.keyBytes`).
    let key: [UInt8]
    /// Its values before the statement, in declaration order; nil: there was no row.
    let before: [SQLValue]?
    /// Its values after the statement; nil: the statement deleted it.
    let after: [SQLValue]?
    /// Its rowid before the statement (`AppWriteCapture.Event.rowid`), where a state kept by
    /// rowid is found once the statement deleted the row; nil for an insert.
    var rowid: Int64? = nil

    /// What the table holds of the row after the statement.
    var holding: RowHolding { after.map { .left(table, $0) } ?? .nothing }

    /// The value the row held in column `name` before the statement, for a state that names it.
    func valueBefore(_ name: String) throws -> SQLValue {
        guard let before else { throw StoredRowState.rowValueMissing }
        return try AppRowValues.value(of: name, in: before, table: table)
    }
}
