import GRDB
import LANSyncCore
import Synchronization

/// What the store knows of app tables: every table it has heard of, by its local number (rows
/// of tables this replica's app has not declared are kept and relayed: promise 8), and, for the
/// declared ones, how their columns map to the values LANSync captures.
struct AppCatalog: Sendable {
    /// How a column whose changes carry totals (per replica, merged as protocol §6 says) shows
    /// them: their sum, their sum in millionths (a REAL counter), or the greatest or smallest
    /// (a one-way column). Every node keeps the same totals; the kind is its app's declaration.
    enum TotalsKind: Sendable {
        case sum, realSum, max, min

        var isOneWay: Bool { self == .max || self == .min }
    }

    /// A REAL counter counts in millionths: each write adds the difference it made, rounded to a
    /// millionth, to its replica's whole-number total, and the column shows the sum of the totals
    /// divided by a million. Whole numbers add exactly, and one integer divided by 10^6 is the
    /// same IEEE 754 double on every device, so every replica shows the same bits, whatever order
    /// the increments arrived in.
    static let realCounterScale = 1_000_000.0

    /// A class: every captured row and merged change looks its table up, and a struct of this
    /// many arrays cost a retain and release of each on every copy.
    final class Table: Sendable {
        let number: Int64
        /// Lowercase, as changes carry it.
        let name: String
        /// The app's declaration; nil for a table only heard of from peers.
        let declared: AppSchema.Table?
        /// Lowercase column names in declaration order: the order captured values are in.
        let columns: [String]
        /// Each of `columns` by name: its index.
        let columnIndexes: [String: Int]
        /// For each column in declaration order, its position in the table SQLite holds (a column
        /// a newer schema added comes last there, wherever the declaration puts it).
        let physicalColumns: [Int32]
        /// Which columns, in declaration order, have REAL affinity: SQLite stores a whole number
        /// written to one as an integer and shows it as a real, and the pre-update hook reads the
        /// stored form (see `AppWriteCapture.arguments`).
        let realColumns: [Bool]
        /// Each column's affinity, in declaration order (`keepsExactly`).
        let affinities: [Affinity]
        /// Which columns, in declaration order, are `NOT NULL`.
        let notNullColumns: [Bool]
        /// Indexes into `columns` of the primary key, in key order.
        let keyColumns: [Int]
        /// Indexes into `columns` of the columns whose changes carry totals, in declaration
        /// order: counters, and the one-way (max, min) columns.
        let counterColumns: [Int]
        /// How each of `counterColumns` shows its totals, by lowercase name (`TotalsKind`).
        let totalsKinds: [String: TotalsKind]
        /// Indexes into `columns` of the columns that are neither key nor counter, by name: the
        /// order a change lists its values in.
        let plainColumns: [Int]

        /// Whether the states of the rows this table shows are kept by the row's rowid
        /// (`app_rowid_states`) rather than by key (`app_rows`), so that the key is not kept a
        /// second time beside the app's key index. Only for a declared append-only table with
        /// a rowid: its rows never change and never move (an UPDATE is refused, a REPLACE over a
        /// held key is refused, and a merge's REPLACE of a new row can delete no other row, since
        /// an app table has no UNIQUE rule besides its primary key), so a row keeps its rowid
        /// until it is deleted, when its state moves to `app_rows` with every value. A table's
        /// declaration keeps its kind and its rowid, so a table never stops keeping states so.
        let keepsStatesByRowid: Bool
        /// Whether the dot index may name this table's new rows by rowid (`DotRun.rowidForm`)
        /// rather than by key: every declared table with a rowid. A row keeps its rowid while
        /// the table shows it (merges update held rows in place, an app's UPDATE of a rowid is
        /// refused, and VACUUM cannot run in a write); where a row leaves it (a delete, a
        /// REPLACE, a key changed, a rule that refuses a merged state), every dot its state
        /// still shows is indexed by key in the same transaction (`WriteContext.writeStateByKey`).
        let namesRowsByRowid: Bool

