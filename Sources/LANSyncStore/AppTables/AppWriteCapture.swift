import LANSyncCore
import Synchronization

/// Captures what an app's statements do to its tables, for the write transaction to turn into
/// changes when the app's code returns (see `WriteContext.writeAppTables`).
///
/// SQLite's pre-update hook, registered only on LANSync's own connections, reports every row an
/// INSERT, UPDATE or DELETE is about to change, with the row's old and new values; the capture
/// keeps the ones of declared app tables made during an app's write and ignores the rest
/// (LANSync's own tables, and the rows LANSync itself writes when it merges a peer's changes).
/// A hook costs a fraction of a trigger: with capture triggers, a bulk insert into a 10-column
/// table spent as long in them as a plain insert of the row takes.
///
/// Writes that would go unsynced fail instead (the CHECK that `AppTableGuard` installs and the triggers of `AppTriggers` call them):
/// - `lansync_guard()` returns 1 on LANSync's connections during a write, and fails outside one.
///   Another program has no such function, so its INSERT, UPDATE or DELETE on an app table fails
///   to compile ("unknown function: lansync_guard()"); reading works.
/// - `lansync_local()`: 1 during an app's write, 0 while LANSync writes merged rows; guards the
///   triggers that only local writes fire (cascades, the append-only refusal).
final class AppWriteCapture: Sendable {
    enum Mode: UInt8, Sendable, AtomicRepresentable { case idle, local, merging }

    /// What one statement did to one row, in the layout `WriteContext.apply` reads.
    struct Event: Sendable {
        enum Operation: Int64, Sendable { case insert = 1, update = 2, delete = 3 }
        let table: Int64
        let operation: Operation
        /// The row's rowid: after an insert, before an update or a delete (the pre-update
        /// hook's). Where a table keeps its rows' states by rowid
        /// (`AppCatalog.Table.keepsStatesByRowid`), it finds the state of a row the app's
        /// statements deleted, which its key no longer finds in the table.
        var rowid: Int64 = 0
        /// - insert: the new value of every column, in declaration order;
        /// - update: masks of the columns whose value changed (bit i of mask k: column 62k + i),
        ///   the old value of every column, then the new value of every column;
        /// - delete: the old value of every column.
        /// The old values are what the row's state may name as the app's row's values
        /// (`StoredRowState.rowValueTag`): the state is read after the app's statements ran.
        /// Empty for an insert into a table without counters: see `encoded`.
        let arguments: [SQLValue]
        /// For an insert into a table without counter columns, where in `Captured.encoded` the
        /// new value of every column is, in declaration order, as canonical bytes
        /// (`SQLValue.append(to:)`): what a bulk insert writes, turned into the row's stored and
        /// hashed state without building a `SQLValue` or a `String` for each value
        /// (`WriteContext.insertEncoded`).
        var encoded: Range<Int>? = nil
    }

    /// The events of an app's write, and the bytes their `encoded` ranges point into.
    struct Captured {
        var events: [Event] = []
        var encoded: [UInt8] = []
    }

    private struct State: ~Copyable {
        var captured = Captured()
        /// The catalog of the app's write running, whose declared tables are captured.
        var catalog: AppCatalog?
        /// The table last looked up, by the address of the name SQLite passed (the same
        /// address for every row of a statement).
        var lastName = 0
        var lastTable: AppCatalog.Table?
    }

    private let state = Mutex<State>(State())
    /// Outside the mutex: the guard function and the hook read it for every row LANSync writes
    /// when it merges (its own tables' rows too), and only an app's write needs the rest.
    private let currentMode = Atomic<Mode>(.idle)

    var mode: Mode { currentMode.load(ordering: .acquiring) }

    static let outsideWrite =
        "app tables are written through LANSync only (node.write, `lansync exec`, or the local API), so that every write syncs"

    /// Runs `body` in `mode`, restoring the mode before (a local write can run inside a merge
    /// transaction that took it along). A local write captures the rows of `catalog`'s declared tables.
    func with<T>(_ mode: Mode, catalog: AppCatalog? = nil, _ body: () throws -> T) rethrows -> T {
        let previous = state.withLock { state in
            let previous = (self.mode, state.catalog)
            currentMode.store(mode, ordering: .releasing)
            if let catalog { state.catalog = catalog }
            state.lastName = 0
            state.lastTable = nil
            return previous
        }
        defer {
            state.withLock { state in
                currentMode.store(previous.0, ordering: .releasing)
                state.catalog = previous.1
                state.lastName = 0
                state.lastTable = nil
            }
        }
        return try body()
    }

