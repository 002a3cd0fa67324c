import CSQLiteAuthorizer
import GRDB
import GRDBSQLite
import Synchronization

/// What an app's SQL may touch, decided by SQLite as it compiles each statement (an authorizer
/// policy, see `lansync_authorizer.h`), not by reading the SQL's text.
///
/// While an app's write or read runs on a connection (`with(_:_:)`), its statements reach the
/// app's declared tables and nothing else: LANSync's own tables (whose rows only LANSync may
/// change, or sync would never repair them), SQLite's schema, other database files (`ATTACH`),
/// transaction control (each write is one transaction of LANSync's), schema changes (declared
/// with `schema apply`, where they are checked and synced) and pragmas that change state are
/// refused, and the refusal says what may be reached. LANSync's own triggers on app tables run
/// as part of the app's statements and are let through.
final class AppSQLGuard: Sendable {
    /// What a running app statement may reach.
    struct Scope: Sendable {
        /// The declared app tables, lowercase.
        var tables: Set<String>
        /// Whether it may write them (an app's write) or only read them (a query).
        var writes: Bool
        /// How an app writes instead, for a read's refusal of a write.
        var writeInstead = "`lansync exec`, POST /v1/exec or the library's node.write"
    }

    private struct State {
        var scope: Scope?
        var refusal: String?
    }

    private let state = Mutex(State())

    /// Puts a guard on `db`'s connection, off until `with(_:_:)`. Call as the connection opens.
    static func install(on db: Database) {
        guard let connection = db.sqliteConnection else { return }
        // Kept for the connection's life (and a little past: the C side holds the pointer).
        let guardian = Unmanaged.passRetained(AppSQLGuard()).toOpaque()
        _ = lansync_authorizer_set_policy(
            connection,
            { context, action, argument1, argument2, database, trigger in
                Unmanaged<AppSQLGuard>.fromOpaque(context!).takeUnretainedValue()
                    .decide(
                        action,
                        argument1.map { String(cString: $0) },
                        argument2.map { String(cString: $0) },
                        database.map { String(cString: $0) },
                        trigger.map { String(cString: $0) }
                    )
            },
            guardian
        )
    }

    /// The guard on `db`'s connection, if it has one.
    static func of(_ db: Database) -> AppSQLGuard? {
        guard let connection = db.sqliteConnection, let context = lansync_authorizer_policy_context(connection) else {
            return nil
        }
        return Unmanaged<AppSQLGuard>.fromOpaque(context).takeUnretainedValue()
    }

    /// Runs the app's `body` on `db` within `scope` (`with(_:_:)`); on a connection without a
    /// guard (opened without LANSync's configuration), as it is.
    static func run<T>(on db: Database, _ scope: Scope, _ body: () throws -> T) throws -> T {
        guard let guardian = of(db) else { return try body() }
        return try guardian.with(scope, body)
    }

