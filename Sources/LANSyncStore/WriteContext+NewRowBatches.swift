import GRDB
import LANSyncCore

/// A merge's new rows written many to a statement.
///
/// Most changes a catch-up brings open rows this replica never heard of. One at a time, each
/// costs two statements: its state into `app_rows` and its row into the app's table, and a
/// statement's own cost (opening its cursors, closing them, resetting) is a good part of an
/// insert's: 16 rows to a statement make both inserts about a fifth cheaper a row (measured with
/// SQLite's C API; docs/journal/2026-11-speed.md).
///
/// A batch holds consecutive changes of a delta whose rows are taken for new: each was checked
/// with the store's numbers (so its stored state is encoded already, `FirstRow.stored`), wins
/// somewhere, opens a live row and lost nothing at its sender. Their states go in with one plain
/// INSERT: when any row is held already (or two of them are one row), SQLite refuses the whole
/// statement and undoes it, and those changes merge one at a time, in order, the general way.
/// So nothing is ever taken for new that was held, without asking which rows were inserted (a
/// RETURNING clause cost more than the batch saved).
extension WriteContext {
    /// The most changes a batch holds: the 16 rows to a statement measured above. A merge sends
    /// a batch at each of its looks at the app's waiting writes, which come as many rows apart
    /// (`LocalWriteQueue.rowsBetweenLooks`).
    static let newRowsPerBatch = LocalWriteQueue.rowsBetweenLooks

    /// Whether `change` can go in a batch of new rows (see above).
    static func batchable(_ change: RowChange, first: FirstRow, lost: [RowChange.LostCell]) -> Bool {
        first.stored != nil && first.isLive && lost.isEmpty && change.causalLength % 2 == 1
    }

    /// Merges the changes of `checked` at `indexes` (a batch, see above) and appends the indexes
    /// of those that changed the replica to `changed`, in order.
    mutating func mergeNewRows(_ indexes: ArraySlice<Int>, of checked: CheckedDelta, changed: inout [Int]) throws {
        var start = indexes.startIndex
        while start < indexes.endIndex {
            // Statements of 16, 8, 4, 2 or 1 rows: few shapes to prepare. A chunk holds rows of
            // one table, so that a table keeping states by rowid takes its rows so.
            let table = checked.delta.rows[indexes[start]].key.table
            let sameTable = indexes[start...].prefix { checked.delta.rows[$0].key.table == table }.count
            let count = Self.statementRows(for: sameTable)
            let chunk = indexes[start..<(start + count)]
            start += count
            var tables = [AppCatalog.Table]()
            tables.reserveCapacity(chunk.count)
            for index in chunk { tables.append(try appTable(named: checked.delta.rows[index].key.table)) }
            // Rows of tables that keep states by rowid: their states go in once the rows are in
            // (`storeRowidStates`); a row such a table shows is held, which no insert by key sees.
            let byRowid = zip(chunk, tables).allSatisfy { index, table in
                table.keepsStatesByRowid && table.keepsKeyExactly(checked.delta.rows[index].key.primaryKey)
            }
            if byRowid, let rowids = try insertNewRows(chunk, tables: tables, of: checked) {
                try countNewRows(chunk, tables: tables, of: checked, rowids: rowids, changed: &changed)
                continue
            }
            let fresh =
                try byRowid
                ? noneHeld(chunk, tables: tables, of: checked)
                : noneShown(chunk, tables: tables, of: checked) && insertNewStates(chunk, tables: tables, of: checked)
            guard fresh else {
                // A row of them is held: each merges the general way.
                for index in chunk {
                    if try mergeRow(checked.delta.rows[index], materialize: true, first: checked.firstRow(index)) {
                        changed.append(index)
                    }
                }
                continue
            }
            if !byRowid, let rowids = try insertRowsNamedByRowid(chunk, tables: tables, of: checked) {
                try countNewRows(chunk, tables: tables, of: checked, rowids: rowids, changed: &changed)
                continue
            }
            try countNewRows(chunk, tables: tables, of: checked, changed: &changed)
            try materializeNewRows(chunk, tables: tables, of: checked.delta, keys: { checked.firstRows[$0].key })
            if byRowid { try storeRowidStates(chunk, tables: tables, of: checked) }
        }
    }

