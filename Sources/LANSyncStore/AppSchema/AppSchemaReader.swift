import Foundation
import GRDB
import LANSyncCore

/// Reads schema text — `CREATE TABLE` and `CREATE INDEX` statements plus directive lines
/// (`-- lansync: append-only TABLE`, `-- lansync: counter TABLE.COLUMN`) — into an `AppSchema`,
/// refusing what the app-table contract refuses (docs/app-tables.md), every problem at once.
///
/// SQLite itself parses: the statements run in a scratch in-memory database, and the tables are
/// read back with `PRAGMA table_xinfo` and `index_list`, so whatever SQLite accepts is understood
/// exactly as SQLite will store it. Only CHECK constraints are looked at in the text.
package enum AppSchemaReader {
    package static func read(_ text: String) throws(AppSchemaError) -> AppSchema {
        var problems = [AppSchemaError.Problem]()
        let directives = readDirectives(text, problems: &problems)
        var tables = [AppSchema.Table]()
        var indexes = [AppSchema.Index]()
        do {
            let scratch = try DatabaseQueue()
            try scratch.inDatabase { db in
                let statements = try db.allStatements(sql: text)
                while let statement = try statements.next() {
                    let sql = withoutLeadingComments(statement.sql)
                    let words = sql.uppercased().split(whereSeparator: { $0.isWhitespace || $0 == "(" }).prefix(4).map(
                        String.init
                    )
                    if words.first == "CREATE",
                        words.dropFirst().first == "TEMP" || words.dropFirst().first == "TEMPORARY"
                    {
                        problems.append(
                            .init(
                                statement: sql,
                                reason: "a temporary table is not stored, so it cannot sync",
                                fix: "leave out TEMP"
                            )
                        )
                    } else if words.starts(with: ["CREATE", "TABLE"]) {
                        let before = Set(
                            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
                        )
                        try statement.execute()
                        let created = try String.fetchAll(
                            db,
                            sql: "SELECT name FROM sqlite_master WHERE type = 'table'"
                        )
                        .filter { !before.contains($0) }
                        for name in created {
                            if let table = try readTable(
                                db,
                                name: name,
                                sql: sql,
                                directives: directives,
                                problems: &problems
                            ) {
                                tables.append(table)
                            }
                        }
                    } else if words.starts(with: ["CREATE", "INDEX"])
                        || words.starts(with: ["CREATE", "UNIQUE", "INDEX"])
                    {
                        if words.contains("UNIQUE") {
                            problems.append(
                                .init(
                                    statement: sql,
                                    reason:
                                        "a UNIQUE index would reject rows written on another device, and merged rows cannot "
                                        + "be refused after the fact",
                                    fix: "use a plain CREATE INDEX; only the primary key is unique across devices"
                                )
                            )
                            continue
                        }
                        let before = Set(
                            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index'")
                        )
                        try statement.execute()
                        let created = try Row.fetchAll(
                            db,
                            sql: "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'"
                        )
                        .filter { !before.contains($0[0] as String) }
                        for row in created { indexes.append(.init(name: row[0], table: row[1], sql: sql)) }
                    } else {
                        problems.append(
                            .init(
                                statement: sql,
                                reason:
                                    "a schema holds only CREATE TABLE and CREATE INDEX statements (and `-- lansync:` lines)",
                                fix: "run data changes with `lansync exec`, and keep views and triggers in the app"
                            )
                        )
                    }
                }
            }
        } catch let error as DatabaseError {
            problems.append(
                .init(
                    statement: error.sql ?? "(the schema)",
                    reason: "SQLite could not read it: \(error.message ?? "\(error)")",
                    fix: "fix the statement; `sqlite3 :memory: < FILE` shows the same error"
                )
            )
        } catch {
            problems.append(.init(statement: "(the schema)", reason: "\(error)", fix: "check the file"))
        }
        for name in directives.appendOnly.keys
        where !tables.contains(where: { $0.name.lowercased() == name.lowercased() }) {
            problems.append(
                .init(
                    statement: directives.appendOnly[name]!,
                    reason: "there is no table \(name) in the schema",
                    fix: "name a table the schema creates"
                )
            )
        }
        for (column, line) in directives.counters.map({ ($0.key, $0.value) })
            + directives.extremes.map({ ($0.key, $0.value.line) })
        {
            let parts = column.split(separator: ".", maxSplits: 1).map(String.init)
            if !tables.contains(where: { $0.name.lowercased() == parts[0].lowercased() }) {
                problems.append(
                    .init(
                        statement: line,
                        reason: "there is no table \(parts[0]) in the schema",
                        fix: "name a table the schema creates"
                    )
                )
            }
        }
        if !problems.isEmpty { throw AppSchemaError(problems: problems) }
        return AppSchema(tables: tables, indexes: indexes)
    }

    /// The statement without the comment lines before it (directives sit there).
    static func withoutLeadingComments(_ sql: String) -> String {
        var lines = sql.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        while let first = lines.first, first.isEmpty || first.hasPrefix("--") { lines.removeFirst() }
        return lines.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct Directives {
        /// Table name → the directive line.
        var appendOnly: [String: String] = [:]
        /// "table.column" → the directive line.
        var counters: [String: String] = [:]
        /// "table.column" → how it merges, and the directive line.
        var extremes: [String: (kind: AppSchema.Extreme, line: String)] = [:]
    }

    static func readDirectives(_ text: String, problems: inout [AppSchemaError.Problem]) -> Directives {
        var directives = Directives()
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            guard line.hasPrefix("--") else { continue }
            let comment = line.dropFirst(2).trimmingCharacters(in: .whitespaces)
            guard comment.lowercased().hasPrefix("lansync:") else { continue }
            let words = comment.dropFirst("lansync:".count).split(separator: " ").map(String.init)
            switch (words.first?.lowercased(), words.count) {
            case ("append-only", 2):
                directives.appendOnly[words[1]] = line
            case ("counter", 2) where words[1].split(separator: ".").count == 2:
                if directives.extremes[words[1].lowercased()] != nil {
                    problems.append(
                        .init(
                            statement: line,
                            reason: "\(words[1]) already has a `-- lansync:` merge line",
                            fix: "keep one"
                        )
                    )
                }
                directives.counters[words[1].lowercased()] = line
            case ("max", 2) where words[1].split(separator: ".").count == 2,
                ("min", 2) where words[1].split(separator: ".").count == 2:
                let qualified = words[1].lowercased()
                if directives.counters[qualified] != nil || directives.extremes[qualified] != nil {
                    problems.append(
                        .init(
                            statement: line,
                            reason: "\(words[1]) already has a `-- lansync:` merge line",
                            fix: "keep one"
                        )
                    )
                }
                directives.extremes[qualified] = (words[0].lowercased() == "max" ? .max : .min, line)
            default:
                problems.append(
                    .init(
                        statement: line,
                        reason: "this `-- lansync:` line is not one LANSync knows",
                        fix:
                            "write `-- lansync: append-only TABLE`, `-- lansync: counter TABLE.COLUMN`, `-- lansync: max TABLE.COLUMN` "
                            + "or `-- lansync: min TABLE.COLUMN`"
                    )
                )
            }
        }
        return directives
    }

    /// Sets each column's `constantDefault`: what SQLite stores when an INSERT leaves it out,
    /// when that is a literal (a number, a string, a blob, NULL, TRUE or FALSE), read back from
    /// one probe row of a table with the same types and defaults (so affinity applies as it
    /// will); NULL for a nullable column with no default; nil otherwise.
    static func setConstantDefaults(_ columns: inout [AppSchema.Column], _ db: Database) throws {
        var probed = [Int]()
        for (index, column) in columns.enumerated() {
            if let sql = column.defaultSQL {
                if sql.wholeMatch(of: literalDefault) != nil { probed.append(index) }
            } else if !column.notNull {
                columns[index].constantDefault = .null
            }
        }
        guard !probed.isEmpty else { return }
        let probe = "temp.lansync_default_probe"
        let definitions = probed.map { "c\($0) \(columns[$0].type) DEFAULT \(columns[$0].defaultSQL!)" }
        try db.execute(sql: "CREATE TABLE \(probe) (\(definitions.joined(separator: ", ")))")
        defer { try? db.execute(sql: "DROP TABLE \(probe)") }
        try db.execute(sql: "INSERT INTO \(probe) DEFAULT VALUES")
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(probe)") else { return }
        for (position, index) in probed.enumerated() {
            columns[index].constantDefault = SQLValue(row[position] as DatabaseValue)
        }
    }

    /// A default SQLite reports as a literal (optionally in parentheses, a number optionally signed).
    nonisolated(unsafe) static let literalDefault =
        /(?i)\(?\s*([-+]?\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)(e[-+]?[0-9]+)?|0x[0-9a-f]+|'([^']|'')*'|x'[0-9a-f]*'|null|true|false)\s*\)?/

    private static func readTable(
        _ db: Database,
        name: String,
        sql: String,
        directives: Directives,
        problems: inout [AppSchemaError.Problem]
    ) throws -> AppSchema.Table? {
        let lowered = name.lowercased()
        if lowered.hasPrefix("lansync_") || lowered.hasPrefix("sqlite_") {
            problems.append(
                .init(
                    statement: sql,
                    reason: "table names starting with lansync_ or sqlite_ are reserved",
                    fix: "rename the table"
                )
            )
            return nil
        }
        var columns = [AppSchema.Column]()
        for row in try Row.fetchAll(db, sql: "PRAGMA table_xinfo(\(name.quotedDatabaseIdentifier))") {
            let hidden: Int = row["hidden"]
            let column = AppSchema.Column(
                name: row["name"],
                type: row["type"],
                notNull: row["notnull"],
                defaultSQL: row["dflt_value"],
                primaryKeyPosition: row["pk"]
            )
            if hidden == 2 || hidden == 3 {
                problems.append(
                    .init(
                        statement: sql,
                        reason:
                            "column \(name).\(column.name) is generated: it is computed on each device, not stored and synced",
                        fix: "compute it in a query or a view"
                    )
                )
                continue
            }
            columns.append(column)
        }
        try setConstantDefaults(&columns, db)
        if columns.count > AppSchema.maxColumns {
            problems.append(
                .init(
                    statement: sql,
                    reason:
                        "table \(name) has \(columns.count) columns; LANSync syncs tables of at most \(AppSchema.maxColumns) columns",
                    fix: "split the table in two, sharing the primary key"
                )
            )
        }
        let primaryKey = columns.filter { $0.primaryKeyPosition > 0 }
        if primaryKey.isEmpty {
            problems.append(
                .init(
                    statement: sql,
                    reason: "table \(name) has no primary key; rows are matched across devices by it",
                    fix: "add a key the app generates, e.g. `id TEXT PRIMARY KEY` holding a UUID"
                )
            )
        } else if primaryKey.count == 1, primaryKey[0].type.uppercased() == "INTEGER",
            !sql.uppercased().contains("WITHOUT ROWID")
        {
            problems.append(
                .init(
                    statement: sql,
                    reason:
                        "`\(primaryKey[0].name) INTEGER PRIMARY KEY` is SQLite's rowid, numbered on each device, so two devices "
                        + "would give different rows the same id",
                    fix: "use a key the app generates: `\(primaryKey[0].name) TEXT PRIMARY KEY` holding a UUID"
                )
            )
        }
        if sql.uppercased().contains("AUTOINCREMENT") {
            problems.append(
                .init(
                    statement: sql,
                    reason: "AUTOINCREMENT numbers rows on each device, so ids collide across devices",
                    fix: "use a UUID text key"
                )
            )
        }
        for index in try Row.fetchAll(db, sql: "PRAGMA index_list(\(name.quotedDatabaseIdentifier))")
        where (index["origin"] as String) == "u" {
            problems.append(
                .init(
                    statement: sql,
                    reason:
                        "table \(name) has a UNIQUE constraint besides its primary key; a row merged from another device "
                        + "cannot be refused after the fact",
                    fix: "drop the UNIQUE (check uniqueness in the app, or make that column the primary key)"
                )
            )
        }
        let appendOnly = directives.appendOnly.keys.contains { $0.lowercased() == lowered }
        // An append-only row is never updated: every device holds it as its writer wrote it,
        // and that row passed its CHECKs, so a CHECK may span its columns.
        for check in checkExpressions(sql) where !appendOnly {
            let used = Set(columns.map(\.name).filter { mentions(check, $0) })
            if used.count > 1 {
                problems.append(
                    .init(
                        statement: sql,
                        reason:
                            "CHECK (\(check)) spans columns \(used.sorted().joined(separator: ", ")), which two devices may "
                            + "write separately; the merged row could break it",
                        fix:
                            "check each column on its own, check the combination in the app, or make the table append-only "
                            + "(its rows never change)"
                    )
                )
            }
        }
        var counters = Set<String>()
        var extremes = [String: AppSchema.Extreme]()
        let merged =
            directives.counters.map { ($0.key, $0.value, AppSchema.Extreme?.none) }
            + directives.extremes.map { ($0.key, $0.value.line, Optional($0.value.kind)) }
        for (qualified, line, extreme) in merged where qualified.hasPrefix(lowered + ".") {
            let columnName = String(qualified.dropFirst(lowered.count + 1))
            guard let column = columns.first(where: { $0.name.lowercased() == columnName }) else {
                problems.append(
                    .init(
                        statement: line,
                        reason: "table \(name) has no column \(columnName)",
                        fix: "name one of its columns"
                    )
                )
                continue
            }
            let what = extreme.map { "\($0.rawValue) column" } ?? "counter"
            // A counter may also be REAL: its totals are whole millionths (`AppCatalog.realCounterScale`).
            let realCounter = extreme == nil && AppCatalog.Table.hasRealAffinity(column.type)
            if column.type.uppercased() != "INTEGER" && !realCounter {
                problems.append(
                    .init(
                        statement: line,
                        reason: "\(what) \(name).\(column.name) is \(column.type.isEmpty ? "untyped" : column.type)",
                        fix: extreme == nil
                            ? "declare it INTEGER, or REAL for fractions (counted in millionths)"
                            : "declare it INTEGER (a time or a score as a whole number: milliseconds, points)"
                    )
                )
            } else if column.primaryKeyPosition > 0 {
                problems.append(
                    .init(
                        statement: line,
                        reason: "\(name).\(column.name) is part of the primary key",
                        fix: extreme == nil ? "count in another column" : "keep the best value in another column"
                    )
                )
            } else if appendOnly {
                problems.append(
                    .init(
                        statement: line,
                        reason: "\(name) is append-only: its rows are never updated, so nothing can be "
                            + (extreme == nil ? "counted" : "kept as the \(extreme!.rawValue)imum"),
                        fix: extreme == nil
                            ? "make the table mutable, or append one row per increment"
                            : "make the table mutable, or query max()/min() over the appended rows"
                    )
                )
            } else if let extreme {
                extremes[column.name] = extreme
            } else {
                counters.insert(column.name)
            }
        }
        var foreignKeys = [Int: (columns: [String], parent: String, parentColumns: [String], onDelete: String)]()
        for row in try Row.fetchAll(db, sql: "PRAGMA foreign_key_list(\(name.quotedDatabaseIdentifier))") {
            let id: Int = row["id"]
            var key = foreignKeys[id] ?? ([], row["table"], [], row["on_delete"])
            key.columns.append(row["from"])
            if let to = row["to"] as String? { key.parentColumns.append(to) }
            foreignKeys[id] = key
        }
        var references = [AppSchema.ForeignKey]()
        for (_, key) in foreignKeys.sorted(by: { $0.key < $1.key }) {
            let onDelete: AppSchema.ForeignKey.OnDelete
            switch key.onDelete.uppercased() {
            case "CASCADE": onDelete = .cascade
            case "SET NULL": onDelete = .setNull
            case "NO ACTION", "RESTRICT", "": onDelete = .nothing
            default:
                problems.append(
                    .init(
                        statement: sql,
                        reason: "ON DELETE \(key.onDelete) of \(name) is not supported",
                        fix: "use ON DELETE CASCADE or SET NULL, or leave it out"
                    )
                )
                continue
            }
            if appendOnly && onDelete == .setNull {
                problems.append(
                    .init(
                        statement: sql,
                        reason: "\(name) is append-only, so its rows are never changed, and ON DELETE SET NULL "
                            + "from \(key.parent) cannot apply",
                        fix:
                            "use ON DELETE CASCADE (its rows go with their parent, on every device), or leave the ON DELETE clause out "
                            + "(they stay when the parent goes, and LANSync lists them as orphans)"
                    )
                )
                continue
            }
            references.append(
                .init(columns: key.columns, parent: key.parent, parentColumns: key.parentColumns, onDelete: onDelete)
            )
        }
        var table = AppSchema.Table(name: name, columns: columns, appendOnly: appendOnly, counters: counters, sql: sql)
        table.extremes = extremes
        table.foreignKeys = references
        return table
    }

    /// The expressions inside every CHECK ( … ) of a statement.
    static func checkExpressions(_ sql: String) -> [String] {
        var found = [String]()
        let characters = Array(sql)
        let upper = Array(sql.uppercased())
        var index = 0
        while index + 5 <= characters.count {
            if String(upper[index..<index + 5]) == "CHECK",
                index == 0
                    || !(characters[index - 1].isLetter || characters[index - 1].isNumber
                        || characters[index - 1] == "_")
            {
                var cursor = index + 5
                while cursor < characters.count, characters[cursor].isWhitespace { cursor += 1 }
                if cursor < characters.count, characters[cursor] == "(" {
                    var depth = 0
                    let start = cursor + 1
                    while cursor < characters.count {
                        if characters[cursor] == "(" { depth += 1 }
                        if characters[cursor] == ")" {
                            depth -= 1
                            if depth == 0 { break }
                        }
                        cursor += 1
                    }
                    found.append(String(characters[start..<min(cursor, characters.count)]))
                    index = cursor
                }
            }
            index += 1
        }
        return found
    }

    /// Whether `expression` names `column` as a whole identifier (quoted or not).
    static func mentions(_ expression: String, _ column: String) -> Bool {
        let identifiers = expression.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
        return identifiers.contains { $0.lowercased() == column.lowercased() }
    }
}