        init(
            number: Int64,
            name: String,
            declared: AppSchema.Table?,
            physical: [String: Int32],
            statesByRowid: Bool = false
        ) {
            keepsStatesByRowid = statesByRowid && (declared?.appendOnly ?? false)
            namesRowsByRowid = statesByRowid && declared != nil
            self.number = number
            self.name = name
            self.declared = declared
            let names = declared?.columns.map { $0.name.lowercased() } ?? []
            columns = names
            columnIndexes = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            physicalColumns = names.enumerated().map { physical[$0.element] ?? Int32($0.offset) }
            affinities = declared?.columns.map { Affinity(declaredType: $0.type) } ?? []
            realColumns = affinities.map { $0 == .real }
            notNullColumns = declared?.columns.map(\.notNull) ?? []
            keyColumns =
                declared.map { table in
                    table.primaryKey.map { key in table.columns.firstIndex { $0.name.lowercased() == key.lowercased() }!
                    }
                } ?? []
            var kinds = [String: TotalsKind]()
            for column in declared?.columns ?? [] {
                if let extreme = declared!.extremes[column.name] {
                    kinds[column.name.lowercased()] = extreme == .max ? .max : .min
                } else if declared!.counters.contains(column.name) {
                    kinds[column.name.lowercased()] = Self.hasRealAffinity(column.type) ? .realSum : .sum
                }
            }
            totalsKinds = kinds
            let counters = Set(kinds.keys)
            counterColumns = names.indices.filter { counters.contains(names[$0]) }
            let key = Set(keyColumns)
            plainColumns = names.indices.filter { !key.contains($0) && !counters.contains(names[$0]) }.sorted {
                names[$0] < names[$1]
            }
            valueColumns = names.indices.filter { !key.contains($0) }.map { (names[$0], $0) }.sorted {
                $0.name < $1.name
            }
            var defaults = [SQLValue?](repeating: nil, count: names.count)
            if let declared, !declared.appendOnly {
                for index in plainColumns { defaults[index] = declared.columns[index].constantDefault }
                for index in counterColumns where kinds[names[index]]!.isOneWay {
                    defaults[index] = declared.columns[index].constantDefault
                }
            }
            leftAtDefault = defaults
            hasDefaultsLeftOut = defaults.contains { $0 != nil }
        }

        /// Per column in declaration order, the value an insert that opens a row's life leaves
        /// out of its change (`AppSchema.Column.constantDefault`; nil: always written). Such a
        /// column shows its default on every device until a write sets it, so two devices that
        /// insert one key do not override each other's values with defaults, and a one-way
        /// column inserted at its default pins no best. Only plain and one-way columns of
        /// mutable tables: an append is kept whole, and a counter's insert is what it counts.
        let leftAtDefault: [SQLValue?]
        /// Whether any column has a value in `leftAtDefault`.
        let hasDefaultsLeftOut: Bool

        /// The plain columns an insert that opens a row's life writes: those whose value is not
        /// their left-out default.
        func writtenByInsert(_ values: [SQLValue]) -> [Int] {
            guard hasDefaultsLeftOut else { return plainColumns }
            return plainColumns.filter { index in leftAtDefault[index].map { $0 != values[index] } ?? true }
        }

        /// The columns outside the primary key, by name: what a row's values are matched against.
        let valueColumns: [(name: String, index: Int)]

        /// The columns a row has values for, as `present` finds them.
        struct Present {
            /// Declaration indexes, in name order.
            var indexes: [Int] = []
            var values: [SQLValue] = []
        }

        /// The declared columns that `cells` and `counted` (each sorted by name, each name once)
        /// give values, found in one walk of the three sorted lists. A name in both is a counter,
        /// as in `RowState.value(of:)`; names this declaration lacks (a newer app's columns) and
        /// the key's columns are left out.
        func present<
            Cells: RandomAccessCollection<CellElement>,
            CellElement,
            Counted: RandomAccessCollection<CountedElement>,
            CountedElement
        >(
            cells: Cells,
            name cellName: (CellElement) -> String,
            value: (CellElement) -> SQLValue,
            counted: Counted,
            name countedName: (CountedElement) -> String,
            total: (CountedElement) -> SQLValue
        ) -> Present {
            var present = Present()
            present.indexes.reserveCapacity(cells.count + counted.count)
            present.values.reserveCapacity(cells.count + counted.count)
            var cell = cells.startIndex
            var count = counted.startIndex
            for column in valueColumns {
                while cell != cells.endIndex, cellName(cells[cell]) < column.name { cell = cells.index(after: cell) }
                while count != counted.endIndex, countedName(counted[count]) < column.name {
                    count = counted.index(after: count)
                }
                if count != counted.endIndex, countedName(counted[count]) == column.name {
                    present.indexes.append(column.index)
                    present.values.append(total(counted[count]))
                } else if cell != cells.endIndex, cellName(cells[cell]) == column.name {
                    present.indexes.append(column.index)
                    present.values.append(value(cells[cell]))
                }
            }
            return present
        }