    /// Indexes the new rows at `chunk` by their dots, counts them in the digest and their
    /// tables, and appends their indexes to `changed`. `rowids`: by index into `chunk`, the
    /// rowid at which a row's state is kept, which its dot's run then names (nil: by key).
    private mutating func countNewRows(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta,
        rowids: [Int64?]? = nil,
        changed: inout [Int]
    ) throws {
        for (position, (index, table)) in zip(chunk, tables).enumerated() {
            let (change, first) = (checked.delta.rows[index], checked.firstRows[index])
            _ = try number(of: change.dot.replica)
            if let rowid = rowids?[position] {
                try indexNewRow(dotKey: try dotKey(change.dot), table: table.number, rowid: rowid)
            } else {
                try indexNewRow(change.dot, table: table.number, key: first.key[...])
            }
            digest.insert(hash: first.digestHash)
            countRows(in: table.number, by: 1)
            changed.append(index)
        }
    }

    /// Writes the new rows at `chunk`, all of one table (which keeps states by rowid), into the
    /// app's table first, with one plain INSERT, then their states by the rowids they took;
    /// false, having written nothing, when they are not of one shape, a row of them is held (in
    /// `app_rows`, or shown by the table: SQLite then refuses the statement and undoes it), or a
    /// rule of the table refuses one. Those go the way that looks each row up first. No row is
    /// looked up by its key here: SQLite numbers a statement's new rows from the table's
    /// greatest rowid on, one after another (a declared table's key is never its rowid: the
    /// schema refuses that), so one seek to the table's end before the insert says which
    /// rowids they take (`StoredStates.nextRowids`; a table whose greatest rowid was taken
    /// numbers new rows at random, and then each is looked up). Returns the rowid each row's state is kept at, by
    /// index into `chunk` (nil: its table refused it, and its state is kept by key).
    private mutating func insertNewRows(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    ) throws -> [Int64?]? {
        let table = tables[0]
        let rows = chunk.map { checked.delta.rows[$0] }
        guard rows.allSatisfy({ $0.key.table == rows[0].key.table }) else { return nil }
        let present = rows.map { table.present(of: $0) }
        guard present.allSatisfy({ $0.indexes == present[0].indexes }),
            try noneHeldByKey(chunk, tables: tables, of: checked)
        else { return nil }
        guard case .inserted(let next) = try insertPlain(rows[...], shown: present[...], into: table) else {
            return nil
        }
        guard let rowids = next else { return try storeRowidStates(chunk, tables: tables, of: checked) }
        try insertRowidStates(zip(chunk, rowids).map { (table.number, $1, $0) }, of: checked)
        return rowids.map { $0 }
    }

    /// Writes the new rows at `chunk`, all of one table whose runs name rows by rowid
    /// (`AppCatalog.Table.namesRowsByRowid`) and whose states went in by key already, into the
    /// app's table with plain INSERTs, one for each stretch of rows that name the same columns,
    /// and returns the rowid each took, by index into `chunk`, for their dots' run: the ones
    /// after the table's greatest (`StoredStates.nextRowids`), or, where SQLite numbers them at
    /// random, each looked up. Nil when a key would not read back exactly from
    /// its row, or a rule of the table refuses a row (SQLite undoes that statement): the way
    /// below then writes every row of the chunk again, each alone where refused, and indexes
    /// them by key.
    private mutating func insertRowsNamedByRowid(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    ) throws -> [Int64?]? {
        let table = tables[0]
        let rows = chunk.map { checked.delta.rows[$0] }
        guard table.namesRowsByRowid,
            rows.allSatisfy({ $0.key.table == rows[0].key.table && table.keepsKeyExactly($0.key.primaryKey) })
        else { return nil }
        let present = rows.map { table.present(of: $0) }
        let states = try storedStates()
        var rowids = [Int64?]()
        rowids.reserveCapacity(rows.count)
        var start = 0
        while start < rows.count {
            var end = start + 1
            while end < rows.count, present[end].indexes == present[start].indexes { end += 1 }
            end = start + Self.statementRows(for: end - start)
            guard
                case .inserted(let next) = try insertPlain(rows[start..<end], shown: present[start..<end], into: table)
            else { return nil }
            if let next {
                rowids += next.map { $0 }
            } else {
                for index in start..<end { rowids.append(try states.rowid(of: table, key: rows[index].key.primaryKey)) }
            }
            start = end
        }
        return rowids
    }

