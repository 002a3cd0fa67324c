import GRDB
import GRDBSQLite
import LANSyncCore

/// Registers `AppWriteCapture`'s functions through SQLite's C API, which reads each argument
/// exactly: TEXT with its length (GRDB's `DatabaseValue` stops at an embedded NUL), and without
/// building a `DatabaseValue` array for every row an app's statement touches.
extension AppWriteCapture {
    func register(on db: Database) {
        guard let connection = db.sqliteConnection else { return }
        // The capture outlives every connection: the store's configuration holds it.
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_create_function_v2(
            connection, "lansync_local", 0, SQLITE_UTF8, context,
            { call, _, _ in
                let capture = Unmanaged<AppWriteCapture>.fromOpaque(sqlite3_user_data(call)!).takeUnretainedValue()
                switch capture.mode {
                case .local: sqlite3_result_int64(call, 1)
                case .merging: sqlite3_result_int64(call, 0)
                case .idle: sqlite3_result_error(call, AppWriteCapture.outsideWrite, -1)
                }
            }, nil, nil, nil)
        sqlite3_create_function_v2(
            connection, "lansync_capture", -1, SQLITE_UTF8, context,
            { call, count, arguments in
                let capture = Unmanaged<AppWriteCapture>.fromOpaque(sqlite3_user_data(call)!).takeUnretainedValue()
                guard count >= 2, let arguments, sqlite3_value_type(arguments[0]) == SQLITE_INTEGER,
                    sqlite3_value_type(arguments[1]) == SQLITE_INTEGER
                else { return sqlite3_result_error(call, "lansync_capture: malformed call; apply the schema again", -1) }
                let table = sqlite3_value_int64(arguments[0])
                let operation = sqlite3_value_int64(arguments[1])
                var values = [SQLValue]()
                values.reserveCapacity(Int(count) - 2)
                for index in 2..<Int(count) { values.append(AppWriteCapture.value(arguments[index])) }
                if let problem = capture.record(table: table, operation: operation, values) {
                    sqlite3_result_error(call, problem, -1)
                } else {
                    sqlite3_result_null(call)
                }
            }, nil, nil, nil)
    }

    private static func value(_ value: OpaquePointer?) -> SQLValue {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let start = sqlite3_value_text(value) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: start, count: Int(sqlite3_value_bytes(value))), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let start = sqlite3_value_blob(value) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: start, count: count)))
        default: return .null
        }
    }
}
