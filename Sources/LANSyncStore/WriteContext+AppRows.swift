import Foundation
package import GRDB
import LANSyncCore
import Synchronization

/// App tables inside one write transaction: turning what the app's SQL did into changes (local
/// writes), merging changes from peers, and keeping the app's tables, the dot index, the digest
/// and the row counts in step with each row's CRDT state.
extension WriteContext {
    mutating func catalog() throws -> AppCatalog {
        if let appCatalog { return appCatalog }
        let catalog = try apps.catalogCache.catalog(db)
        appCatalog = catalog
        return catalog
    }

    /// The table's catalog entry, registering a table first heard of from a peer.
    mutating func appTable(named name: String) throws -> AppCatalog.Table {
        var catalog = try catalog()
        if let table = catalog.table(named: name) { return table }
        if let number = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT num FROM app_tables WHERE name = ?"),
            arguments: [name]
        ) {
            catalog.add(number: number, name: name)
        } else {
            try db.execute(sql: "INSERT INTO app_tables (name) VALUES (?)", arguments: [name])
            catalog.add(number: db.lastInsertedRowID, name: name)
        }
        appCatalog = catalog
        return catalog.table(named: name)!
    }

    /// The statements every app-table row uses, prepared once per transaction.
    mutating func rowStatements() throws -> AppRowStatements {
        if let appStatements { return appStatements }
        let statements = try AppRowStatements(db)
        appStatements = statements
        return statements
    }

    /// What the app's statements left of row `key` of `table`, when it is the row of the local
    /// write being turned into changes (`LocalRow`); else nothing is known of it.
    private func localHolding(table: AppCatalog.Table, key: [UInt8]) -> RowHolding {
        guard let local = localRow, local.table.number == table.number, local.key == key else { return .nothing }
        return local.holding
    }

    /// The reader of the app's rows, for the states that name their values.
    mutating func rowReader() throws -> AppRowValues {
        if let appRowReader { return appRowReader }
        let reader = AppRowValues(db, catalog: try catalog())
        appRowReader = reader
        return reader
    }

    /// A row's held state; nil when the row was never heard of. Its cells kept as the app's
    /// row's values read the table, or, for the row of a local write being turned into changes,
    /// the values the row had before that write (`LocalRow.before`).
    mutating func heldRow(table: Int64, key: [UInt8]) throws -> RowState? {
        let (names, replicas) = (try columnNumbers().names, replicasByNumber)
        let reader = try rowReader()
        let local = localRow.flatMap { $0.table.number == table && $0.key == key ? $0 : nil }
        let found = try storedStates().withState(table: table, key: key, rowid: local?.rowid) { bytes, place in
            let state: RowState
            if let local {
                state = try StoredRowState.decode(
                    bytes,
                    columns: names,
                    replicas: replicas,
                    rowValue: local.valueBefore
                )
            } else {
                state = try reader.decode(bytes, table: table, key: key, columns: names, replicas: replicas)
            }
            return (state, place)
        }
        if case .rowid(let rowid) = found?.1 { statesAtRowids[RowAddress(table: table, key: key)] = rowid }
        return found?.0
    }

    /// The finder of rows' stored states, by key or by rowid.
    mutating func storedStates() throws -> StoredStates {
        if let storedStateLookup { return storedStateLookup }
        let lookup = try StoredStates(db, catalog: try catalog())
        storedStateLookup = lookup
        return lookup
    }

    /// Writes a row's state by its key (`app_rows`); a state the transaction read by rowid
    /// leaves `app_rowid_states`, so that the row keeps one state. `dots`: the state's live dots
    /// (`RowState.liveDotList`), each indexed already. `leavingRowid`: the app's table no longer
    /// shows the row where it did (deleted, or refused by a rule), in a table whose runs name
    /// rows by rowid (`AppCatalog.Table.namesRowsByRowid`).
    mutating func writeStateByKey(
        table: Int64,
        key: [UInt8],
        state: ArraySlice<UInt8>,
        dots: [Dot],
        leavingRowid: Bool = false
    ) throws {
        let statements = try rowStatements()
        try statements.upsertState.run(table: table, key: key, state: state)
        if !statesAtRowids.isEmpty, let rowid = statesAtRowids.removeValue(forKey: RowAddress(table: table, key: key)) {
            let delete = statements.deleteRowidState
            delete.bind(1, table)
            delete.bind(2, rowid)
            try delete.run()
        } else if !leavingRowid {
            return
        }
        // A run of the dot index may name the row by the rowid it leaves (see `DotRun`): each
        // dot the state still shows is indexed by key, which readers take over the run's. (A
        // dot indexed by key already keeps its row: `INSERT OR IGNORE`.)
        for dot in dots {
            let number = try dotKey(dot)
            // A run is stored only while no `app_ops` row holds one of its dots.
            if pendingRun?.contains(number) == true { try storePendingRun() }
            let insert = statements.insertOp
            insert.bind(1, number)
            insert.bind(2, table)
            insert.bind(3, key)
            try insert.run()
        }
    }

    /// Whether `app_rows` holds any state of table number `table`.
    mutating func holdsStatesByKey(table: Int64) throws -> Bool {
        let select = try rowStatements().anyStateByKey
        select.bind(1, table)
        var any = false
        try select.forEachRow { _ in any = true }
        return any
    }

    /// Whether `app_rows` holds a state of row `key` of table number `table`.
    mutating func holdsState(table: Int64, key: some Collection<UInt8>) throws -> Bool {
        try storedStates().withState(table: table, key: Array(key)) { _, place in place == .key } ?? false
    }

    /// The numbering of column names in stored states, loaded on first use in the transaction.
    mutating func columnNumbers() throws -> ColumnNumbering {
        if let columnNumbering { return columnNumbering }
        let numbering = try ColumnNumbering.load(db)
        columnNumbering = numbering
        return numbering
    }

    /// A state as `app_rows` keeps it for row `key` (its bytes) of table number `table`, read.
    mutating func storedState(_ data: Data, table: Int64, key: [UInt8]) throws -> RowState {
        try rowReader().decode(
            data,
            table: table,
            key: key,
            columns: try columnNumbers().names,
            replicas: replicasByNumber
        )
    }

    /// Makes the app's table show a held row again (its app now declares its table or a column
    /// of it), and keeps every value in the row's state when the table refuses the row.
    mutating func showAgain(_ state: RowState, key: [UInt8], in table: AppCatalog.Table) throws {
        let holding = try materialize(state, key: try SQLValue.key(from: key), in: table)
        guard state.exists, case .nothing = holding else { return }
        try writeStateByKey(
            table: table.number,
            key: key,
            state: try storedBytes(of: state, row: .nothing)[...],
            dots: state.liveDotList,
            leavingRowid: table.namesRowsByRowid
        )
    }

    /// `state` as `app_rows` keeps it (see `StoredRowState`); `row`: what the app's table holds
    /// of the row, whose values the state names instead of keeping them again.
    private mutating func storedBytes(of state: RowState, row: RowHolding) throws -> [UInt8] {
        _ = try columnNumbers()
        for stamp in state.stamps { _ = try number(of: stamp.dot.replica) }
        var out = [UInt8]()
        out.reserveCapacity(160)
        try StoredRowState.encode(
            state,
            columns: &columnNumbering!,
            replicas: numbers,
            db,
            rowHolds: row.holds,
            to: &out
        )
        return out
    }

    /// Merges one change into its row: the CRDT state, the dot index, the digest, the counts,
    /// and (when `materialize`, for changes from peers) the app's table. Returns whether the row
    /// changed. `lost`: the cells of the change that lost at the sender (signed changes), kept in
    /// its stub; the caller checks after the whole delta that they lost here too.
    /// `first`: what the change makes of a row not heard of yet, when the check computed it.
    mutating func mergeRow(
        _ change: RowChange,
        lost: [RowChange.LostCell] = [],
        materialize: Bool,
        first: FirstRow? = nil
    ) throws -> Bool {
        let table = try appTable(named: change.key.table)
        let key = first?.key ?? SQLValue.keyBytes(change.key.primaryKey)
        if try storeFirst(change, lost: lost, in: table, key: key, materialize: materialize, first: first) {
            return true
        }
        return try mergeRow(
            change,
            lost: lost,
            table: table,
            key: key,
            held: try heldRow(table: table.number, key: key),
            materialize: materialize
        )
    }

    /// The same, for a row already looked up.
    mutating func mergeRow(
        _ change: RowChange,
        lost: [RowChange.LostCell] = [],
        table: AppCatalog.Table,
        key: [UInt8],
        held: RowState?,
        materialize: Bool
    ) throws -> Bool {
        var state = held ?? RowState()
        guard state.merge(change) else {
            // Nothing of it wins here: unless it is a change held already, it is superseded on
            // arrival, and only its stub is kept.
            if held?.liveDotList.contains(change.dot) != true {
                var stub = RowChangeStub(of: change, allLost: true, hasher: hasher)
                stub.add(lost)
                try keepDeadStub(stub, dot: change.dot, table: table.number, key: key)
            }
            return false
        }
        // The table first: the state names the values the row then holds.
        let holding =
            materialize && table.declared != nil
            ? try self.materialize(state, key: change.key.primaryKey, in: table)
            : localHolding(table: table, key: key)
        try store(state, of: change, lost: lost, in: table, key: key, replacing: held, row: holding)
        return true
    }

    /// Stores `change` as the first heard of its row, or returns false, writing nothing, when the
    /// row is held already. Most rows of a bulk insert or a catch-up are new, so they are not looked
    /// up first: the row's state, the change alone, is inserted unless its key is taken, and the
    /// rest of what `store` and `materialize` would write follows straight from the change,
    /// without building a `RowState` (see `RowState.appendFirst`).
    private mutating func storeFirst(
        _ change: RowChange,
        lost: [RowChange.LostCell],
        in table: AppCatalog.Table,
        key: [UInt8],
        materialize: Bool,
        first: FirstRow?
    ) throws -> Bool {
        let statements = try rowStatements()
        _ = try number(of: change.dot.replica)
        // A row its table shows is held, by key or by rowid (`keepsStatesByRowid`), which the
        // insert below does not see.
        if materialize, table.keepsStatesByRowid,
            try storedStates().rowid(of: table, key: change.key.primaryKey) != nil
        {
            return false
        }
        // What the table will hold of the row: what LANSync writes of it below, or what the
        // app's statement left. Should the table not show the row after all (a rule refuses
        // it), its state is written again with every value in it.
        let exists = change.causalLength % 2 == 1
        let holding: RowHolding
        if materialize {
            holding = .first(change, table: table)
        } else {
            holding = localHolding(table: table, key: key)
        }
        let stored: [UInt8]
        if let encoded = first?.stored {
            stored = encoded
        } else {
            _ = try columnNumbers()
            var bytes = [UInt8]()
            bytes.reserveCapacity(160)
            try StoredRowState.encodeFirst(
                change,
                columns: &columnNumbering!,
                replicas: numbers,
                db,
                rowHolds: { holding.holds(change.values[$0].column, change.values[$0].value) },
                to: &bytes
            )
            stored = bytes
        }
        // A new row its table will show keeps its state by rowid where the table keeps them so,
        // written once the row is in; a row held by key is looked up instead of tried.
        let byRowid = materialize && exists && table.keepsStatesByRowid && table.keepsKeyExactly(change.key.primaryKey)
        if byRowid {
            if try storedStates().withState(table: table.number, key: key, { _, place in place == .key }) == true {
                return false
            }
        } else {
            guard try statements.insertNewState.run(table: table.number, key: key, state: stored[...]) == 1 else {
                return false
            }
        }
        let first = first ?? FirstRow(change, key: key, hasher: hasher, buffer: &firstRowBuffer)
        // A new row this merge writes into a table whose runs name rows by rowid is indexed by
        // that rowid once the row is in, unless a stub of its dot must be kept now (a run takes
        // no dot `app_ops` holds).
        let indexByRowid =
            materialize && exists && table.namesRowsByRowid && table.keepsKeyExactly(change.key.primaryKey)
            && first.isLive && lost.isEmpty
        if first.isLive {
            if !indexByRowid { try indexNewRow(change.dot, table: table.number, key: key[...]) }
            if !lost.isEmpty {
                try setLiveStub(RowChangeStub(of: change, lost: lost), dot: change.dot, table: table.number, key: key)
            }
        } else {
            // It wins nothing: an update that sets nothing, or one whose every cell lost at the sender.
            try keepDeadStub(RowChangeStub(of: change, lost: lost), dot: change.dot, table: table.number, key: key)
        }
        digest.insert(hash: first.digestHash)
        if exists { countRows(in: table.number, by: 1) }
        guard materialize, table.declared != nil else { return true }
        guard exists else {
            try self.materialize(key: change.key.primaryKey, in: table, columns: nil)
            return true
        }
        if try !self.materialize(key: change.key.primaryKey, in: table, columns: table.present(of: change)) {
            if indexByRowid { try indexNewRow(change.dot, table: table.number, key: key[...]) }
            try keepEveryValue(of: change, table: table, key: key)
        } else if byRowid || indexByRowid {
            // The row was not shown, so the INSERT OR REPLACE that wrote it inserted it alone.
            let rowid = db.lastInsertedRowID
            if byRowid {
                let insert = try statements.insertRowidStates(1, db)
                insert.bind(1, table.number)
                insert.bind(2, rowid)
                insert.bind(3, stored)
                try insert.run()
            }
            if indexByRowid { try indexNewRow(dotKey: try dotKey(change.dot), table: table.number, rowid: rowid) }
        }
        return true
    }

    /// Writes the state of a row made by `change` alone again with every value in it: its table
    /// does not show it after all.
    mutating func keepEveryValue(of change: RowChange, table: AppCatalog.Table, key: [UInt8]) throws {
        _ = try columnNumbers()
        var bytes = [UInt8]()
        try StoredRowState.encodeFirst(change, columns: &columnNumbering!, replicas: numbers, db, to: &bytes)
        // Its dot is indexed by key: a row whose table refused its first write never had a rowid.
        try writeStateByKey(table: table.number, key: key, state: bytes[...], dots: [change.dot])
    }

    /// Writes a row's new state (after merging `change`) and everything kept in step with it.
    private mutating func store(
        _ state: RowState,
        of change: RowChange,
        lost: [RowChange.LostCell],
        in table: AppCatalog.Table,
        key: [UInt8],
        replacing held: RowState?,
        row holding: RowHolding
    ) throws {
        let rowKey = change.key
        let statements = try rowStatements()
        let before = held?.liveDotList ?? []
        let after = state.liveDotList
        let stubs = try stubs(after: change, lostAtSender: lost, of: held ?? RowState(), making: state)
        for dot in before where !after.contains(dot) {
            statements.deleteOp.bind(1, try dotKey(dot))
            try statements.deleteOp.run()
        }
        for dot in after where !before.contains(dot) { try insertLiveDot(dot, table: table.number, key: key) }
        for (dot, stub) in stubs {
            if after.contains(dot) {
                try setLiveStub(stub, dot: dot, table: table.number, key: key)
            } else {
                try keepDeadStub(stub, dot: dot, table: table.number, key: key)
            }
        }
        var identity = Self.identity(of: rowKey.table, key: key)
        var row = identity
        state.append(to: &row)
        // A row the table does not show after this write may have left the rowid a run names.
        let shown: Bool
        if case .nothing = holding { shown = false } else { shown = true }
        try writeStateByKey(
            table: table.number,
            key: key,
            state: try storedBytes(of: state, row: holding)[...],
            dots: after,
            leavingRowid: table.namesRowsByRowid && !shown
        )
        digest.insert(hash: hasher.hash(row))
        if let held {
            held.append(to: &identity)
            digest.remove(hash: hasher.hash(identity))
        }
        let existed = held?.exists ?? false
        if existed != state.exists { countRows(in: table.number, by: state.exists ? 1 : -1) }
    }

    /// The stubs a merge of `change` into `held`, making `state`, changes: of each change of the
    /// row that the state no longer shows whole (a cell of it lost, or its kind is no longer the
    /// row's marker), its header and every cell of it that lost, so that its leaf can still be
    /// sent (`ChangeLeaf`). A change shown whole has no stub.
    /// `lostAtSender`: the cells of `change` that lost at the sender.
    private mutating func stubs(
        after change: RowChange,
        lostAtSender: [RowChange.LostCell],
        of held: RowState,
        making state: RowState
    ) throws -> [(Dot, RowChangeStub)] {
        var losses = Dictionary(grouping: state.losses(of: change, before: held, hasher: hasher), by: \.dot)
        if !lostAtSender.isEmpty { losses[change.dot, default: []] += lostAtSender.map { (change.dot, $0) } }
        var dots = held.liveDotList
        if !dots.contains(change.dot) { dots.append(change.dot) }
        var stubs: [(Dot, RowChangeStub)] = []
        for dot in dots {
            let lost = losses[dot]?.map(\.cell) ?? []
            let shown = state.change(key: change.key, dot: dot)
            var stub: RowChangeStub
            if let heldView = held.change(key: change.key, dot: dot) {
                if shown == heldView && lost.isEmpty { continue }
                // A change without a stub was shown whole: its held view is the change.
                stub = try storedStub(dot) ?? RowChangeStub(of: heldView)
            } else {
                if shown == change && lost.isEmpty { continue }
                stub = RowChangeStub(of: change)
            }
            stub.add(lost)
            // A cell that wins here after all (it came whole from another sender) is not lost.
            if let shown { stub.remove(shown) }
            stubs.append((dot, stub))
        }
        return stubs
    }

    /// The stub kept for a live change, if it has one.
    private mutating func storedStub(_ dot: Dot) throws -> RowChangeStub? {
        let select = try rowStatements().selectOpStub
        select.bind(1, try dotKey(dot))
        var bytes: [UInt8]?
        try select.forEachRow { columns in bytes = columns.isNull(0) ? nil : columns.withBlob(0) { Array($0) } }
        guard let bytes else { return nil }
        do {
            return try RowChangeStub(canonicalBytes: bytes)
        } catch {
            throw StoreError(.database, "the stub of change \(dot) does not read (\(error)); the database is damaged")
        }
    }

    /// Keeps the stub of a live change of which a part lost, in its own `app_ops` row (also for a
    /// change a run indexes: readers take that row for its dot).
    private mutating func setLiveStub(_ stub: RowChangeStub, dot: Dot, table: Int64, key: [UInt8]) throws {
        let number = try dotKey(dot)
        // Its run is stored first: a run is stored only while no `app_ops` row holds one of its dots.
        if pendingRun?.contains(number) == true { try storePendingRun() }
        let statement = try rowStatements().setOpStub
        statement.bind(1, number)
        statement.bind(2, table)
        statement.bind(3, key)
        statement.bind(4, stub.canonicalBytes)
        try statement.run()
    }

    /// Keeps the stub of a change of which nothing wins any more.
    private mutating func keepDeadStub(_ stub: RowChangeStub, dot: Dot, table: Int64, key: [UInt8]) throws {
        let insert = try rowStatements().insertDeadStub
        insert.bind(1, try dotKey(dot))
        insert.bind(2, table)
        insert.bind(3, key)
        insert.bind(4, stub.canonicalBytes)
        try insert.run()
    }

    /// What the digest hashes for a row, before its state: the row's identity (table, key).
    /// Reserved for a state of a few hundred bytes to follow.
    private static func identity(of table: String, key: [UInt8]) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(key.count + table.utf8.count + 4 + 256)
        FirstRow.appendIdentity(table: table, key: key, to: &bytes)
        return bytes
    }

    /// Indexes a write that wins somewhere in a row's state, so that deltas find it by its dot.
    mutating func insertLiveDot(_ dot: Dot, table: Int64, key: [UInt8]) throws {
        let number = try dotKey(dot)
        if pendingRun?.contains(number) == true { throw dotReused(dot) }
        if try DotRun.holds(number, db) { throw dotReused(dot) }
        let insert = try rowStatements().insertOp
        insert.bind(1, number)
        insert.bind(2, table)
        insert.bind(3, key)
        guard try insert.run() == 1 else { throw dotReused(dot) }
    }

    /// Indexes the write that made a new row: in a run with the dots before it when they are
    /// consecutive (a bulk insert, a catch-up), else in a run of its own (see `DotRun`).
    mutating func indexNewRow(_ dot: Dot, table: Int64, key: ArraySlice<UInt8>) throws {
        try indexNewRow(dotKey: try dotKey(dot), table: table, key: key)
    }

    /// The same for a dot given as its `DotKey`.
    mutating func indexNewRow(dotKey number: Int64, table: Int64, key: ArraySlice<UInt8>) throws {
        if pendingRun?.extend(table: table, dot: number, key: key) == true { return }
        try storePendingRun()
        pendingRun = DotRun(table: table, dot: number, key: key)
    }

    /// The same for a new row of a table that keeps states by rowid, whose state is kept at
    /// `rowid`: its run names the rowid (see `DotRun`).
    mutating func indexNewRow(dotKey number: Int64, table: Int64, rowid: Int64) throws {
        if pendingRun?.extend(table: table, dot: number, rowid: rowid) == true { return }
        try storePendingRun()
        pendingRun = DotRun(table: table, dot: number, rowid: rowid)
    }

    /// Stores the run of new rows' dots under way: before the transaction saves, and after each
    /// of the app's writes (whose savepoint then holds it whole).
    mutating func storePendingRun() throws {
        guard let run = pendingRun else { return }
        pendingRun = nil
        if let taken = try run.write(db) {
            throw dotReused(try RowDecoding.dot(taken, replicas: replicasByNumber))
        }
    }

    mutating func countRows(in table: Int64, by change: Int) {
        rowCountChanges[table, default: 0] += change
        rowCount += change
    }

    /// Makes the app's table show a row's state: the row with the values of its latest life
    /// (columns it has no value for take their defaults), or no row once deleted. A state the
    /// table cannot hold yet (a NOT NULL column whose value has not arrived, a CHECK of this
    /// app's version that a newer app's value breaks) leaves the row out of the table until
    /// the changes that complete it arrive; the state itself is kept and synced.
    /// `table` must be declared by this replica's app. Returns what the table then holds of the row.
    @discardableResult
    mutating func materialize(_ state: RowState, key: [SQLValue], in table: AppCatalog.Table) throws -> RowHolding {
        guard state.exists else {
            try materialize(key: key, in: table, columns: nil)
            return .nothing
        }
        let present = table.present(
            cells: state.columns,
            name: \.name,
            value: \.value,
            counted: state.counters,
            name: \.name,
            total: table.value(of:)
        )
        return try materialize(key: key, in: table, columns: present, shown: true) ? .written(table, present) : .nothing
    }

    /// Writes row `key` of the app's table with `columns` (declaration indexes and values; the
    /// rest take their defaults), or deletes it when `columns` is nil or the row breaks a rule.
    /// `shown`: the table may show the row already (a held row's merge); it is then updated in
    /// place, keeping its rowid, and inserted only when the table does not show it.
    /// Returns whether the table shows the row with `columns`.
    @discardableResult
    mutating func materialize(
        key: [SQLValue],
        in table: AppCatalog.Table,
        columns: AppCatalog.Table.Present?,
        shown: Bool = false
    ) throws -> Bool {
        let statements = try rowStatements()
        func deleteRow() throws {
            let delete = try statements.delete(from: table, db)
            for (index, value) in key.enumerated() { delete.bind(Int32(index + 1), value) }
            try delete.run()
        }
        guard let columns else {
            try deleteRow()
            return false
        }
        if shown {
            let update = try statements.update(table, columns: columns.indexes, db)
            var position: Int32 = 1
            update.bind(key, columns.values, from: &position)
            do {
                if try update.run() > 0 { return true }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                try deleteRow()
                return false
            }
        }
        let insert = try statements.replace(into: table, columns: columns.indexes, db)
        var position: Int32 = 1
        insert.bind(key, columns.values, from: &position)
        do {
            try insert.run()
            return true
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            try deleteRow()
            return false
        }
    }

    /// Writes the per-table live row counts that moved.
    mutating func saveRowCounts() throws {
        let statement = try db.cachedStatement(sql: "UPDATE app_tables SET row_count = row_count + ? WHERE num = ?")
        for (table, change) in rowCountChanges where change != 0 { try statement.execute(arguments: [change, table]) }
        rowCountChanges.removeAll()
    }

    // MARK: Local writes

    /// Runs an app's SQL in a savepoint and turns every row it touched into changes made here
    /// at `now`: each with the next dot and clock reading, merged like a peer's change (the
    /// app's table already shows it). When the app's code or a rule fails, the savepoint is
    /// rolled back: nothing of this write stays, and other writes sharing the transaction do.
    mutating func writeAppTables<T>(now: UInt64, _ body: (Database) throws -> T) throws -> T {
        let recorder = apps.capture
        let before = self
        _ = recorder.takeEvents()
        var result: T?
        var failure: (any Error)?
        try db.inSavepoint {
            do {
                let catalog = try catalog()
                result = try recorder.with(.local, catalog: catalog) {
                    try AppSQLGuard.run(on: db, catalog.appScope(writes: true)) { try body(db) }
                }
                let captured = recorder.takeEvents()
                // As a merge: a row written again from its state (a one-way column, `makeChange`)
                // passes the tables' guard and is not captured as the app's write.
                try recorder.with(.merging) {
                    for event in captured.events { try apply(event, encoded: captured.encoded, now: now) }
                }
                try storeQueuedStates(captured.encoded)
                recorder.recycle(captured)
                try storePendingRun()
                appendOnlyRowsDeletedHere = []
                return .commit
            } catch {
                _ = recorder.takeEvents()
                failure = error
                return .rollback
            }
        }
        if let failure {
            // The savepoint undid the rows; this undoes the bookkeeping (dots, clock, digest, counts).
            self = before
            throw IsolatedWriteFailure(error: failure)
        }
        return result!
    }

    /// Turns one captured row operation into changes (see `AppWriteCapture.Event` for the arguments).
    private mutating func apply(_ event: AppWriteCapture.Event, encoded: [UInt8], now: UInt64) throws {
        guard let table = try catalog().tables[event.table], let declared = table.declared else {
            throw StoreError(
                .database,
                "a write was captured for app table \(event.table), which is not declared; the database is damaged"
            )
        }
        if let range = event.encoded,
            try insertEncoded(encoded, range: range, into: table, now: now, rowid: event.rowid)
        {
            if encodedInsertBuffers.queued.count >= Self.rowsQueued { try storeQueuedStates(encoded) }
            return
        }
        // Anything else may read a row's state: the new rows queued before go in first.
        try storeQueuedStates(encoded)
        if let range = event.encoded {
            // Values too large for a change: the general way refuses them, saying why.
            return try insert(try SQLValue.values(from: Array(encoded[range])), into: table, now: now)
        }
        let arguments = event.arguments
        switch event.operation {
        case .insert:
            guard arguments.count == table.columns.count else { throw malformedCapture(declared) }
            try insert(arguments, into: table, now: now)
        case .update:
            let count = table.columns.count
            guard arguments.count == table.maskCount + 2 * count else { throw malformedCapture(declared) }
            let masks = arguments[0..<table.maskCount].map { value -> Int64 in
                if case .integer(let mask) = value { return mask }
                return 0
            }
            let old = Array(arguments[table.maskCount..<table.maskCount + count])
            let new = Array(arguments[(table.maskCount + count)...])
            let oldKey = table.keyColumns.map { old[$0] }
            let newKey = table.keyColumns.map { new[$0] }
            if newKey != oldKey {
                // A key that changes is another row: the old one is deleted, the new one inserted.
                try delete(old: old, from: table, now: now, rowid: event.rowid)
                try insert(new, into: table, now: now)
                return
            }
            let changed = table.columns.indices.filter { (masks[$0 / 62] >> ($0 % 62)) & 1 == 1 }
            try update(table: table, changed: changed, old: old, new: new, now: now, rowid: event.rowid)
        case .delete:
            guard arguments.count == table.columns.count else { throw malformedCapture(declared) }
            try delete(old: arguments, from: table, now: now, rowid: event.rowid)
        }
    }

    func malformedCapture(_ table: AppSchema.Table) -> StoreError {
        StoreError(
            .database,
            "a captured write to \(table.name) does not match its declaration; the database is damaged"
        )
    }

    mutating func insert(
        _ values: [SQLValue],
        into table: AppCatalog.Table,
        now: UInt64,
        stamp: (HybridTimestamp, Dot)? = nil
    ) throws {
        let key = try checkedKey(table.keyColumns.map { values[$0] }, table)
        let rowKey = RowKey(table: table.name, primaryKey: key)
        let keyBytes = SQLValue.keyBytes(key)
        localRow = LocalRow(table: table, key: keyBytes, before: nil, after: values)
        defer { localRow = nil }
        let plain = table.plainColumns.map { RowChange.Value(column: table.columns[$0], value: values[$0]) }
        try checkSize(plain, of: rowKey)
        // An insert that opens a life leaves out the columns at their default (`leftAtDefault`).
        let opening =
            table.hasDefaultsLeftOut
            ? table.writtenByInsert(values).map { RowChange.Value(column: table.columns[$0], value: values[$0]) }
            : plain
        // Most rows an app inserts are new to this replica: the change that opens the row is
        // tried first, and a row held already (deleted, or in a life its table does not show) is
        // looked up after, keeping the same stamp. `stamp`: the row was tried already, with it.
        let (hlc, dot) = stamp ?? (tick(now: now), nextDot())
        var firstTotals = [RowChange.Total]()
        // Whether the new life shows another value than written (a REAL counter's rounding).
        var firstRewrites = false
        if !table.appendOnly {
            for index in table.counterColumns where table.leftAtDefault[index].map({ $0 != values[index] }) ?? true {
                let own = try own(RowState(), table, index, new: values[index], old: .integer(0))
                firstTotals.append(.init(column: table.columns[index], total: own.total))
                firstRewrites = firstRewrites || own.showsOther
            }
        }
        if stamp == nil {
            let first = RowChange(
                key: rowKey,
                kind: table.appendOnly ? .append : .insert,
                causalLength: 1,
                hlc: hlc,
                dot: dot,
                values: opening,
                totals: firstTotals
            )
            if try storeFirst(first, lost: [], in: table, key: keyBytes, materialize: firstRewrites, first: nil) {
                return
            }
        }
        let heldState = try heldRow(table: table.number, key: keyBytes)
        let held = heldState ?? RowState()
        let kind: RowChange.Kind
        let life: UInt64
        var written = opening
        var totals = [RowChange.Total]()
        var rewrites = firstRewrites
        if table.appendOnly {
            guard !held.isAppended else {
                throw StoreError(
                    .sql,
                    "\(table.declared!.name) is append-only and already holds a row with key "
                        + "\(rowKey.primaryKey.map(\.description).joined(separator: ", ")); append a row with a new key"
                )
            }
            // Deleted with its parent: an append of its key could never win that life back.
            guard heldState == nil || held.causalLength < 2 else {
                let key = rowKey.primaryKey.map(\.description).joined(separator: ", ")
                if appendOnlyRowsDeletedHere.contains(RowAddress(table: table.number, key: keyBytes)) {
                    throw StoreError(
                        .sql,
                        "\(table.declared!.name) is append-only and held a row with key \(key), which this write "
                            + "replaced (INSERT OR REPLACE) or deleted; a key of an append-only table is never used "
                            + "again: append a row with a new key"
                    )
                }
                throw StoreError(
                    .sql,
                    "\(table.declared!.name) is append-only and held a row with key "
                        + "\(rowKey.primaryKey.map(\.description).joined(separator: ", ")) that went with its parent; "
                        + "a key of an append-only table is never used again: append a row with a new key"
                )
            }
            (kind, life) = (.append, 1)
        } else if held.exists {
            // INSERT OR REPLACE over a live row: every column is written, in the row's life.
            (kind, life, written, rewrites) = (.update, held.causalLength, plain, false)
            for index in table.counterColumns
            where !(table.totalsKinds[table.columns[index]]!.isOneWay && values[index] == .null) {
                let own = try own(
                    held,
                    table,
                    index,
                    new: values[index],
                    old: .integer(held.counter(table.columns[index]))
                )
                totals.append(.init(column: table.columns[index], total: own.total))
                rewrites = rewrites || own.showsOther
            }
        } else {
            // A new life starts every counter from nothing, as the first change did.
            (kind, life, totals) = (.insert, held.causalLength + 1, firstTotals)
        }
        try makeChange(
            rowKey,
            kind: kind,
            life: life,
            values: written,
            totals: totals,
            hlc: hlc,
            dot: dot,
            table: table,
            key: keyBytes,
            held: heldState,
            rewrite: rewrites
        )
    }

    /// Turns an app's UPDATE of one row, its key unchanged, into a change. `old`, `new`: the
    /// row's values before and after, in declaration order; `changed`: the columns that differ.
    private mutating func update(
        table: AppCatalog.Table,
        changed: [Int],
        old: [SQLValue],
        new: [SQLValue],
        now: UInt64,
        rowid: Int64
    ) throws {
        let key = try checkedKey(table.keyColumns.map { new[$0] }, table)
        let rowKey = RowKey(table: table.name, primaryKey: key)
        let keyBytes = SQLValue.keyBytes(key)
        localRow = LocalRow(table: table, key: keyBytes, before: old, after: new, rowid: rowid)
        defer { localRow = nil }
        guard let held = try heldRow(table: table.number, key: keyBytes), held.exists else {
            throw StoreError(
                .database,
                "row \(rowKey) is in its table but not in LANSync's state; the database is damaged"
            )
        }
        var values = [RowChange.Value]()
        var totals = [RowChange.Total]()
        var rewrites = false
        for index in changed where !table.keyColumns.contains(index) {
            if table.counterColumns.contains(index) {
                let own = try own(held, table, index, new: new[index], old: old[index])
                totals.append(.init(column: table.columns[index], total: own.total))
                rewrites = rewrites || own.showsOther
            } else {
                values.append(.init(column: table.columns[index], value: new[index]))
            }
        }
        guard !values.isEmpty || !totals.isEmpty else { return }
        try makeChange(
            rowKey,
            kind: .update,
            life: held.causalLength,
            values: values,
            totals: totals,
            hlc: tick(now: now),
            dot: nextDot(),
            table: table,
            key: keyBytes,
            held: held,
            rewrite: rewrites
        )
    }

    /// Turns an app's DELETE of one row into a change; `old`: the row's values, in declaration order.
    private mutating func delete(old: [SQLValue], from table: AppCatalog.Table, now: UInt64, rowid: Int64) throws {
        let key = try checkedKey(table.keyColumns.map { old[$0] }, table)
        let rowKey = RowKey(table: table.name, primaryKey: key)
        let keyBytes = SQLValue.keyBytes(key)
        localRow = LocalRow(table: table, key: keyBytes, before: old, after: nil, rowid: rowid)
        defer { localRow = nil }
        guard let held = try heldRow(table: table.number, key: keyBytes), held.exists else { return }
        if table.appendOnly { appendOnlyRowsDeletedHere.insert(RowAddress(table: table.number, key: keyBytes)) }
        try makeChange(
            rowKey,
            kind: .delete,
            life: held.causalLength + 1,
            values: [],
            totals: [],
            hlc: tick(now: now),
            dot: nextDot(),
            table: table,
            key: keyBytes,
            held: held
        )
    }

    /// This replica's new total of a counter column: its old total plus what the app added
    /// (the new value minus the old one: `SET xp = xp + 5` adds 5; `SET xp = 100` adds the difference).
    /// Of a one-way column: the greatest (`max`) or smallest (`min`) of its old total and the
    /// value written, so that no replica's total, and no merged value, ever moves back.
    /// Of a REAL counter: its old total plus the millionths the write moved the column by, from
    /// the value the row's state showed (`AppCatalog.realCounterScale`).
    /// `showsOther`: the row's state will show another value than the app wrote in its table
    /// (a one-way column written below its best, a REAL value that is not a whole number of
    /// millionths), so the row is written again from its state.
    private func own(
        _ held: RowState,
        _ table: AppCatalog.Table,
        _ index: Int,
        new: SQLValue,
        old: SQLValue
    ) throws -> (total: Int64, showsOther: Bool) {
        let column = table.columns[index]
        let kind = table.totalsKinds[column]!
        if kind == .realSum { return try ownReal(held, table, column, new: new) }
        guard case .integer(let newValue) = new else {
            let what = kind.isOneWay ? "a \(kind) column" : "a counter"
            throw StoreError(.sql, "\(table.declared!.name).\(column) is \(what) and takes whole numbers, not \(new)")
        }
        if kind.isOneWay {
            let max = kind == .max
            let best = held.counters.first { $0.name == column }.map { max ? $0.maximum : $0.minimum }
            let showsOther = best.map { max ? $0 > newValue : $0 < newValue } ?? false
            guard let mine = held.ownTotal(of: column, by: replica) else { return (newValue, showsOther) }
            return (max ? Swift.max(mine, newValue) : Swift.min(mine, newValue), showsOther)
        }
        let oldValue: Int64
        if case .integer(let value) = old { oldValue = value } else { oldValue = 0 }
        let (added, overflow1) = newValue.subtractingReportingOverflow(oldValue)
        let (total, overflow2) = held.total(of: column, by: replica).addingReportingOverflow(added)
        guard !overflow1, !overflow2 else {
            throw StoreError(.sql, "\(table.declared!.name).\(column) would leave the range of a 64-bit integer")
        }
        return (total, false)
    }

    private func ownReal(
        _ held: RowState,
        _ table: AppCatalog.Table,
        _ column: String,
        new: SQLValue
    ) throws -> (total: Int64, showsOther: Bool) {
        let number: Double
        switch new {
        case .integer(let value): number = Double(value)
        case .realBits(let bits): number = Double(bitPattern: bits)
        default: throw StoreError(.sql, "\(table.declared!.name).\(column) is a counter and takes numbers, not \(new)")
        }
        let scaled = (number * AppCatalog.realCounterScale).rounded(.toNearestOrEven)
        // Within ±2^53 millionths every whole number is exact: 9 billion of the column's units.
        guard scaled.isFinite, abs(scaled) <= 9_007_199_254_740_992 else {
            throw StoreError(
                .sql,
                "\(table.declared!.name).\(column) is a REAL counter, counted in millionths up to ±9,007,199,254; \(number) is out of range"
            )
        }
        let (added, overflow1) = Int64(scaled).subtractingReportingOverflow(held.counter(column))
        let (total, overflow2) = held.total(of: column, by: replica).addingReportingOverflow(added)
        guard !overflow1, !overflow2 else {
            throw StoreError(.sql, "\(table.declared!.name).\(column) would leave the range of its counter")
        }
        // The row's sum after this write is `scaled` millionths exactly: what it shows differs
        // from the value written unless that is a whole number of millionths.
        return (total, (scaled / AppCatalog.realCounterScale).bitPattern != number.bitPattern)
    }

    func checkedKey(_ key: [SQLValue], _ table: AppCatalog.Table) throws -> [SQLValue] {
        if key.contains(.null) { throw nullKey(table) }
        return key
    }

    func nullKey(_ table: AppCatalog.Table) -> StoreError {
        StoreError(
            .sql,
            "the primary key of \(table.declared!.name) must not be NULL: rows are matched across devices by it"
        )
    }

    private func checkSize(_ values: [RowChange.Value], of key: RowKey) throws {
        let size = values.reduce(0) { $0 + $1.value.byteCount }
        guard size <= RowChange.maxValueBytes else {
            throw StoreError(
                .sql,
                "a write to \(key) holds \(size) bytes of values; LANSync syncs rows of up to "
                    + "\(RowChange.maxValueBytes) bytes (keep large files outside the database and store their names)"
            )
        }
    }

    private mutating func makeChange(
        _ key: RowKey,
        kind: RowChange.Kind,
        life: UInt64,
        values: [RowChange.Value],
        totals: [RowChange.Total],
        hlc: HybridTimestamp,
        dot: Dot,
        table: AppCatalog.Table,
        key keyBytes: [UInt8],
        held: RowState?,
        rewrite: Bool = false
    ) throws {
        try checkSize(values, of: key)
        let change = RowChange(
            key: key,
            kind: kind,
            causalLength: life,
            hlc: hlc,
            dot: dot,
            values: values,
            totals: totals
        )
        // The app's table shows what it wrote, which is the row's state, unless `own` found
        // otherwise (`rewrite`): then the row is written again from the state.
        _ = try mergeRow(change, table: table, key: keyBytes, held: held, materialize: rewrite)
    }
}

