import GRDB

/// The CHECK constraint LANSync adds to every declared app table, `CHECK (lansync_guard(a, b, …))`
/// naming each of the table's columns: only LANSync's connections have that function (see
/// `AppWriteCapture`), so another program's INSERT, or UPDATE of any column, fails to compile
/// ("unknown function: lansync_guard()") instead of writing a row no peer would hear of. SQLite
/// evaluates a CHECK on an UPDATE only when the statement sets a column the CHECK names, so the
/// guard names them all, and is named again when the app adds a column. It is evaluated inline,
/// where a BEFORE UPDATE trigger ran a sub-program for every row, which a merge written in place
/// would pay on each row. (DELETE, which no CHECK sees, is guarded by a trigger: see
/// `AppTriggers`.) The constraint is the table's last; `schema show` prints the app's schema as
/// the app wrote it, without it.
enum AppTableGuard {
    /// What every form of the guard holds, and only the guard: the call without its arguments.
    static let call = "lansync_guard("
    /// The guard of earlier versions, which named no column: an UPDATE never evaluated it.
    static let formerConstraint = "CHECK (lansync_guard())"
    /// At most this many arguments a call: SQLite refuses a function call with more than 127.
    static let columnsPerCall = 100

    /// The constraint naming `columns`, in calls of at most `columnsPerCall` columns each.
    static func constraint(naming columns: [String]) -> String {
        let quoted = columns.map(\.quotedDatabaseIdentifier)
        let calls = stride(from: 0, to: max(quoted.count, 1), by: columnsPerCall).map { first in
            call + quoted[first..<min(first + columnsPerCall, quoted.count)].joined(separator: ", ") + ")"
        }
        return "CHECK (\(calls.joined(separator: " AND ")))"
    }

    /// `sql`, a `CREATE TABLE` statement, with the guard naming `columns` added after its last
    /// column or constraint; nil when its column list cannot be found.
    static func guarded(_ sql: String, columns: [String]) -> String? {
        guard let close = closingParenthesis(of: sql) else { return nil }
        return String(sql[..<close]) + ", " + constraint(naming: columns) + String(sql[close...])
    }

    /// `sql` with its guard, of any form, naming `columns` instead; `sql` itself when the guard
    /// names them already, and nil when it has no guard or its column list cannot be found. The
    /// guard is the last constraint: an added column goes before the table's constraints.
    static func renamed(_ sql: String, columns: [String]) -> String? {
        guard let close = closingParenthesis(of: sql),
            let start = sql[..<close].range(of: ", CHECK (" + call, options: .backwards)?.lowerBound
        else { return nil }
        return String(sql[..<start]) + ", " + constraint(naming: columns) + String(sql[close...])
    }

    /// Gives a table the guard naming its columns as they are now: to a table an earlier version
    /// created without a guard or with its former one, and after the app adds a column. Follows
    /// SQLite's documented way for schema changes that leave the stored rows as they are (every
    /// row meets a constraint that is always true): the stored statement is rewritten and the
    /// schema version moved on. Runs inside the caller's transaction; writes nothing when the
    /// guard names the columns already.
    static func install(onTable name: String, _ db: Database) throws {
        let lowercased = name.lowercased()
        guard
            let sql = try String.fetchOne(
                db,
                sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND lower(name) = ?",
                arguments: [lowercased]
            )
        else { return }
        let columns = try db.columns(in: name).map(\.name)
        let rewritten = sql.contains(call) ? renamed(sql, columns: columns) : guarded(sql, columns: columns)
        guard let rewritten else {
            throw StoreError(.database, "the definition of app table \(name) does not read; the database is damaged")
        }
        guard rewritten != sql else { return }
        let version = try Int64.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
        try db.execute(sql: "PRAGMA writable_schema = ON")
        do {
            try db.execute(
                sql: "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND lower(name) = ?",
                arguments: [rewritten, lowercased]
            )
            try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
        } catch {
            try? db.execute(sql: "PRAGMA writable_schema = OFF")
            throw error
        }
        try db.execute(sql: "PRAGMA writable_schema = OFF")
    }

    /// Where the parenthesis that closes the column list is: the first top-level parentheses,
    /// skipping quoted names, string literals and comments.
    static func closingParenthesis(of sql: String) -> String.Index? {
        let characters = Array(sql.utf8)
        var depth = 0
        var index = 0
        func skip(past terminator: UInt8, from start: Int) -> Int {
            var position = start
            while position < characters.count {
                if characters[position] == terminator {
                    // A doubled quote inside quotes is one quote character.
                    if terminator != UInt8(ascii: "]"), position + 1 < characters.count,
                        characters[position + 1] == terminator
                    {
                        position += 2
                        continue
                    }
                    return position + 1
                }
                position += 1
            }
            return position
        }
        while index < characters.count {
            let byte = characters[index]
            switch byte {
            case UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "`"):
                index = skip(past: byte, from: index + 1)
                continue
            case UInt8(ascii: "["):
                index = skip(past: UInt8(ascii: "]"), from: index + 1)
                continue
            case UInt8(ascii: "-") where index + 1 < characters.count && characters[index + 1] == UInt8(ascii: "-"):
                while index < characters.count, characters[index] != UInt8(ascii: "\n") { index += 1 }
                continue
            case UInt8(ascii: "/") where index + 1 < characters.count && characters[index + 1] == UInt8(ascii: "*"):
                index += 2
                while index + 1 < characters.count,
                    !(characters[index] == UInt8(ascii: "*") && characters[index + 1] == UInt8(ascii: "/"))
                {
                    index += 1
                }
                index += 2
                continue
            case UInt8(ascii: "("):
                depth += 1
            case UInt8(ascii: ")"):
                depth -= 1
                if depth == 0 { return sql.utf8.index(sql.utf8.startIndex, offsetBy: index) }
                if depth < 0 { return nil }
            default:
                break
            }
            index += 1
        }
        return nil
    }
}
