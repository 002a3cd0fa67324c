import Foundation
package import GRDB

/// Running and rendering the SQL that apps send through `lansync exec`/`query`, the local API
/// and the dashboard: one place, so they refuse and print alike.
package enum AppSQL {
    /// Runs `sql` as an app's write: one durable transaction that syncs, all of it or nothing.
    /// Returns how many rows it changed. It reaches the app's declared tables only: SQLite refuses
    /// the rest as it compiles each statement (see `AppSQLGuard` in the store), and every refusal
    /// says that nothing was applied.
    /// `seed`: seed rows, which every real write beats (`LANSyncNode.write(seed:)`).
    package static func execute(
        _ sql: String,
        arguments: StatementArguments = [],
        seed: Bool = false,
        on node: LANSyncNode
    ) async throws(LANSyncError) -> Int {
        do {
            return try await node.write(seed: seed) { db -> Int in
                let before = db.totalChangesCount
                try db.execute(sql: sql, arguments: arguments)
                return db.totalChangesCount - before
            }
        } catch let error as LANSyncError {
            throw LANSyncError(error.code, error.message + "; nothing was applied")
        } catch {
            throw LANSyncError(.sql, "\(error); nothing was applied")
        }
    }

    /// Runs a read-only query: its column names and rows. A statement that would write is
    /// refused, pointing to `writeInstead` (how the caller writes: `lansync exec`, POST /v1/exec).
    package static func query(
        _ sql: String,
        arguments: StatementArguments = [],
        on node: LANSyncNode,
        writeInstead: String
    ) throws(LANSyncError) -> (columns: [String], rows: [[DatabaseValue]]) {
        do {
            return try node.read { db in
                let statement = try db.makeStatement(sql: sql)
                guard statement.isReadonly else {
                    throw LANSyncError(.invalidInput, "query only reads; write with \(writeInstead)")
                }
                let rows = try Row.fetchAll(statement, arguments: arguments)
                return (statement.columnNames, rows.map { Array($0.databaseValues) })
            }
        } catch let error as LANSyncError {
            throw error
        } catch {
            throw LANSyncError(.sql, "\(error)")
        }
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