/// A local write that failed alone: its savepoint was rolled back and the transaction it shares
/// with other writes is intact, so only its caller hears of the failure.
struct IsolatedWriteFailure: Error {
    let error: any Error
}

extension BoundStatement {
    /// Runs `upsertState` or `insertNewState` for a row's state bytes; returns the rows changed.
    @discardableResult
    func run(table: Int64, key: [UInt8], state: ArraySlice<UInt8>) throws -> Int {
        bind(1, table)
        bind(2, key)
        state.withUnsafeBytes { bind(3, $0) }
        return try run()
    }
}

/// The statements every app-table row uses in a transaction: prepared once, bound through the C
/// API (see `BoundStatement`), and, for the app's own tables, one per column set written.
final class AppRowStatements {
    let upsertState: BoundStatement
    let deleteRowidState: BoundStatement
    /// Inserts a row's state unless the row is held (then it changes nothing).
    let insertNewState: BoundStatement
    /// `insertStates`, by their number of rows (negative: not skipping held rows).
    private var insertStatesOf: [Int: BoundStatement] = [:]
    /// Whether `app_rows` holds any state of a table.
    let anyStateByKey: BoundStatement
    /// `insertRowidStates`, by their number of rows.
    private var insertRowidStatesOf: [Int: BoundStatement] = [:]
    let insertOp: BoundStatement
    let deleteOp: BoundStatement
    let selectOpStub: BoundStatement
    let setOpStub: BoundStatement
    let insertDeadStub: BoundStatement
    private var replacesOf: [ReplaceShape: BoundStatement] = [:]
    private var updatesOf: [ReplaceShape: BoundStatement] = [:]
    private var deletes: [Int64: BoundStatement] = [:]

