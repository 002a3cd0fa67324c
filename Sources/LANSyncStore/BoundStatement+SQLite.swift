import GRDB
import GRDBSQLite
import LANSyncCore

/// A prepared statement run through SQLite's C API, for the few statements on hot paths: the
/// merge's INSERT and the delta's SELECTs.
///
/// GRDB's `execute(arguments:)` builds an array of `DatabaseValue`s for every row, and its `Row`
/// copies every column into one; on these paths that costs more than SQLite's own work (figures
/// in docs/journal/2026-11-speed.md). The statement comes from GRDB's statement cache, so it is
/// prepared once per connection and finalized by GRDB. It runs inside a GRDB access to `db`,
/// where no transaction observers are registered.
///
/// It holds the two C handles only, so passing it around costs no reference counting per row;
/// GRDB's statement cache keeps the statement alive as long as the connection, which outlives
/// any one access.
///
/// With `AppWriteCapture+SQLite.swift`, the only files of LANSyncStore that call SQLite directly.
struct BoundStatement {
    private let handle: SQLiteStatement
    private let connection: SQLiteConnection?

    init(_ db: Database, sql: String) throws {
        handle = try db.cachedStatement(sql: sql).sqliteStatement
        connection = db.sqliteConnection
    }

    /// SQLite copies bound text and blobs (`SQLITE_TRANSIENT`): nothing must outlive the call.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ text: String) {
        let bound = text.utf8.withContiguousStorageIfAvailable { bytes in
            sqlite3_bind_text(handle, index, bytes.baseAddress, Int32(bytes.count), Self.transient)
        }
        if bound == nil {
            var text = text
            text.withUTF8 { bytes in
                _ = sqlite3_bind_text(handle, index, bytes.baseAddress, Int32(bytes.count), Self.transient)
            }
        }
    }

    func bind(_ index: Int32, _ blob: [UInt8]) {
        blob.withUnsafeBytes { bytes in
            _ = sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), Self.transient)
        }
    }

    func bind(_ index: Int32, _ bytes: UnsafeRawBufferPointer) {
        _ = sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), Self.transient)
    }

    /// Binds an app-table value exactly: TEXT with its length (embedded NULs kept), REAL by its bits.
    func bind(_ index: Int32, _ value: SQLValue) {
        switch value {
        case .null: sqlite3_bind_null(handle, index)
        case .integer(let value): sqlite3_bind_int64(handle, index, value)
        case .realBits(let bits): sqlite3_bind_double(handle, index, Double(bitPattern: bits))
        case .text(let text): bind(index, text)
        case .blob(let bytes): bind(index, bytes)
        }
    }

    /// Binds a row's key and then its values (`SQLValue`s, exactly) from parameter `position` on,
    /// and moves `position` past them: one row of an INSERT OR REPLACE into an app's table.
    func bind(_ key: [SQLValue], _ values: [SQLValue], from position: inout Int32) {
        for value in key {
            bind(position, value)
            position += 1
        }
        for value in values {
            bind(position, value)
            position += 1
        }
    }

    /// Runs a query with the values bound since the last run, calling `body` for each row.
    func forEachRow(_ body: (Columns) throws -> Void) throws {
        defer { sqlite3_reset(handle) }
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_ROW: try body(Columns(handle: handle))
            case SQLITE_DONE: return
            case let code:
                throw error(code)
            }
        }
    }

    /// The current row of a query, column by column (0 is the first).
    struct Columns {
        fileprivate let handle: SQLiteStatement

        func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

        /// Text as stored (the store writes valid UTF-8; anything else is repaired, never trapped on).
        func text(_ column: Int32) -> String {
            guard let start = sqlite3_column_text(handle, column) else { return "" }
            let count = Int(sqlite3_column_bytes(handle, column))
            return String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
        }

        /// An app-table value as the table shows it: TEXT as `text(_:)` reads it, REAL by its bits.
        func value(_ column: Int32) -> SQLValue {
            switch sqlite3_column_type(handle, column) {
            case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, column))
            case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, column))
            case SQLITE_TEXT: return .text(text(column))
            case SQLITE_BLOB: return .blob(withBlob(column) { Array($0) })
            default: return .null
            }
        }

        /// Calls `body` with the blob's bytes, valid only during the call.
        func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
            let count = Int(sqlite3_column_bytes(handle, column))
            return try body(UnsafeRawBufferPointer(start: sqlite3_column_blob(handle, column), count: count))
        }
    }

    /// Runs the statement with the values bound since the last run; returns the rows it changed.
    @discardableResult
    func run() throws -> Int {
        let code = sqlite3_step(handle)
        sqlite3_reset(handle)
        guard code == SQLITE_DONE else {
            throw error(code)
        }
        return Int(sqlite3_changes(connection))
    }

    /// Binds a blob without SQLite copying it (`SQLITE_STATIC`): the bytes must stay valid and
    /// unchanged until `runClearingBindings` returns. For the many blobs of a multi-row INSERT,
    /// where each copy is a malloc and a free.
    func bindStatic(_ index: Int32, _ bytes: UnsafeRawBufferPointer) {
        _ = sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), nil)
    }

    /// `run`, then clears every binding, so that no pointer bound by `bindStatic` outlives it.
    @discardableResult
    func runClearingBindings() throws -> Int {
        defer { sqlite3_clear_bindings(handle) }
        return try run()
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: connection.map { String(cString: sqlite3_errmsg($0)) },
            sql: String(cString: sqlite3_sql(handle))
        )
    }
}