    /// What a plain INSERT of new rows did.
    private enum PlainInsert {
        /// A rule of the table refused a row, and SQLite undid the statement.
        case refused
        /// The rows are in, at these rowids (nil: SQLite numbered them at random).
        case inserted(ClosedRange<Int64>?)
    }

    /// Inserts `rows`, new rows of `table` that name the same columns (`shown`, one each), with
    /// one plain INSERT, and says at which rowids (`StoredStates.nextRowids`).
    private mutating func insertPlain(
        _ rows: ArraySlice<RowChange>,
        shown: ArraySlice<AppCatalog.Table.Present>,
        into table: AppCatalog.Table
    ) throws -> PlainInsert {
        let insert = try rowStatements().replace(
            into: table,
            columns: shown.first!.indexes,
            rows: rows.count,
            replacing: false,
            db
        )
        var position: Int32 = 1
        for (row, present) in zip(rows, shown) { insert.bind(row.key.primaryKey, present.values, from: &position) }
        let next = try storedStates().nextRowids(of: table, count: rows.count)
        do {
            try insert.run()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            return .refused
        }
        return .inserted(next)
    }

    /// Whether no row at `chunk` is held: none shown by its table, none in `app_rows`.
    private mutating func noneHeld(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    )
        throws -> Bool
    {
        try noneShown(chunk, tables: tables, of: checked) && noneHeldByKey(chunk, tables: tables, of: checked)
    }

    /// Whether no row at `chunk` has a state in `app_rows`.
    private mutating func noneHeldByKey(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    )
        throws -> Bool
    {
        var keyed: [Int64: Bool] = [:]
        for (index, table) in zip(chunk, tables) {
            if keyed[table.number] == nil { keyed[table.number] = try holdsStatesByKey(table: table.number) }
            if keyed[table.number]!, try holdsState(table: table.number, key: checked.firstRows[index].key) {
                return false
            }
        }
        return true
    }

    /// Whether no row at `chunk` of a table that keeps states by rowid is shown by its table
    /// (and so held).
    private mutating func noneShown(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    )
        throws -> Bool
    {
        for (index, table) in zip(chunk, tables) where table.keepsStatesByRowid {
            if try storedStates().rowid(of: table, key: checked.delta.rows[index].key.primaryKey) != nil {
                return false
            }
        }
        return true
    }

    /// Inserts the states of the new rows at `chunk` by the rowids their tables show them at,
    /// in one statement; a row its table refused keeps its state by key (`keepEveryValue`).
    /// Returns each row's rowid, by index into `chunk` (nil for a refused row).
    @discardableResult
    private mutating func storeRowidStates(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    ) throws -> [Int64?] {
        var rows = [(table: Int64, rowid: Int64, index: Int)]()
        rows.reserveCapacity(chunk.count)
        var rowids = [Int64?]()
        rowids.reserveCapacity(chunk.count)
        for (index, table) in zip(chunk, tables) {
            let rowid = try storedStates().rowid(of: table, key: checked.delta.rows[index].key.primaryKey)
            rowids.append(rowid)
            if let rowid { rows.append((table.number, rowid, index)) }
        }
        try insertRowidStates(rows, of: checked)
        return rowids
    }

