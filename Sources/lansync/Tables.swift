import ArgumentParser
import Foundation
import GRDB
import LANSync
import LANSyncAgent

/// App tables from the shell: declare them (`schema`), write them (`exec`), read them (`query`).
struct SchemaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Declare the app's SQL tables, which LANSync then syncs column by column.",
        discussion: """
            A schema is a text of CREATE TABLE and CREATE INDEX statements plus directive lines:
              -- lansync: append-only TABLE        rows are only ever added (logs, metrics)
              -- lansync: counter TABLE.COLUMN     an INTEGER (or a REAL, in millionths) that sums every device's increments
              -- lansync: max TABLE.COLUMN         an INTEGER that only goes up: the greatest value any device wrote
              -- lansync: min TABLE.COLUMN         an INTEGER that only goes down: the smallest value any device wrote

            Each device's app declares its own schema; a newer app version may add tables, columns (nullable or with a DEFAULT) and indexes. Rows of tables or columns this device's schema does not declare yet are kept and passed on, and appear once it does. See `lansync help tables`.

            Examples:
              lansync schema apply app.sql
              lansync schema show
            """,
        subcommands: [Apply.self, Show.self]
    )

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply a schema file (`-` reads standard input).",
            discussion: """
                Applying the same schema again changes nothing. A schema that breaks a rule (an INTEGER PRIMARY KEY, a UNIQUE column, a dropped table or column, a changed type, …) is refused whole: each statement at fault is named with the reason and what to do instead, and nothing is changed.

                Example:
                  lansync schema apply docs/examples/rowing.sql
                """
        )

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The schema file, or - for standard input.") var file: String

        func run() async throws {
            let text: String
            if file == "-" {
                text = try await reportingErrors { () throws(LANSyncError) in
                    try StrictUTF8.decode(FileHandle.standardInput.readDataToEndOfFile(), "standard input")
                }
            } else {
                guard let data = FileManager.default.contents(atPath: file) else {
                    note("lansync: error: cannot read \(file); check the path")
                    throw ExitCode(1)
                }
                text = try await reportingErrors { () throws(LANSyncError) in try StrictUTF8.decode(data, file) }
            }
            let added = try await reportingErrors {
                let node = try global.openNode()
                return try node.applySchema(text)
            }
            let out = Output()
            if added.isEmpty {
                out.line("the schema is already applied; nothing changed")
            } else {
                for line in added { out.line(line) }
            }
            out.flush()
            await ControlClient.kick(global.dataDirectory)
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the schema this device's app declared, and every app table held with its row count.",
            discussion: """
                --json prints one object: schema (the text as applied, or null) and tables (name, declared, rows).

                Example:
                  lansync schema show
                """
        )

        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print one JSON object.") var json = false

        func run() async throws {
            let (schema, status) = try await reportingErrors {
                let node = try global.openNode()
                return (try node.appliedSchema(), try node.status())
            }
            let out = Output()
            if json {
                out.line(
                    [
                        ("schema", schema.map(ExportFile.quoted) ?? "null"),
                        ("tables", "[" + status.tables.map(StatusTables.json).joined(separator: ",") + "]"),
                    ].jsonObject
                )
                return
            }
            guard let schema else {
                out.line("no schema applied yet (`lansync schema apply FILE`)")
                for line in StatusTables.lines(status.tables) { out.line(line) }
                return
            }
            out.line(schema.trimmingCharacters(in: .whitespacesAndNewlines))
            out.line()
            for line in StatusTables.lines(status.tables) { out.line("-- " + line) }
        }
    }
}

