import GRDB
import LANSyncCore
import Synchronization

/// What the store knows of app tables: every table it has heard of, by its local number (rows
/// of tables this replica's app has not declared are kept and relayed: promise 8), and, for the
/// declared ones, how their columns map to the values LANSync's triggers pass.
struct AppCatalog: Sendable {
    struct Table: Sendable {
        let number: Int64
        /// Lowercase, as changes carry it.
        let name: String
        /// The app's declaration; nil for a table only heard of from peers.
        let declared: AppSchema.Table?
        /// Lowercase column names in declaration order: the order triggers pass values in.
        let columns: [String]
        /// Indexes into `columns` of the primary key, in key order.
        let keyColumns: [Int]
        /// Indexes into `columns` of counter columns, in declaration order.
        let counterColumns: [Int]
        /// Indexes into `columns` of the columns that are neither key nor counter, by name: the
        /// order a change lists its values in.
        let plainColumns: [Int]

        init(number: Int64, name: String, declared: AppSchema.Table?) {
            self.number = number
            self.name = name
            self.declared = declared
            let names = declared?.columns.map { $0.name.lowercased() } ?? []
            columns = names
            keyColumns = declared.map { table in
                table.primaryKey.map { key in table.columns.firstIndex { $0.name.lowercased() == key.lowercased() }! }
            } ?? []
            let counters = Set(declared?.counters.map { $0.lowercased() } ?? [])
            counterColumns = names.indices.filter { counters.contains(names[$0]) }
            let key = Set(keyColumns)
            plainColumns = names.indices.filter { !key.contains($0) && !counters.contains(names[$0]) }.sorted { names[$0] < names[$1] }
        }

        var appendOnly: Bool { declared?.appendOnly ?? false }
        /// Masks of changed columns an update trigger passes: 62 columns per integer.
        var maskCount: Int { (columns.count + 61) / 62 }
    }

    /// The schema as the app last applied it (empty before the first `schema apply`).
    let schema: AppSchema
    private(set) var tables: [Int64: Table] = [:]
    private(set) var numbers: [String: Int64] = [:]

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
        for row in try Row.fetchAll(db, sql: "SELECT num, name FROM app_tables") {
            catalog.add(number: row[0], name: row[1])
        }
        return catalog
    }

    mutating func add(number: Int64, name: String) {
        tables[number] = Table(number: number, name: name, declared: schema.table(name))
        numbers[name] = number
    }

    func table(named name: String) -> Table? { numbers[name].flatMap { tables[$0] } }
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

/// The triggers LANSync puts on each declared app table (see `AppWriteCapture`): they pass each
/// row an app's statement inserts, updates or deletes to `lansync_capture`, apply the table's
/// `ON DELETE` rules to children this replica holds when the app deletes a parent, and refuse
/// UPDATE and DELETE on append-only tables.
///
/// What the capture triggers pass after the table number and the operation:
/// - insert: `NEW` of every column, in declaration order;
/// - update: masks of the columns whose value changed (bit i of mask k: column 62k + i), `OLD` of
///   the key columns, `OLD` of the counter columns, then `NEW` of every column;
/// - delete: `OLD` of the key columns.
enum AppTriggers {
    static func names(for table: AppSchema.Table) -> [String] {
        ["insert", "update", "delete", "refuse_update", "refuse_delete"].map { "lansync_\(table.name.lowercased())_\($0)" }
    }

    /// The statements that (re)create a table's triggers.
    static func statements(for table: AppCatalog.Table) -> [String] {
        guard let declared = table.declared else { return [] }
        let quoted = declared.name.quotedDatabaseIdentifier
        let columns = declared.columns.map { $0.name.quotedDatabaseIdentifier }
        let names = names(for: declared).map(\.quotedDatabaseIdentifier)
        var statements = names.map { "DROP TRIGGER IF EXISTS \($0)" }
        let new = columns.map { "NEW.\($0)" }.joined(separator: ", ")
        statements.append(
            "CREATE TRIGGER \(names[0]) AFTER INSERT ON \(quoted) WHEN lansync_local() BEGIN SELECT lansync_capture(\(table.number), 1, \(new)); END")
        if declared.appendOnly {
            for (index, operation) in [(3, "UPDATE"), (4, "DELETE")] {
                statements.append(
                    "CREATE TRIGGER \(names[index]) BEFORE \(operation) ON \(quoted) WHEN lansync_local() BEGIN "
                        + "SELECT RAISE(ABORT, '\(declared.name) is append-only: its rows are never updated or deleted, "
                        + "so that every device keeps every row; append a new row instead'); END")
            }
            return statements
        }
        let masks = (0..<table.maskCount).map { mask in
            columns.indices.filter { $0 / 62 == mask }.map { "((OLD.\(columns[$0]) IS NOT NEW.\(columns[$0])) << \($0 % 62))" }
                .joined(separator: " | ")
        }
        let oldKey = table.keyColumns.map { "OLD.\(columns[$0])" }
        let oldCounters = table.counterColumns.map { "OLD.\(columns[$0])" }
        let updateArguments = ([String(table.number), "2"] + masks + oldKey + oldCounters + [new]).joined(separator: ", ")
        statements.append(
            "CREATE TRIGGER \(names[1]) AFTER UPDATE ON \(quoted) WHEN lansync_local() BEGIN SELECT lansync_capture(\(updateArguments)); END")
        statements.append(
            "CREATE TRIGGER \(names[2]) AFTER DELETE ON \(quoted) WHEN lansync_local() BEGIN SELECT lansync_capture(\(table.number), 3, "
                + "\(oldKey.joined(separator: ", "))); END")
        return statements
    }

    /// The triggers that apply `ON DELETE CASCADE` and `SET NULL` of the children's declarations
    /// when the app deletes a parent row (never when LANSync merges a peer's delete: the peer
    /// sends the deletes of the children it held, and children it did not hold stay, as orphans).
    static func cascadeStatements(for schema: AppSchema) -> [String] {
        var statements = [String]()
        for child in schema.tables {
            for (index, key) in child.foreignKeys.enumerated() where key.onDelete != .nothing {
                guard let parent = schema.table(key.parent) else { continue }
                let parentColumns = key.parentColumns.isEmpty ? parent.primaryKey : key.parentColumns
                guard parentColumns.count == key.columns.count else { continue }
                let name = "lansync_\(child.name.lowercased())_on_delete_\(index)".quotedDatabaseIdentifier
                let match = zip(key.columns, parentColumns).map { "\($0.quotedDatabaseIdentifier) = OLD.\($1.quotedDatabaseIdentifier)" }
                    .joined(separator: " AND ")
                let action = key.onDelete == .cascade
                    ? "DELETE FROM \(child.name.quotedDatabaseIdentifier) WHERE \(match)"
                    : "UPDATE \(child.name.quotedDatabaseIdentifier) SET "
                        + key.columns.map { "\($0.quotedDatabaseIdentifier) = NULL" }.joined(separator: ", ") + " WHERE \(match)"
                statements.append("DROP TRIGGER IF EXISTS \(name)")
                statements.append(
                    "CREATE TRIGGER \(name) AFTER DELETE ON \(parent.name.quotedDatabaseIdentifier) WHEN lansync_local() "
                        + "BEGIN \(action); END")
            }
        }
        return statements
    }
}