        /// How a totals column shows in a row's life, from its kind (a column only heard of from
        /// peers shows as a counter).
        func value(of counter: RowState.Counter) -> SQLValue {
            switch totalsKinds[counter.name] ?? .sum {
            case .sum: return .integer(counter.sum)
            case .realSum: return .real(Double(counter.sum) / AppCatalog.realCounterScale)
            case .max: return .integer(counter.maximum)
            case .min: return .integer(counter.minimum)
            }
        }

        /// How a row made by one change shows a total of it (there is one total per column).
        func shown(_ total: RowChange.Total) -> SQLValue {
            guard totalsKinds[total.column] == .realSum else { return .integer(total.total) }
            return .real(Double(total.total) / AppCatalog.realCounterScale)
        }

        /// The columns a row made by `change` alone has values for (a row's first change: an
        /// append-only row shows no totals).
        func present(of change: RowChange) -> Present {
            present(
                cells: change.values,
                name: \.column,
                value: \.value,
                counted: change.kind == .append ? [] : change.totals,
                name: \.column,
                total: shown
            )
        }

        /// A column's type affinity (sqlite.org/datatype3.html, 3.1).
        enum Affinity {
            case integer, text, blob, real, numeric

            /// SQLite's rule: a type naming INT is INTEGER; CHAR, CLOB or TEXT is TEXT; BLOB or
            /// none is BLOB; REAL, FLOA or DOUB is REAL; any other is NUMERIC.
            init(declaredType: String) {
                let type = declaredType.uppercased()
                if type.contains("INT") {
                    self = .integer
                } else if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") {
                    self = .text
                } else if type.contains("BLOB") || type.isEmpty {
                    self = .blob
                } else if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") {
                    self = .real
                } else {
                    self = .numeric
                }
            }
        }

        /// Whether column `index` reads back exactly `value` (type and bytes) after LANSync
        /// writes it there, so that a row's state may name the row's value instead of keeping it
        /// again (`StoredRowState.rowValueTag`). SQLite converts a value to the column's affinity
        /// where it can (the TEXT '5' in an INTEGER column becomes 5, the INTEGER 5 in a REAL
        /// column reads as 5.0), keeps −0.0 in a REAL column as 0.0, stores NaN as NULL, and a
        /// merge writes a NULL in a `NOT NULL` column with a default as the default; such values
        /// are kept in the state.
        func keepsExactly(_ value: SQLValue, column index: Int) -> Bool {
            let affinity = affinities[index]
            switch value {
            case .null: return !notNullColumns[index]
            case .blob: return true
            case .integer: return affinity == .integer || affinity == .numeric || affinity == .blob
            case .text: return affinity == .text || affinity == .blob
            case .realBits(let bits):
                guard !Double(bitPattern: bits).isNaN, bits != (-0.0 as Double).bitPattern else { return false }
                return affinity == .real || affinity == .blob
            }
        }

        /// Whether the table reads back every value of `key` (its primary key's, in key order)
        /// exactly, so that a state kept by the row's rowid finds its key again in the row.
        func keepsKeyExactly(_ key: [SQLValue]) -> Bool {
            key.count == keyColumns.count && zip(keyColumns, key).allSatisfy { keepsExactly($1, column: $0) }
        }

        /// Whether a declared type has REAL affinity.
        static func hasRealAffinity(_ type: String) -> Bool { Affinity(declaredType: type) == .real }

        var appendOnly: Bool { declared?.appendOnly ?? false }
        /// Masks of changed columns an update's capture holds: 62 columns per integer.
        var maskCount: Int { (columns.count + 61) / 62 }
    }

    /// The schema as the app last applied it (empty before the first `schema apply`).
    let schema: AppSchema
    private(set) var tables: [Int64: Table] = [:]
    private(set) var numbers: [String: Int64] = [:]
    /// Each declared table's columns by lowercase name, with their positions in SQLite's table.
    private var physical: [String: [String: Int32]] = [:]
    /// The declared tables (lowercase) with a rowid, whose rows' states may be kept by it
    /// (`Table.keepsStatesByRowid`).
    private var rowidTables: Set<String> = []

    /// Reads the catalog: the applied schema (parsed again: SQLite is the parser) and the table numbers.
    static func load(_ db: Database) throws -> AppCatalog {
        let source = try String.fetchOne(db, sql: "SELECT source FROM app_schema")
        let schema: AppSchema
        do {
            schema = try source.map(AppSchemaReader.read) ?? AppSchema()
        } catch {
            throw StoreError(.database, "the stored app schema no longer reads (\(error)); the database is damaged")
        }
        var catalog = AppCatalog(schema: schema)
        for table in schema.tables {
            var positions = [String: Int32]()
            for column in try Row.fetchAll(db, sql: "PRAGMA table_info(\(table.name.quotedDatabaseIdentifier))") {
                positions[(column["name"] as String).lowercased()] = column["cid"]
            }
            catalog.physical[table.name.lowercased()] = positions
            if try Self.hasRowid(table.name, db), !table.columns.contains(where: { Self.shadowsRowid($0.name) }) {
                catalog.rowidTables.insert(table.name.lowercased())
            }
        }
        for row in try Row.fetchAll(db, sql: "SELECT num, name FROM app_tables") {
            catalog.add(number: row[0], name: row[1])
        }
        return catalog
    }

    mutating func add(number: Int64, name: String) {
        tables[number] = Table(
            number: number,
            name: name,
            declared: schema.table(name),
            physical: physical[name] ?? [:],
            statesByRowid: rowidTables.contains(name)
        )
        numbers[name] = number
    }

    /// Whether a column of this name hides SQLite's rowid from SQL: in a table with a column
    /// named `rowid`, `rowid` names the column, and LANSync's reads by rowid would read it. Such
    /// a table keeps states and runs by key.
    static func shadowsRowid(_ column: String) -> Bool {
        ["rowid", "oid", "_rowid_"].contains(column.lowercased())
    }

    /// Whether SQLite keeps table `name` with a rowid (not `WITHOUT ROWID`).
    private static func hasRowid(_ name: String, _ db: Database) throws -> Bool {
        // `pragma_table_list` (SQLite 3.37) says it directly; its `wr` column is 1 without rowid.
        let withoutRowid = try Int64.fetchOne(
            db,
            sql: "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ? COLLATE NOCASE",
            arguments: [name]
        )
        return withoutRowid == 0
    }

    func table(named name: String) -> Table? { numbers[name].flatMap { tables[$0] } }

    /// What an app's SQL may reach (`AppSQLGuard`): the declared tables.
    func appScope(writes: Bool) -> AppSQLGuard.Scope {
        AppSQLGuard.Scope(tables: Set(schema.tables.map { $0.name.lowercased() }), writes: writes)
    }
}