struct Exec: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run SQL that writes app tables, in one durable transaction that syncs.",
        discussion: """
            INSERT, UPDATE, DELETE and INSERT … ON CONFLICT DO UPDATE on declared tables; several statements run in one transaction: if one fails, none is applied. Each changed column syncs as a last-writer-wins value; a deleted row stays deleted on every device unless inserted again; counters add up, max and min columns keep the best; a column an insert leaves at its default does not override another device's value. Tables are declared with `lansync schema apply`, not here.

            Examples:
              lansync exec "INSERT INTO athletes (id, name) VALUES ('8c5e…', 'Ana')"
              lansync exec "UPDATE athletes SET weight_kg = 61.5 WHERE id = '8c5e…'"
              lansync exec "INSERT INTO sets (id, session_id) VALUES ('s1', 'r1')" "UPDATE sessions SET sets = sets + 1 WHERE id = 'r1'"
              lansync exec --file changes.sql

            Each argument is one statement (quote each whole statement); a file or standard input may hold several, separated by `;`. A value too long for the command line (a large BLOB as x'…' hex) goes in a file.

            --seed writes seed data, such as the rows an app inserts on first launch on every device (INSERT OR IGNORE with fixed keys): any real write of a column beats a seed's value of it, whichever device wrote or merged first, so a device set up later does not undo an edit made elsewhere.
              lansync exec --seed "INSERT OR IGNORE INTO exercises (id, name) VALUES ('e-squat', 'Squat')"
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "SQL statements, one per argument (quote each); or use --file.") var sql: [String] = []
    @Option(help: "Read the SQL from this file (- for standard input).") var file: String?
    @Flag(help: "Write seed data, which any real edit beats on every device.") var seed = false

    func validate() throws {
        if sql.isEmpty && file == nil { throw ValidationError("give the SQL as arguments or with --file") }
        if !sql.isEmpty && file != nil {
            throw ValidationError("give the SQL either as arguments or with --file, not both")
        }
    }

    func run() async throws {
        // One statement per argument: joined with spaces, two statements without their own `;`
        // became one statement SQLite refused, or worse, one it read differently.
        var text = sql.joined(separator: ";\n")
        if let file {
            guard
                let data = file == "-"
                    ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: file)
            else {
                note("lansync: error: cannot read \(file); check the path")
                throw ExitCode(1)
            }
            text = try await reportingErrors { () throws(LANSyncError) in
                try StrictUTF8.decode(data, file == "-" ? "standard input" : file)
            }
        }
        let statement = text
        let several = sql.count > 1
        let node = try await reportingErrors { try global.openNode() }
        let changed = try await reportingErrors { () throws(LANSyncError) in
            do throws(LANSyncError) {
                return try await AppSQL.execute(statement, seed: seed, on: node)
            } catch  where several && error.code == .sql {
                // Words of one statement given unquoted arrive as several arguments.
                throw LANSyncError(
                    error.code,
                    error.message + " (each argument is one statement: quote each whole statement, or use --file)"
                )
            }
        }
        Output().line("ok: \(counted(changed, "row")) changed")
        await ControlClient.kick(global.dataDirectory)
    }
}

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a read-only SQL query on this replica and print the rows.",
        discussion: """
            Any SELECT: joins, aggregates, indexes. On a terminal the rows are lined up in columns; --json prints one JSON object per row (BLOBs as base64 strings); --csv prints a header and one line per row.

            Examples:
              lansync query "SELECT name, weight_kg FROM athletes ORDER BY name"
              lansync query "SELECT athlete_id, count(*) FROM rowing_sessions GROUP BY athlete_id" --csv
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The query.") var sql: String
    @Flag(help: "Print one JSON object per row.") var json = false
    @Flag(help: "Print CSV with a header line.") var csv = false

    func validate() throws {
        if json && csv { throw ValidationError("choose one of --json and --csv") }
    }

    func run() async throws {
        let (columns, rows) = try await reportingErrors {
            try AppSQL.query(sql, on: try global.openNode(), writeInstead: "`lansync exec`")
        }
        let out = Output()
        if json {
            for row in rows { out.line(zip(columns, row).map { ($0, AppSQL.json($1)) }.jsonObject) }
        } else if csv {
            out.write(columns.map(CSVExport.cell).joined(separator: ",") + "\r\n")
            for row in rows {
                out.write(row.map { CSVExport.cell($0.isNull ? "" : AppSQL.plain($0)) }.joined(separator: ",") + "\r\n")
            }
        } else {
            for line in aligned([columns] + rows.map { $0.map(AppSQL.plain) }) { out.line(line) }
            note(counted(rows.count, "row"))
        }
    }
}

/// App tables in `status` and `schema show`.
enum StatusTables {
    static func json(_ table: AppTableCount) -> String {
        [("name", ExportFile.quoted(table.name)), ("declared", "\(table.declared)"), ("rows", "\(table.rows)")]
            .jsonObject
    }

    static func lines(_ tables: [AppTableCount]) -> [String] {
        guard !tables.isEmpty else { return ["no app tables"] }
        return tables.map { table in
            "\(table.name): \(counted(table.rows, "row"))"
                + (table.declared ? "" : " (not declared here; kept and passed on)")
        }
    }

    /// One line for `status`: "athletes 3 rows, sessions 12 rows".
    static func summary(_ tables: [AppTableCount]) -> String {
        guard !tables.isEmpty else { return "none (`lansync schema apply FILE`)" }
        return tables.map { "\($0.name) \($0.rows)" + ($0.declared ? "" : " (undeclared)") }.joined(separator: ", ")
    }
}