    init(_ db: Database) throws {
        deleteRowidState = try BoundStatement(db, sql: "DELETE FROM app_rowid_states WHERE tbl = ? AND rid = ?")
        upsertState = try BoundStatement(db, sql: "INSERT OR REPLACE INTO app_rows (tbl, key, state) VALUES (?, ?, ?)")
        insertNewState = try BoundStatement(
            db,
            sql: "INSERT INTO app_rows (tbl, key, state) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
        )
        anyStateByKey = try BoundStatement(db, sql: "SELECT 1 FROM app_rows WHERE tbl = ? LIMIT 1")
        insertOp = try BoundStatement(db, sql: "INSERT OR IGNORE INTO app_ops (dot, tbl, key) VALUES (?, ?, ?)")
        deleteOp = try BoundStatement(db, sql: "DELETE FROM app_ops WHERE dot = ?")
        selectOpStub = try BoundStatement(db, sql: "SELECT stub FROM app_ops WHERE dot = ?")
        setOpStub = try BoundStatement(
            db,
            sql:
                "INSERT INTO app_ops (dot, tbl, key, stub) VALUES (?, ?, ?, ?) ON CONFLICT (dot) DO UPDATE SET stub = excluded.stub"
        )
        insertDeadStub = try BoundStatement(
            db,
            sql: "INSERT OR REPLACE INTO row_stubs (dot, tbl, key, stub) VALUES (?, ?, ?, ?)"
        )
    }