    /// Runs the app's `body` within `scope`. A statement it refused fails with SQLite's "not
    /// authorized"; that error comes out as a `StoreError` of code `.refused` that says why.
    func with<T>(_ scope: Scope, _ body: () throws -> T) throws -> T {
        let previous = state.withLock { state in
            defer { state = State(scope: scope, refusal: nil) }
            return state
        }
        defer { state.withLock { $0 = previous } }
        do {
            return try body()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_AUTH {
            let refusal = state.withLock { $0.refusal } ?? "this statement reaches beyond the app's tables"
            let sql = error.sql.map { " (in `\($0.trimmingCharacters(in: .whitespacesAndNewlines))`)" } ?? ""
            throw StoreError(.refused, refusal + sql)
        }
    }

    /// SQLite's authorizer actions (sqlite3.h), by name.
    private enum Action {
        static let reads: Set<Int32> = [SQLITE_SELECT, SQLITE_RECURSIVE, SQLITE_FUNCTION]
        static let writes: Set<Int32> = [SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE]
        static let transactions: Set<Int32> = [SQLITE_TRANSACTION, SQLITE_SAVEPOINT]
        static let otherFiles: Set<Int32> = [SQLITE_ATTACH, SQLITE_DETACH]
    }

    /// SQLite's schema tables: reading them is how GRDB (and an app) learns a table's columns.
    private static let schemaTables: Set<String> = [
        "sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema",
    ]

    /// Pragmas that only read, with or without an argument (which names a table or an index).
    private static let readingPragmas: Set<String> = [
        "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
        "foreign_key_check", "integrity_check", "quick_check", "collation_list", "function_list", "module_list",
        "pragma_list", "database_list", "compile_options",
    ]
    /// Pragmas that read without an argument and set with one.
    private static let settingPragmas: Set<String> = [
        "data_version", "schema_version", "user_version", "application_id", "page_size", "page_count",
        "freelist_count", "encoding", "journal_mode", "foreign_keys", "synchronous", "auto_vacuum", "cache_size",
    ]

    private func decide(
        _ action: Int32,
        _ argument1: String?,
        _ argument2: String?,
        _ database: String?,
        _ trigger: String?
    ) -> Int32 {
        guard let scope = state.withLock({ $0.scope }) else { return SQLITE_OK }
        // LANSync's own triggers on app tables (guards, cascades) compile with the app's statement.
        if let trigger, trigger.lowercased().hasPrefix("lansync_") { return SQLITE_OK }
        let table = argument1?.lowercased() ?? ""
        let inMain = database == nil || database == "main"
        var refusal: String
        switch action {
        case _ where Action.reads.contains(action):
            return SQLITE_OK
        case SQLITE_READ:
            if (inMain && scope.tables.contains(table)) || Self.schemaTables.contains(table) { return SQLITE_OK }
            refusal = "\(Self.describe(table, database)) cannot be read here"
        case _ where Action.writes.contains(action):
            if !scope.writes {
                refusal = "a query only reads; write with \(scope.writeInstead)"
            } else if Self.schemaTables.contains(table) {
                refusal = Self.schemaChange
            } else if inMain && scope.tables.contains(table) {
                // SQLite names the rowid (`rowid`, `oid`, `_rowid_`) "ROWID" here; a column of
                // that name is reported as its declaration spells it.
                guard action == SQLITE_UPDATE, argument2 == "ROWID" else { return SQLITE_OK }
                // The table is within reach, so the refusal says only why and what instead.
                state.withLock {
                    $0.refusal =
                        "an UPDATE of a row's rowid cannot run here: LANSync finds rows by their rowid, which each "
                        + "device numbers for itself; update the row's key or its other columns instead"
                }
                return SQLITE_DENY
            } else {
                refusal = "\(Self.describe(table, database)) cannot be written here"
            }
        case SQLITE_PRAGMA:
            let pragma = table
            if Self.readingPragmas.contains(pragma) || (Self.settingPragmas.contains(pragma) && argument2 == nil) {
                return SQLITE_OK
            }
            refusal =
                argument2 == nil || Self.settingPragmas.contains(pragma)
                ? "PRAGMA \(pragma) changes how the replica works, which only LANSync may do"
                : "PRAGMA \(pragma) is not one of the pragmas that only read"
        case _ where Action.transactions.contains(action):
            refusal =
                "transaction control cannot run here: each write runs in one transaction of its own, all of it or nothing"
        case _ where Action.otherFiles.contains(action):
            refusal = "ATTACH and DETACH reach other database files; only this replica's app tables can be reached"
        default:
            refusal = Self.schemaChange
        }
        let reach =
            scope.tables.isEmpty
            ? "no app table is declared yet (declare them with `lansync schema apply FILE`)"
            : "the app's declared tables (\(scope.tables.sorted().joined(separator: ", ")))"
        refusal += "; SQL from an app reaches \(reach) and nothing else"
        state.withLock { $0.refusal = refusal }
        return SQLITE_DENY
    }

    private static let schemaChange =
        "this statement changes the schema or the database itself; declare tables and indexes with `lansync schema apply FILE`"

    private static func describe(_ table: String, _ database: String?) -> String {
        if let database, database != "main" { return "\(database).\(table) (another database)" }
        if schemaTables.contains(table) || table.hasPrefix("sqlite_") { return "\(table) (SQLite's own table)" }
        return "\(table) (LANSync's own table, not an app table)"
    }
}
