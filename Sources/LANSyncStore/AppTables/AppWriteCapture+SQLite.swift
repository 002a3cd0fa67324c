import CSQLiteConfig
import GRDB
import GRDBSQLite
import LANSyncCore

/// Registers `AppWriteCapture`'s hook and functions through SQLite's C API, which reads each
/// value exactly: TEXT with its length (GRDB's `DatabaseValue` stops at an embedded NUL), and
/// without building a `DatabaseValue` array for every row an app's statement touches.
extension AppWriteCapture {
    func register(on db: Database) {
        guard let connection = db.sqliteConnection else { return }
        // The capture outlives every connection: the store's configuration holds it.
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_create_function_v2(
            connection,
            "lansync_local",
            0,
            SQLITE_UTF8,
            context,
            { call, _, _ in
                let capture = Unmanaged<AppWriteCapture>.fromOpaque(sqlite3_user_data(call)!).takeUnretainedValue()
                switch capture.mode {
                case .local: sqlite3_result_int64(call, 1)
                case .merging: sqlite3_result_int64(call, 0)
                case .idle: sqlite3_result_error(call, AppWriteCapture.outsideWrite, -1)
                }
            },
            nil,
            nil,
            nil
        )
        // Deterministic, so that a CHECK constraint may call it; any number of arguments, the
        // columns the guard names (`AppTableGuard`). A read-only connection (a pool's reader, or
        // `PRAGMA integrity_check` checking the constraint) cannot write, so it passes.
        sqlite3_create_function_v2(
            connection,
            "lansync_guard",
            -1,
            SQLITE_UTF8 | SQLITE_DETERMINISTIC,
            context,
            { call, _, _ in
                let capture = Unmanaged<AppWriteCapture>.fromOpaque(sqlite3_user_data(call)!).takeUnretainedValue()
                if capture.mode == .idle, sqlite3_db_readonly(sqlite3_context_db_handle(call), "main") == 0 {
                    sqlite3_result_error(call, AppWriteCapture.outsideWrite, -1)
                } else {
                    sqlite3_result_int64(call, 1)
                }
            },
            nil,
            nil,
            nil
        )
        // A row's key bytes (`SQLValue.keyBytes`) from its key columns, for an ORDER BY that
        // lists rows in the order of their key bytes without holding them in memory
        // (`ReplicaStore.forEachAppRow`): SQLite's sorter spills to a temporary file.
        sqlite3_create_function_v2(
            connection,
            "lansync_key_bytes",
            -1,
            SQLITE_UTF8 | SQLITE_DETERMINISTIC,
            nil,
            { call, count, arguments in
                guard let arguments, (1...Int32(SQLValue.maxKeyColumns)).contains(count) else {
                    sqlite3_result_error(
                        call,
                        "lansync_key_bytes takes a key's 1 to \(SQLValue.maxKeyColumns) columns",
                        -1
                    )
                    return
                }
                let key = SQLValue.keyBytes((0..<Int(count)).map { AppWriteCapture.value(arguments[$0]) })
                key.withUnsafeBytes { bytes in
                    sqlite3_result_blob(call, bytes.baseAddress, Int32(bytes.count), AppWriteCapture.transient)
                }
            },
            nil,
            nil,
            nil
        )
        _ = sqlite3_preupdate_hook(
            connection,
            { context, connection, operation, _, table, oldRowid, newRowid in
                guard let context, let connection, let table else { return }
                let kind: Event.Operation
                switch operation {
                case SQLITE_INSERT: kind = .insert
                case SQLITE_UPDATE: kind = .update
                case SQLITE_DELETE: kind = .delete
                default: return
                }
                let capture = Unmanaged<AppWriteCapture>.fromOpaque(context).takeUnretainedValue()
                capture.rowWillChange(
                    HookedRow(connection: connection),
                    operation: kind,
                    table: table,
                    rowid: kind == .insert ? newRowid : oldRowid
                )
            },
            context
        )
    }

    /// The row the pre-update hook is called for, read through `sqlite3_preupdate_old`/`_new`.
    private struct HookedRow: PreUpdateRow {
        let connection: OpaquePointer

        func old(_ column: Int32) -> SQLValue {
            var value: OpaquePointer?
            guard sqlite3_preupdate_old(connection, column, &value) == SQLITE_OK else { return .null }
            return AppWriteCapture.value(value)
        }

        func new(_ column: Int32) -> SQLValue {
            var value: OpaquePointer?
            guard sqlite3_preupdate_new(connection, column, &value) == SQLITE_OK else { return .null }
            return AppWriteCapture.value(value)
        }

        func appendNew(_ column: Int32, real: Bool, to out: inout [UInt8]) {
            var value: OpaquePointer?
            guard sqlite3_preupdate_new(connection, column, &value) == SQLITE_OK else { return out.append(0) }
            AppWriteCapture.append(value, real: real, to: &out)
        }
    }

    /// Appends a value's canonical bytes (`SQLValue.append(to:)`) read straight from SQLite: TEXT
    /// and BLOB without a `String` or an array for them.
    fileprivate static func append(_ value: OpaquePointer?, real: Bool, to out: inout [UInt8]) {
        // Numbers as `SQLValue.append(to:)` writes them (tag, 8 bytes big-endian), without the
        // enum: this runs for every column of every row an app inserts.
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER where real:
            out.append(2)
            out.appendBigEndian(Double(sqlite3_value_int64(value)).bitPattern)
        case SQLITE_INTEGER:
            out.append(1)
            out.appendBigEndian(UInt64(bitPattern: sqlite3_value_int64(value)))
        case SQLITE_FLOAT:
            out.append(2)
            out.appendBigEndian(sqlite3_value_double(value).bitPattern)
        case SQLITE_TEXT:
            // The text first, then its length (SQLite's rule: reading the text may convert it).
            let start = sqlite3_value_text(value)
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let start else { return SQLValue.text("").append(to: &out) }
            let utf8 = UnsafeRawBufferPointer(start: start, count: count)
            if isASCII(utf8) {
                SQLValue.appendCanonical(text: utf8, to: &out)
            } else {
                // As `value` reads it: a `String`, with what is not UTF-8 repaired.
                SQLValue.text(String(decoding: utf8, as: UTF8.self)).append(to: &out)
            }
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let start = sqlite3_value_blob(value) else { return SQLValue.blob([]).append(to: &out) }
            SQLValue.appendCanonical(blob: UnsafeRawBufferPointer(start: start, count: count), to: &out)
        default:
            SQLValue.null.append(to: &out)
        }
    }

    /// Whether every byte is below 0x80, eight bytes at a time.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= bytes.count {
            high |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            high |= UInt64(bytes[index])
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// SQLite copies a result's bytes (`SQLITE_TRANSIENT`).
    fileprivate static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    fileprivate static func value(_ value: OpaquePointer?) -> SQLValue {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let start = sqlite3_value_text(value) else { return .text("") }
            return .text(
                String(
                    decoding: UnsafeBufferPointer(start: start, count: Int(sqlite3_value_bytes(value))),
                    as: UTF8.self
                )
            )
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            guard count > 0, let start = sqlite3_value_blob(value) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: start, count: count)))
        default: return .null
        }
    }
}
