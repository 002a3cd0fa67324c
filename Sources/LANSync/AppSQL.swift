import Foundation
package import GRDB

/// Rules and renderings of the SQL that apps send through `lansync exec`/`query` and the local
/// API: one place, so the shell and the API refuse and print alike.
package enum AppSQL {
    /// Why `sql` cannot run as an app's write, or nil. Schema statements belong in `schema apply`,
    /// where they are checked and synced; transaction control in LANSync's own transaction.
    package static func writeProblem(_ sql: String) -> String? {
        let words = ["CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "PRAGMA", "VACUUM", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"]
        for statement in sql.split(separator: ";") {
            let first = statement.split(whereSeparator: { $0.isWhitespace || $0 == "(" }).first.map { $0.uppercased() } ?? ""
            if words.contains(first) {
                return first == "CREATE" || first == "DROP" || first == "ALTER"
                    ? "\(first) changes the schema; declare tables and indexes with `lansync schema apply FILE`"
                    : "\(first) cannot run here: each write runs in one transaction of its own"
            }
        }
        return nil
    }

    /// A value as text: NULL, numbers, text as is, BLOBs as base64.
    package static func plain(_ value: DatabaseValue) -> String {
        switch value.storage {
        case .null: return "NULL"
        case .int64(let number): return "\(number)"
        case .double(let number): return "\(number)"
        case .string(let text): return text
        case .blob(let data): return data.base64EncodedString()
        }
    }

    /// A value as JSON: numbers, strings, null (also for NaN and infinities); BLOBs as base64 strings.
    package static func json(_ value: DatabaseValue) -> String {
        switch value.storage {
        case .null: return "null"
        case .int64(let number): return "\(number)"
        case .double(let number): return number.isFinite ? "\(number)" : "null"
        case .string(let text): return ExportFile.quoted(text)
        case .blob(let data): return ExportFile.quoted(data.base64EncodedString())
        }
    }
}