    /// One INSERT of `count` rows' states. `skippingHeld`: a row held already is skipped (`ON
    /// CONFLICT DO NOTHING`, as `insertNewState`); otherwise SQLite refuses the whole statement
    /// when a row of them is held (`WriteContext.mergeNewRows`).
    func insertStates(_ count: Int, skippingHeld: Bool, _ db: Database) throws -> BoundStatement {
        let shape = skippingHeld ? count : -count
        if let statement = insertStatesOf[shape] { return statement }
        let rows = Array(repeating: "(?, ?, ?)", count: count).joined(separator: ", ")
        let statement = try BoundStatement(
            db,
            sql: "INSERT INTO app_rows (tbl, key, state) VALUES \(rows)"
                + (skippingHeld ? " ON CONFLICT DO NOTHING" : "")
        )
        insertStatesOf[shape] = statement
        return statement
    }

    /// One INSERT of `count` states by the rowids of the rows their tables show
    /// (`AppCatalog.Table.keepsStatesByRowid`): `(table, rowid, state)` each. A rowid that has a
    /// state already makes SQLite refuse the statement (the database is then damaged).
    func insertRowidStates(_ count: Int, _ db: Database) throws -> BoundStatement {
        if let statement = insertRowidStatesOf[count] { return statement }
        let rows = Array(repeating: "(?, ?, ?)", count: count).joined(separator: ", ")
        let statement = try BoundStatement(db, sql: "INSERT INTO app_rowid_states (tbl, rid, state) VALUES \(rows)")
        insertRowidStatesOf[count] = statement
        return statement
    }