    /// Inserts the states of the changes at `rows`' indexes by their tables and rowids, in one
    /// statement.
    private mutating func insertRowidStates(
        _ rows: [(table: Int64, rowid: Int64, index: Int)],
        of checked: CheckedDelta
    ) throws {
        guard !rows.isEmpty else { return }
        let insert = try rowStatements().insertRowidStates(rows.count, db)
        var parameter: Int32 = 1
        for row in rows {
            insert.bind(parameter, row.table)
            insert.bind(parameter + 1, row.rowid)
            insert.bind(parameter + 2, checked.firstRows[row.index].stored!)
            parameter += 3
        }
        try insert.run()
    }

    /// A new row of a declared table as its app's table will show it.
    private struct NewAppRow {
        let change: RowChange
        let keyBytes: [UInt8]
        let present: AppCatalog.Table.Present
        let table: AppCatalog.Table

        var key: [SQLValue] { change.key.primaryKey }
    }

    /// The largest statement size (a power of two up to `newRowsPerBatch`) for `remaining` rows.
    private static func statementRows(for remaining: Int) -> Int {
        var count = newRowsPerBatch
        while count > remaining { count /= 2 }
        return count
    }

    /// Inserts the stored states of the changes at `chunk` in one statement; false, having
    /// written nothing, when a row of them is held already.
    private mutating func insertNewStates(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of checked: CheckedDelta
    ) throws -> Bool {
        let insert = try rowStatements().insertStates(chunk.count, skippingHeld: false, db)
        var parameter: Int32 = 1
        for (index, table) in zip(chunk, tables) {
            let first = checked.firstRows[index]
            insert.bind(parameter, table.number)
            insert.bind(parameter + 1, first.key)
            insert.bind(parameter + 2, first.stored!)
            parameter += 3
        }
        do {
            try insert.run()
            return true
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            // The primary key: nothing else of these rows can break a rule.
            return false
        }
    }

    /// Writes the new rows of declared tables into the app's tables: consecutive rows of one
    /// table with the same columns in one INSERT OR REPLACE. When SQLite refuses one of them (a
    /// NOT NULL or CHECK rule of this app's version; see `materialize`), the statement is undone
    /// and each row is written alone, the refused one left out.
    private mutating func materializeNewRows(
        _ chunk: ArraySlice<Int>,
        tables: [AppCatalog.Table],
        of delta: Delta,
        keys: (Int) -> [UInt8]
    ) throws {
        var rows = [NewAppRow]()
        rows.reserveCapacity(chunk.count)
        for (index, table) in zip(chunk, tables) where table.declared != nil {
            rows.append(
                NewAppRow(
                    change: delta.rows[index],
                    keyBytes: keys(index),
                    present: table.present(of: delta.rows[index]),
                    table: table
                )
            )
        }
        var start = 0
        while start < rows.count {
            var end = start + 1
            while end < rows.count, end - start < Self.newRowsPerBatch, rows[end].table === rows[start].table,
                rows[end].present.indexes == rows[start].present.indexes
            {
                end += 1
            }
            let group = rows[start..<(start + Self.statementRows(for: end - start))]
            start = group.endIndex
            try materialize(group)
        }
    }

    /// Writes `group` (rows of one table with the same columns) in one INSERT OR REPLACE, or each
    /// alone when SQLite refuses one of them.
    private mutating func materialize(_ group: ArraySlice<NewAppRow>) throws {
        let first = group.first!
        guard group.count > 1 else { return try materializeAlone(first) }
        let insert = try rowStatements().replace(
            into: first.table,
            columns: first.present.indexes,
            rows: group.count,
            db
        )
        var position: Int32 = 1
        for row in group { insert.bind(row.key, row.present.values, from: &position) }
        do {
            try insert.run()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            for row in group { try materializeAlone(row) }
        }
    }

    /// Writes one new row; when SQLite refuses it, its state keeps every value, since the table
    /// does not hold them.
    private mutating func materializeAlone(_ row: NewAppRow) throws {
        guard try !materialize(key: row.key, in: row.table, columns: row.present) else { return }
        try keepEveryValue(of: row.change, table: row.table, key: row.keyBytes)
    }
}
