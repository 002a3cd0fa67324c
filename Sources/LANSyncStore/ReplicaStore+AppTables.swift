import Foundation
package import GRDB
package import LANSyncCore

/// App tables: declaring them, reading them, and what the replica holds of each.
extension ReplicaStore {

    /// Applies an app's schema (docs/app-tables.md): creates the tables, columns and
    /// indexes it adds to the one applied before, with LANSync's guards, and shows rows already
    /// received from peers for tables and columns this app now declares. Applying the same schema
    /// again changes nothing. Refused whole, naming every problem, when the schema breaks a rule
    /// or takes anything away. Returns what it added.
    package func applySchema(_ text: String) throws(StoreError) -> [AppSchemaChange] {
        let newer: AppSchema
        do {
            newer = try AppSchemaReader.read(text)
        } catch {
            throw StoreError(.schema, error.description)
        }
        let (hasher, apps) = (hasher, apps)
        return try Self.database {
            try writer.write { db in
                let held = try apps.catalogCache.catalog(db)
                let changes: [AppSchemaChange]
                do {
                    changes = try held.schema.changes(to: newer)
                } catch let error as AppSchemaError {
                    throw StoreError(.schema, error.description)
                }
                guard !changes.isEmpty else { return [] }
                try Self.refuseTakenNames(changes, db: db)
                try apps.capture.with(.merging) {
                    var touched = Set<String>()
                    for change in changes {
                        switch change {
                        case .addTable(let table):
                            guard let guarded = AppTableGuard.guarded(table.sql, columns: table.columns.map(\.name))
                            else {
                                throw StoreError(
                                    .schema,
                                    "LANSync cannot find the column list of table \(table.name); "
                                        + "write it as CREATE TABLE name (columns…)"
                                )
                            }
                            try db.execute(sql: guarded)
                            let name = table.name.lowercased()
                            try db.execute(sql: "INSERT OR IGNORE INTO app_tables (name) VALUES (?)", arguments: [name])
                            touched.insert(name)
                        case .addColumn(let table, let column):
                            try db.execute(
                                sql:
                                    "ALTER TABLE \(table.quotedDatabaseIdentifier) ADD COLUMN \(Self.definition(of: column))"
                            )
                            // The guard names every column, so that another program's UPDATE of this one fails too.
                            try AppTableGuard.install(onTable: table, db)
                            touched.insert(table.lowercased())
                        case .addIndex(let index):
                            try db.execute(sql: index.sql)
                        }
                    }
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO app_schema (singleton, source, applied_ms) VALUES (1, ?, ?)",
                        arguments: [text, Int64(Date().timeIntervalSince1970 * 1000)]
                    )
                    try db.execute(
                        sql:
                            "UPDATE app_tables SET declared = 1 WHERE name IN (\(touched.map { _ in "?" }.joined(separator: ",")))",
                        arguments: StatementArguments(Array(touched))
                    )
                    let catalog = try AppCatalog.load(db)
                    for name in touched {
                        guard let table = catalog.table(named: name) else { continue }
                        for statement in AppTriggers.statements(for: table) { try db.execute(sql: statement) }
                    }
                    for statement in AppTriggers.cascadeStatements(for: catalog.schema) {
                        try db.execute(sql: statement)
                    }
                    // Rows heard of before this app declared their table or column now show.
                    var context = try WriteContext(db, hasher: hasher, apps: apps)
                    context.appCatalog = catalog
                    for name in touched {
                        guard let table = catalog.table(named: name), let declared = table.declared else { continue }
                        // Read first: a row written again may take another rowid, and its state
                        // is written again too when its table refuses it.
                        var rows = try Row.fetchAll(
                            db,
                            sql: "SELECT key, state, NULL FROM app_rows WHERE tbl = ?",
                            arguments: [table.number]
                        )
                        .map { ([UInt8]($0[0] as Data), $0[1] as Data, nil as Int64?) }
                        if table.keepsStatesByRowid {
                            let select = try BoundStatement(db, sql: StoredStates.statesByRowidSQL(declared))
                            select.bind(1, table.number)
                            try select.forEachRow { row in
                                rows.append((row.withBlob(0) { Array($0) }, row.withBlob(1) { Data($0) }, row.int64(2)))
                            }
                        }
                        for (keyBytes, state, rowid) in rows {
                            if let rowid {
                                context.statesAtRowids[RowAddress(table: table.number, key: keyBytes)] = rowid
                            }
                            try context.showAgain(
                                try context.storedState(state, table: table.number, key: keyBytes),
                                key: keyBytes,
                                in: table
                            )
                        }
                    }
                }
                return changes
            }
        }
    }

    /// Refuses a new table whose name another table of the database has (LANSync's own).
    private static func refuseTakenNames(_ changes: [AppSchemaChange], db: Database) throws {
        for case .addTable(let table) in changes {
            let taken =
                try Int.fetchOne(
                    db,
                    sql: "SELECT count(*) FROM sqlite_master WHERE lower(name) = ?",
                    arguments: [table.name.lowercased()]
                ) ?? 0
            if taken > 0 {
                throw StoreError(
                    .schema,
                    "table \(table.name) cannot be created: LANSync uses that name for its own data; "
                        + "rename the table (LANSync's names: meta, replicas, entries, preferences and those starting with app_)"
                )
            }
        }
    }

    /// A column's definition for `ALTER TABLE … ADD COLUMN`.
    static func definition(of column: AppSchema.Column) -> String {
        var definition = column.name.quotedDatabaseIdentifier
        if !column.type.isEmpty { definition += " \(column.type)" }
        if column.notNull { definition += " NOT NULL" }
        if let value = column.defaultSQL { definition += " DEFAULT \(value)" }
        return definition
    }

    /// The schema the app last applied, as written, and what it declares; nil before the first.
    package func appliedSchema() throws(StoreError) -> (source: String, schema: AppSchema)? {
        let apps = apps
        return try Self.database {
            try writer.read { db in
                guard let source = try String.fetchOne(db, sql: "SELECT source FROM app_schema") else { return nil }
                return (source, try apps.catalogCache.catalog(db).schema)
            }
        }
    }

    /// Rows of declared app tables whose parent row (a `REFERENCES`) is missing: the parent was
    /// deleted on one device while the child was added on another, or the child arrived first.
    /// SQLite's `PRAGMA foreign_key_check` finds them; each with its primary key's values.
    package func orphans() throws(StoreError) -> [AppOrphan] {
        try Self.database {
            try writer.read { db in
                var orphans: [AppOrphan] = []
                for table in try String.fetchAll(
                    db,
                    sql: "SELECT name FROM app_tables WHERE declared = 1 ORDER BY name"
                ) {
                    let keyColumns = try String.fetchAll(
                        db,
                        sql: "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk",
                        arguments: [table]
                    )
                    let selectKey =
                        "SELECT \(keyColumns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")) "
                        + "FROM \(table.quotedDatabaseIdentifier) WHERE rowid = ?"
                    for violation in try Row.fetchAll(
                        db,
                        sql: "PRAGMA foreign_key_check(\(table.quotedDatabaseIdentifier))"
                    ) {
                        var key: [DatabaseValue] = []
                        if let rowid = violation["rowid"] as Int64?, !keyColumns.isEmpty {
                            key =
                                try Row.fetchOne(db, sql: selectKey, arguments: [rowid]).map {
                                    Array($0.databaseValues)
                                } ?? []
                        }
                        orphans.append(
                            AppOrphan(
                                table: table,
                                key: key.map { String.fromDatabaseValue($0) ?? $0.description },
                                parent: violation["parent"]
                            )
                        )
                    }
                }
                return orphans
            }
        }
    }

    /// Every app table the replica holds rows of or declares, with its live row count.
    package func appTableCounts() throws(StoreError) -> [AppTableCount] {
        try Self.database { try writer.read(Self.appTableCounts) }
    }

    static func appTableCounts(_ db: Database) throws -> [AppTableCount] {
        try Row.fetchAll(db, sql: "SELECT name, declared, row_count FROM app_tables ORDER BY name").map {
            AppTableCount(name: $0[0], declared: $0[1], rows: $0[2])
        }
    }

    /// Runs `body` on a consistent snapshot of the replica: plain SQL on the app's tables. The
    /// app's own errors pass through; SQLite's become a `StoreError` of code `.sql`.
    /// It reaches the app's declared tables only (`AppSQLGuard`): LANSync's own are refused.
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        let apps = apps
        do {
            return try writer.read { db in
                try AppSQLGuard.run(on: db, try apps.catalogCache.catalog(db).appScope(writes: false)) { try body(db) }
            }
        } catch let error as DatabaseError {
            throw StoreError(.sql, Self.sqlMessage(error))
        }
    }

    /// Runs `body` on a consistent snapshot with no guard: LANSync's own tables too. For LANSync's
    /// own diagnostics and tests, never for SQL an app sends.
    package func readInternals<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try writer.read(body)
        } catch let error as DatabaseError {
            throw StoreError(.sql, Self.sqlMessage(error))
        }
    }

    /// The reader to observe app tables with (GRDB's `ValueObservation`): a pool's readers never write.
    package var reader: any DatabaseReader { writer }

    /// Calls `body` with every app-table row held (deleted ones too: their delete syncs), of one
    /// table (lowercase) or all, by table then key bytes.
    package func forEachAppRow(table: String? = nil, _ body: (RowKey, RowState) throws -> Void) throws {
        try Self.databaseCallingBack {
            try writer.read { db in try Self.forEachAppRow(db, table: table, catalogs: apps.catalogCache, body) }
        }
    }

    /// The same inside a read the caller holds (an export reads every row in one snapshot).
    static func forEachAppRow(
        _ db: Database,
        table: String? = nil,
        catalogs: AppCatalogCache,
        _ body: (RowKey, RowState) throws -> Void
    ) throws {
        let catalog = try catalogs.catalog(db)
        let (columns, replicas) = (try ColumnNumbering.load(db).names, try Self.replicaNumbers(db))
        let values = AppRowValues(db, catalog: catalog)
        // Every table heard of (the catalog, cached by schema version, may not know one a peer
        // just brought), by name.
        var sql = "SELECT num, name FROM app_tables"
        var arguments = StatementArguments()
        if let table {
            sql += " WHERE name = ?"
            arguments += [table]
        }
        let tables = try Row.fetchAll(db, sql: sql + " ORDER BY name", arguments: arguments).map {
            (number: $0[0] as Int64, name: $0[1] as String)
        }
        for entry in tables {
            let byKey = try Row.fetchCursor(
                db,
                sql: "SELECT key, state FROM app_rows WHERE tbl = ? ORDER BY key",
                arguments: [entry.number]
            )
            // States kept by rowid, in the order of their rows' key bytes (`statesByRowidSQL`),
            // merged with those by key as both cursors go.
            let byRowid = try catalog.tables[entry.number]?.declared.map { declared in
                try Row.fetchCursor(db, sql: StoredStates.statesByRowidSQL(declared), arguments: [entry.number])
            }
            func nextByRowid() throws -> (key: [UInt8], state: Data)? {
                try byRowid?.next().map { ([UInt8]($0[0] as Data), $0[1] as Data) }
            }
            func emit(_ key: [UInt8], _ state: Data) throws {
                let rowKey = RowKey(table: entry.name, primaryKey: try SQLValue.key(from: key))
                try state.withUnsafeBytes { state in
                    try body(
                        rowKey,
                        try values.decode(state, table: entry.number, key: key, columns: columns, replicas: replicas)
                    )
                }
            }
            var pending = try nextByRowid()
            while let row = try byKey.next() {
                let key = [UInt8](row[0] as Data)
                while let (rowidKey, state) = pending, rowidKey.lexicographicallyPrecedes(key) {
                    try emit(rowidKey, state)
                    pending = try nextByRowid()
                }
                try emit(key, row[1] as Data)
            }
            while let (rowidKey, state) = pending {
                try emit(rowidKey, state)
                pending = try nextByRowid()
            }
        }
    }

    /// What the replica holds of one app-table row: its state, live or deleted; nil when never heard of.
    package func row(_ key: RowKey) throws(StoreError) -> RowState? {
        try Self.database {
            try writer.read { db in
                let keyBytes = SQLValue.keyBytes(key.primaryKey)
                guard
                    let number = try Int64.fetchOne(
                        db,
                        sql: "SELECT num FROM app_tables WHERE name = ?",
                        arguments: [key.table]
                    )
                else { return nil }
                return try AppRowValues(db, catalog: try apps.catalogCache.catalog(db)).state(
                    table: number,
                    key: keyBytes,
                    columns: ColumnNumbering.load(db).names,
                    replicas: Self.replicaNumbers(db)
                )
            }
        }
    }
}

/// A row whose parent row is missing (`LANSyncNode.orphans`).
public struct AppOrphan: Sendable, Equatable {
    /// The child's table.
    public let table: String
    /// The child's primary key values, as text (empty for a table without a rowid).
    public let key: [String]
    /// The table its missing parent belongs to.
    public let parent: String

    /// An orphan of `table` with primary key `key`, whose parent in `parent` is missing.
    public init(table: String, key: [String], parent: String) {
        self.table = table
        self.key = key
        self.parent = parent
    }
}

/// One app table in `status`: its name (lowercase), whether this replica's app declared it, and
/// how many rows it holds (deleted rows not counted).
public struct AppTableCount: Sendable, Equatable {
    /// The table's name, lowercase.
    public let name: String
    /// Whether this replica's app declared it (rows of tables it did not declare are kept and relayed, not shown).
    public let declared: Bool
    /// Rows it holds, deleted rows not counted.
    public let rows: Int
}
