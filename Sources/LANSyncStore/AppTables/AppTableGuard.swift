import GRDB

/// The CHECK constraint LANSync adds to every declared app table, `CHECK (lansync_guard())`: only
/// LANSync's connections have that function (see `AppWriteCapture`), so another program's INSERT
/// fails to compile ("unknown function: lansync_guard()") instead of writing a row no peer would
/// hear of. A CHECK costs nothing measurable per row, where a BEFORE INSERT trigger cost about
/// half of a plain insert. (UPDATE and DELETE are guarded by triggers: see
/// `AppTriggers`.) The constraint is the table's last; `schema show` prints the app's schema as
/// the app wrote it, without it.
enum AppTableGuard {
    /// The call the constraint makes; a table's stored statement holds it once guarded.
    static let function = "lansync_guard()"
    static let constraint = "CHECK (\(function))"

    static func isGuarded(_ sql: String) -> Bool { sql.contains(function) }

    /// `sql`, a `CREATE TABLE` statement, with the guard added after its last column or
    /// constraint; nil when its column list cannot be found.
    static func guarded(_ sql: String) -> String? {
        guard let close = closingParenthesis(of: sql) else { return nil }
        return String(sql[..<close]) + ", " + constraint + String(sql[close...])
    }

    /// Adds the guard to a table an earlier version created without it, in the way SQLite's
    /// documentation gives for schema changes that leave the stored rows as they are (every row
    /// meets a constraint that is always true): the stored statement is rewritten and the schema
    /// version moved on. Runs inside the caller's transaction.
    static func install(onTable name: String, _ db: Database) throws {
        let lowercased = name.lowercased()
        guard
            let sql = try String.fetchOne(
                db,
                sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND lower(name) = ?",
                arguments: [lowercased]
            ),
            !isGuarded(sql)
        else { return }
        guard let guarded = guarded(sql) else {
            throw StoreError(.database, "the definition of app table \(name) does not read; the database is damaged")
        }
        let version = try Int64.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
        try db.execute(sql: "PRAGMA writable_schema = ON")
        do {
            try db.execute(
                sql: "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND lower(name) = ?",
                arguments: [guarded, lowercased]
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