    /// `INSERT OR REPLACE` of `rows` rows' keys and `columns` (indexes into the table's
    /// columns) in one statement: one row, or many (`WriteContext.mergeNewRows`).
    /// `replacing: false`: a plain `INSERT`, which SQLite refuses, undoing it, when a row of
    /// them is held already (`WriteContext.insertNewRows`).
    func replace(
        into table: AppCatalog.Table,
        columns: [Int],
        rows: Int = 1,
        replacing: Bool = true,
        _ db: Database
    ) throws -> BoundStatement {
        // A plain INSERT's shape counts its rows negative.
        let shape = ReplaceShape(table: table.number, columns: columns, rows: replacing ? rows : -rows)
        if let statement = replacesOf[shape] { return statement }
        let declared = table.declared!
        let names = declared.primaryKey + columns.map { declared.columns[$0].name }
        let row = "(" + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")"
        let statement = try BoundStatement(
            db,
            sql:
                "INSERT \(replacing ? "OR REPLACE " : "")INTO \(declared.name.quotedDatabaseIdentifier) (\(names.map(\.quotedDatabaseIdentifier).joined(separator: ", "))) "
                + "VALUES " + Array(repeating: row, count: rows).joined(separator: ", ")
        )
        replacesOf[shape] = statement
        return statement
    }