/// The catalog as of the database's `schema_version`, so a transaction loads it only after a
/// schema change (by this process or another one: `lansync schema apply` while an agent runs).
final class AppCatalogCache: Sendable {
    private let cached = Mutex<(version: Int64, catalog: AppCatalog)?>(nil)

    func catalog(_ db: Database) throws -> AppCatalog {
        let version = try Int64.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
        if let cached = cached.withLock({ $0 }), cached.version == version { return cached.catalog }
        let catalog = try AppCatalog.load(db)
        cached.withLock { $0 = (version, catalog) }
        return catalog
    }
}

/// The triggers LANSync puts on each declared app table. Capture is not among them (see
/// `AppWriteCapture`: a hook costs a fraction of a trigger); they keep other programs from
/// writing rows no peer would hear of, apply the table's `ON DELETE` rules to children this
/// replica holds when the app deletes a parent, and refuse UPDATE and DELETE on append-only tables.
///
/// An INSERT and an UPDATE are guarded by the table's CHECK constraint (`AppTableGuard`), which
/// SQLite evaluates inline; a DELETE, which no CHECK sees, by a trigger that calls
/// `lansync_guard()`. A trigger runs a sub-program for every row it fires on, so the guard on
/// UPDATE, which every merge written in place would pay, is the CHECK.
enum AppTriggers {
    static func names(for table: AppSchema.Table) -> [String] {
        ["guard_update", "guard_delete", "refuse_update", "refuse_delete"].map {
            "lansync_\(table.name.lowercased())_\($0)"
        }
    }

    /// The names of the capture triggers earlier versions made, dropped when a database is upgraded.
    static func formerNames(for table: AppSchema.Table) -> [String] {
        ["insert", "update", "delete"].map { "lansync_\(table.name.lowercased())_\($0)" }
    }

