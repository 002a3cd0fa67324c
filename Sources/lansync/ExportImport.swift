import ArgumentParser
import Foundation
import GRDB
import LANSync
import LANSyncAgent

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export the replica as JSON Lines (everything, for backup or transfer) or CSV (for spreadsheets).",
        discussion: """
            JSON holds every field of every entry and preference (ids, origin device, HLC, ISO 8601 UTC times) and ends with a line of counts, so `lansync import` can bring it into another data directory with nothing lost and detect a truncated file.

            CSV has one row per entry and one column per payload field; name a stream with --stream to get that stream's fields only. With --table, CSV holds an app table's rows as your app sees them (BLOBs in base64, NULL as an empty cell).

            With --out the file appears only once it is complete; without it the export goes to standard output.

            Examples:
              lansync export --out backup.jsonl
              lansync export --format csv --stream symbol_taps --out taps.csv
              lansync export --format csv --table athletes --out athletes.csv
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable { case json, csv }

    @OptionGroup var global: GlobalOptions
    @Option(help: "json (all data, for import) or csv (entries, for spreadsheets).") var format: Format = .json
    @Option(help: "Only this stream (CSV only; a JSON export always holds everything).") var stream: String?
    @Option(help: "An app table's rows (CSV only).") var table: String?
    @Option(help: "Write to this file instead of standard output.") var out: String?

    func validate() throws {
        if let stream, let problem = Names.streamProblem(stream) { throw ValidationError(problem) }
        if stream != nil && format == .json {
            throw ValidationError("a JSON export holds the whole replica; use --format csv to export one stream")
        }
        if table != nil && format == .json {
            throw ValidationError("a JSON export holds the whole replica; use --format csv to export one table")
        }
        if table != nil && stream != nil { throw ValidationError("export either a stream or a table, not both") }
    }

    func run() async throws {
        let node = try await reportingErrors { try global.openNode() }
        let target = out.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let partial = target.map { $0 + ".partial" }
        let handle: FileHandle
        if let partial {
            guard
                FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]),
                let opened = FileHandle(forWritingAtPath: partial)
            else {
                note("lansync: error: cannot write \(target!); check the directory exists and is writable")
                throw ExitCode(1)
            }
            handle = opened
        } else {
            handle = .standardOutput
        }
        let output = Output(handle: handle)
        do {
            switch format {
            case .json:
                let status = try node.status()
                let progress = ProgressReporter(label: "export", unit: "entries")
                let counts = try ExportFile.write(
                    node,
                    to: { output.write($0) },
                    progress: { done in progress.update(done: done, total: status.entries) }
                )
                progress.finish()
                if target != nil {
                    note(
                        "exported \(counted(counts.entries, "entry", "entries")), \(counted(counts.preferences, "preference")) "
                            + "and \(counted(counts.rows, "app-table row"))"
                    )
                }
            case .csv:
                if let table {
                    let count = try Self.writeTable(table, of: node, to: output)
                    if target != nil { note("exported \(counted(count, "row"))") }
                } else {
                    let count = try CSVExport.write(node, stream: stream, to: { output.write($0) })
                    if target != nil { note("exported \(counted(count, "entry", "entries"))") }
                }
            }
            output.flush()
            if let partial, let target {
                try handle.synchronize()
                try handle.close()
                if FileManager.default.fileExists(atPath: target) { try FileManager.default.removeItem(atPath: target) }
                try FileManager.default.moveItem(atPath: partial, toPath: target)
            }
        } catch {
            if let partial { try? FileManager.default.removeItem(atPath: partial) }
            note("lansync: error: export failed, nothing was written: \(error)")
            throw ExitCode(1)
        }
    }
}

extension Export {
    /// An app table's rows as CSV, in primary-key order, as the app's SQL sees them.
    static func writeTable(_ table: String, of node: LANSyncNode, to output: Output) throws -> Int {
        guard let declared = try node.appliedSchemaTables().first(where: { $0.lowercased() == table.lowercased() })
        else {
            throw LANSyncError(
                .invalidInput,
                "no app table \(table) is declared here; `lansync schema show` lists them"
            )
        }
        return try node.read { db in
            let primaryKey = try db.primaryKey(declared).columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
            let statement = try db.makeStatement(
                sql: "SELECT * FROM \(declared.quotedDatabaseIdentifier) ORDER BY \(primaryKey)"
            )
            output.write(statement.columnNames.map(CSVExport.cell).joined(separator: ",") + "\r\n")
            var count = 0
            let rows = try Row.fetchCursor(statement)
            while let row = try rows.next() {
                output.write(
                    row.databaseValues.map { CSVExport.cell($0.isNull ? "" : AppSQL.plain($0)) }.joined(separator: ",")
                        + "\r\n"
                )
                count += 1
            }
            return count
        }
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge an export (from `lansync export`) into this replica.",
        discussion: """
            Importing is a merge: entries already held are kept once, each preference keeps its latest write, and app-table rows merge column by column. The whole file is checked and applied in one transaction: a damaged or truncated file is reported with its line number and nothing is imported.

            Example:
              lansync export --data-dir ~/old --out backup.jsonl
              lansync import backup.jsonl
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The export file.") var file: String

    func run() async throws {
        let node = try await reportingErrors { try global.openNode() }
        let report: ImportFile.Report
        do {
            let progress = ProgressReporter(label: "import", unit: "entries")
            defer { progress.finish() }
            report = try ImportFile.run(file, into: node) { read, fraction in
                progress.update(done: read, total: nil, fraction: fraction)
            }
        } catch {
            // One transaction: whatever failed, nothing of the file is in the replica.
            note(
                "lansync: error: \(error.message)\nlansync: nothing of \(file) was imported; run the import again once the problem is fixed"
            )
            throw ExitCode(1)
        }
        let outcome = report.outcome
        await ControlClient.kick(global.dataDirectory)
        Output().line(
            "imported \(counted(outcome.entriesAdded, "new entry", "new entries")) and "
                + "\(counted(outcome.preferencesChanged, "preference change")) and "
                + "\(counted(outcome.rowsChanged, "app-table row change")) (the file held "
                + "\(counted(report.entriesRead, "entry", "entries")), \(counted(report.preferencesRead, "preference")) "
                + "and \(counted(report.rowsRead, "app-table row")))"
        )
    }
}