    /// `UPDATE` of one row, found by its key, to `columns` (indexes into the table's columns)
    /// and every other column that is not a key to its default: the row `replace(into:)` would
    /// write, kept at its rowid and written in place, where `REPLACE` deletes the row and inserts
    /// it again under a new one. Parameters 1… are the key's, then the columns' values, as
    /// `replace` binds them. A NULL for a `NOT NULL` column with a default shows as the default,
    /// as `REPLACE` resolves it.
    func update(_ table: AppCatalog.Table, columns: [Int], _ db: Database) throws -> BoundStatement {
        let shape = ReplaceShape(table: table.number, columns: columns, rows: 0)
        if let statement = updatesOf[shape] { return statement }
        let statement = try BoundStatement(db, sql: Self.updateSQL(of: table.declared!, columns: columns))
        updatesOf[shape] = statement
        return statement
    }

    /// The statement of `update(_:columns:)`.
    static func updateSQL(of declared: AppSchema.Table, columns: [Int]) -> String {
        let key = declared.primaryKey
        var parameter = key.count
        var named: [Int: String] = [:]
        for index in columns {
            parameter += 1
            let column = declared.columns[index]
            named[index] =
                column.notNull && column.defaultSQL != nil
                ? "coalesce(?\(parameter), \(column.defaultSQL!))" : "?\(parameter)"
        }
        var set = declared.columns.indices.filter { declared.columns[$0].primaryKeyPosition == 0 }.map { index in
            let column = declared.columns[index]
            let value = named[index] ?? column.defaultSQL.map { "(\($0))" } ?? "NULL"
            return "\(column.name.quotedDatabaseIdentifier) = \(value)"
        }
        // A table of key columns only: the statement finds the row and changes nothing.
        if set.isEmpty { set = ["\(key[0].quotedDatabaseIdentifier) = \(key[0].quotedDatabaseIdentifier)"] }
        let match = key.enumerated().map { "\($1.quotedDatabaseIdentifier) = ?\($0 + 1)" }
        return "UPDATE \(declared.name.quotedDatabaseIdentifier) SET \(set.joined(separator: ", ")) "
            + "WHERE \(match.joined(separator: " AND "))"
    }