    /// The statements that (re)create a table's triggers.
    static func statements(for table: AppCatalog.Table) -> [String] {
        guard let declared = table.declared else { return [] }
        let quoted = declared.name.quotedDatabaseIdentifier
        let names = names(for: declared).map(\.quotedDatabaseIdentifier)
        var statements = (names + formerNames(for: declared).map(\.quotedDatabaseIdentifier)).map {
            "DROP TRIGGER IF EXISTS \($0)"
        }
        if declared.appendOnly {
            // These guard too: another program has no `lansync_local`. A table whose rows go
            // with their parent gets its DELETE refusal from `cascadeStatements`, which knows
            // the parents.
            let operations = declared.cascades ? [(2, "UPDATE")] : [(2, "UPDATE"), (3, "DELETE")]
            for (index, operation) in operations {
                statements.append(
                    "CREATE TRIGGER \(names[index]) BEFORE \(operation) ON \(quoted) WHEN lansync_local() BEGIN "
                        + "SELECT RAISE(ABORT, '\(declared.name) is append-only: its rows are never updated or deleted, "
                        + "so that every device keeps every row; append a new row instead'); END"
                )
            }
            return statements
        }
        // The UPDATE trigger of earlier versions (`names[0]`) was dropped above: the CHECK guards UPDATE.
        statements.append("CREATE TRIGGER \(names[1]) BEFORE DELETE ON \(quoted) BEGIN SELECT lansync_guard(); END")
        return statements
    }

    /// The triggers that apply `ON DELETE CASCADE` and `SET NULL` of the children's declarations
    /// when the app deletes a parent row (never when LANSync merges a peer's delete: the peer
    /// sends the deletes of the children it held, and children it did not hold stay, as orphans).
    ///
    /// An append-only child whose rows go with their parent (`ON DELETE CASCADE`) refuses a
    /// DELETE of a row unless one of its cascading parents is gone (the cascade itself, or the
    /// app deleting an orphan): its rows are otherwise never deleted.
    static func cascadeStatements(for schema: AppSchema) -> [String] {
        var statements = [String]()
        for child in schema.tables where child.appendOnly && child.cascades {
            let name = AppTriggers.names(for: child)[3].quotedDatabaseIdentifier
            var gone = [String]()
            for key in child.foreignKeys where key.onDelete == .cascade {
                guard let parent = schema.table(key.parent) else { continue }
                let parentColumns = key.parentColumns.isEmpty ? parent.primaryKey : key.parentColumns
                guard parentColumns.count == key.columns.count else { continue }
                let set = key.columns.map { "OLD.\($0.quotedDatabaseIdentifier) IS NOT NULL" }.joined(
                    separator: " AND "
                )
                let match = zip(key.columns, parentColumns).map {
                    "\($1.quotedDatabaseIdentifier) = OLD.\($0.quotedDatabaseIdentifier)"
                }
                .joined(separator: " AND ")
                gone.append(
                    "(\(set) AND NOT EXISTS (SELECT 1 FROM \(parent.name.quotedDatabaseIdentifier) WHERE \(match)))"
                )
            }
            statements.append("DROP TRIGGER IF EXISTS \(name)")
            statements.append(
                "CREATE TRIGGER \(name) BEFORE DELETE ON \(child.name.quotedDatabaseIdentifier) WHEN lansync_local()"
                    + (gone.isEmpty ? "" : " AND NOT (\(gone.joined(separator: " OR ")))") + " BEGIN "
                    + "SELECT RAISE(ABORT, '\(child.name) is append-only: its rows are never updated or deleted, so that every "
                    + "device keeps every row; they go only with their parent (ON DELETE CASCADE), or once it is gone'); END"
            )
        }
        for child in schema.tables {
            for (index, key) in child.foreignKeys.enumerated() where key.onDelete != .nothing {
                guard let parent = schema.table(key.parent) else { continue }
                let parentColumns = key.parentColumns.isEmpty ? parent.primaryKey : key.parentColumns
                guard parentColumns.count == key.columns.count else { continue }
                let name = "lansync_\(child.name.lowercased())_on_delete_\(index)".quotedDatabaseIdentifier
                let match = zip(key.columns, parentColumns).map {
                    "\($0.quotedDatabaseIdentifier) = OLD.\($1.quotedDatabaseIdentifier)"
                }
                .joined(separator: " AND ")
                let action =
                    key.onDelete == .cascade
                    ? "DELETE FROM \(child.name.quotedDatabaseIdentifier) WHERE \(match)"
                    : "UPDATE \(child.name.quotedDatabaseIdentifier) SET "
                        + key.columns.map { "\($0.quotedDatabaseIdentifier) = NULL" }.joined(separator: ", ")
                        + " WHERE \(match)"
                statements.append("DROP TRIGGER IF EXISTS \(name)")
                statements.append(
                    "CREATE TRIGGER \(name) AFTER DELETE ON \(parent.name.quotedDatabaseIdentifier) WHEN lansync_local() "
                        + "BEGIN \(action); END"
                )
            }
        }
        return statements
    }
}