    /// Takes the captured events, leaving none.
    func takeEvents() -> Captured {
        state.withLock { state in
            var captured = Captured()
            swap(&captured, &state.captured)
            return captured
        }
    }

    /// Gives back the buffers of events taken and handled, emptied, for the next write to
    /// capture into: a bulk write's bytes are a few hundred kilobytes, and a new buffer for each
    /// write was grown again, copy by copy, into freshly faulted-in pages.
    func recycle(_ captured: consuming Captured) {
        captured.events.removeAll(keepingCapacity: true)
        captured.encoded.removeAll(keepingCapacity: true)
        state.withLock { state in
            if state.captured.events.isEmpty && state.captured.encoded.isEmpty { swap(&captured, &state.captured) }
        }
    }

    /// Called by the pre-update hook for every row a statement on this connection is about to
    /// change: records it when it is an app's write to a declared table.
    func rowWillChange(
        _ row: some PreUpdateRow,
        operation: Event.Operation,
        table name: UnsafePointer<CChar>,
        rowid: Int64
    ) {
        guard mode == .local else { return }
        state.withLock { state in
            let table: AppCatalog.Table
            let address = Int(bitPattern: name)
            if state.lastName == address, let last = state.lastTable {
                table = last
            } else {
                guard let found = state.catalog?.table(named: String(cString: name).lowercased()), found.declared != nil
                else { return }
                (state.lastName, state.lastTable) = (address, found)
                table = found
            }
            if operation == .insert, table.counterColumns.isEmpty {
                let start = state.captured.encoded.count
                for (column, physical) in table.physicalColumns.enumerated() {
                    row.appendNew(physical, real: table.realColumns[column], to: &state.captured.encoded)
                }
                state.captured.events.append(
                    Event(
                        table: table.number,
                        operation: .insert,
                        rowid: rowid,
                        arguments: [],
                        encoded: start..<state.captured.encoded.count
                    )
                )
                return
            }
            state.captured.events.append(
                Event(
                    table: table.number,
                    operation: operation,
                    rowid: rowid,
                    arguments: Self.arguments(row, operation, table)
                )
            )
        }
    }

    /// The event's arguments for one row (see `Event.arguments`).
    static func arguments(
        _ row: some PreUpdateRow,
        _ operation: Event.Operation,
        _ table: AppCatalog.Table
    ) -> [SQLValue] {
        let physical = table.physicalColumns
        // What the table shows, as a trigger's NEW and OLD did: the hook reads the stored record,
        // where a REAL column holds 15.0 as the integer 15.
        func shown(_ value: SQLValue, _ column: Int) -> SQLValue {
            if table.realColumns[column], case .integer(let integer) = value { return .real(Double(integer)) }
            return value
        }
        func new(_ column: Int) -> SQLValue { shown(row.new(physical[column]), column) }
        func old(_ column: Int) -> SQLValue { shown(row.old(physical[column]), column) }
        switch operation {
        case .insert:
            return physical.indices.map(new)
        case .delete:
            return physical.indices.map(old)
        case .update:
            let old = physical.indices.map(old)
            let new = physical.indices.map(new)
            var arguments = [SQLValue]()
            arguments.reserveCapacity(table.maskCount + old.count + new.count)
            var masks = [Int64](repeating: 0, count: table.maskCount)
            for index in physical.indices where !old[index].isSameSQLValue(as: new[index]) {
                masks[index / 62] |= 1 << Int64(index % 62)
            }
            arguments += masks.map(SQLValue.integer)
            arguments += old
            arguments += new
            return arguments
        }
    }
}

/// One row as the pre-update hook shows it: its values before and after, by the column's
/// position in the table SQLite holds.
protocol PreUpdateRow {
    func old(_ column: Int32) -> SQLValue
    func new(_ column: Int32) -> SQLValue
    /// Appends the canonical bytes of `new(column)` as the table shows it (`real`: the column
    /// has REAL affinity, so a whole number stored as an integer shows as a real).
    func appendNew(_ column: Int32, real: Bool, to out: inout [UInt8])
}

extension SQLValue {
    /// SQL's `IS`: equal values of the same kind, numbers compared as numbers (so 1 IS 1.0).
    func isSameSQLValue(as other: SQLValue) -> Bool {
        switch (self, other) {
        case (.integer(let a), .realBits(let b)), (.realBits(let b), .integer(let a)):
            return Double(a) == Double(bitPattern: b)
        case (.realBits(let a), .realBits(let b)): return Double(bitPattern: a) == Double(bitPattern: b)
        default: return self == other
        }
    }
}