    private struct ReplaceShape: Hashable {
        let table: Int64
        let columns: [Int]
        let rows: Int
    }

    func delete(from table: AppCatalog.Table, _ db: Database) throws -> BoundStatement {
        if let statement = deletes[table.number] { return statement }
        let declared = table.declared!
        let match = declared.primaryKey.map { "\($0.quotedDatabaseIdentifier) = ?" }.joined(separator: " AND ")
        let statement = try BoundStatement(
            db,
            sql: "DELETE FROM \(declared.name.quotedDatabaseIdentifier) WHERE \(match)"
        )
        deletes[table.number] = statement
        return statement
    }
}

/// What every app-table write and merge needs from the store: the capture functions and the catalog.
final class AppTableAccess: Sendable {
    let capture = AppWriteCapture()
    let catalogCache = AppCatalogCache()
}

extension SQLValue {
    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let value): self = .integer(value)
        case .double(let value): self = .real(value)
        case .string(let value): self = .text(value)
        case .blob(let data): self = .blob([UInt8](data))
        }
    }

    package var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .integer(let value): return value.databaseValue
        case .realBits(let bits): return Double(bitPattern: bits).databaseValue
        case .text(let value): return value.databaseValue
        case .blob(let bytes): return Data(bytes).databaseValue
        }
    }
}
