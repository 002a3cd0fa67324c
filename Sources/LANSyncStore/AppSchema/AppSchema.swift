import Foundation
package import LANSyncCore

/// What an app declared: its tables, each mutable (merged column by column) or append-only (a
/// grow-only set of rows), their columns, counters and indexes. Built from schema text by
/// `AppSchemaReader`; a newer declaration is compared with the held one by `AppSchema.changes`.
package struct AppSchema: Hashable, Sendable {
    package struct Column: Hashable, Sendable {
        package let name: String
        /// The declared type as written ("TEXT", "REAL", "" when none).
        package let type: String
        package let notNull: Bool
        /// The default's SQL text, as SQLite reports it; nil when none.
        package let defaultSQL: String?
        /// Position in the primary key, from 1; 0 when not part of it.
        package let primaryKeyPosition: Int
        /// The value SQLite gives the column when an INSERT leaves it out, when that is the same
        /// on every device at every time: a literal default, or NULL for a nullable column with
        /// none. Nil for an expression (`CURRENT_TIMESTAMP`, a function) or a NOT NULL column
        /// without a default. An insert that opens a row's life does not write a column holding
        /// this value (`AppCatalog.Table.leftAtDefault`).
        package var constantDefault: SQLValue? = nil
    }

    /// A `REFERENCES` clause. Not enforced during merge (a child may arrive before its parent);
    /// a local delete of the parent applies `ON DELETE CASCADE` / `SET NULL` to the children
    /// this replica holds, and those writes sync like any other.
    package struct ForeignKey: Hashable, Sendable {
        package enum OnDelete: Hashable, Sendable { case nothing, cascade, setNull }
        package let columns: [String]
        package let parent: String
        /// The parent's columns; empty when the clause names none (the parent's primary key).
        package let parentColumns: [String]
        package let onDelete: OnDelete
    }

    /// How a one-way column merges.
    package enum Extreme: String, Hashable, Sendable { case max, min }

    package struct Table: Hashable, Sendable {
        package let name: String
        package let columns: [Column]
        package let appendOnly: Bool
        /// INTEGER columns whose value is the sum of every device's increments.
        package let counters: Set<String>
        /// INTEGER columns that only move one way: their value is the greatest (`max`) or
        /// smallest (`min`) value any device wrote in the row's life (`-- lansync: max|min`).
        package var extremes: [String: Extreme] = [:]
        package var foreignKeys: [ForeignKey] = []
        /// Whether a parent's delete takes rows of this table along (`ON DELETE CASCADE`).
        package var cascades: Bool { foreignKeys.contains { $0.onDelete == .cascade } }
        /// The `CREATE TABLE` statement as declared.
        package let sql: String

        package var primaryKey: [String] {
            columns.filter { $0.primaryKeyPosition > 0 }.sorted { $0.primaryKeyPosition < $1.primaryKeyPosition }.map(
                \.name
            )
        }

        package func column(_ name: String) -> Column? { columns.first { $0.name.lowercased() == name.lowercased() } }
    }

    package struct Index: Hashable, Sendable {
        package let name: String
        package let table: String
        package let sql: String
    }

    package var tables: [Table]
    package var indexes: [Index]
    /// The most columns an app table may have. Earlier versions captured writes with triggers that
    /// passed up to two values a column to a function (at most 127 arguments); the pre-update hook
    /// has no such bound, so this may be raised (the wire allows `RowChange.maxColumns`).
    package static let maxColumns = 60

    package init(tables: [Table] = [], indexes: [Index] = []) {
        self.tables = tables
        self.indexes = indexes
    }

    package func table(_ name: String) -> Table? { tables.first { $0.name.lowercased() == name.lowercased() } }

    /// What declaring `newer` over this schema adds. Throws, naming every problem, when `newer`
    /// takes anything away or changes what devices with the older declaration still write:
    /// a family's devices run different app versions, so a schema only grows.
    package func changes(to newer: AppSchema) throws(AppSchemaError) -> [AppSchemaChange] {
        var problems = [AppSchemaError.Problem]()
        var changes = [AppSchemaChange]()
        for old in tables {
            guard let new = newer.table(old.name) else {
                problems.append(
                    .init(
                        statement: old.sql,
                        reason:
                            "table \(old.name) was declared before and is missing now; dropping or renaming a table is "
                            + "not supported, because devices running the older app version still write it",
                        fix:
                            "keep its CREATE TABLE in the schema (an app may stop using a table; LANSync keeps syncing it)"
                    )
                )
                continue
            }
            if new.appendOnly != old.appendOnly {
                problems.append(
                    .init(
                        statement: new.sql,
                        reason:
                            "table \(old.name) was declared \(old.appendOnly ? "append-only" : "mutable") and is now "
                            + "\(new.appendOnly ? "append-only" : "mutable"); rows already written merge by the first rule",
                        fix: "keep the table as it was, and declare a new table for the new kind of rows"
                    )
                )
            }
            if new.primaryKey.map({ $0.lowercased() }) != old.primaryKey.map({ $0.lowercased() }) {
                problems.append(
                    .init(
                        statement: new.sql,
                        reason:
                            "the primary key of \(old.name) changed from (\(old.primaryKey.joined(separator: ", "))) to "
                            + "(\(new.primaryKey.joined(separator: ", "))); rows are matched across devices by it",
                        fix: "keep the primary key; declare a new table if the rows need another key"
                    )
                )
            }
            for column in old.columns {
                guard let now = new.column(column.name) else {
                    problems.append(
                        .init(
                            statement: new.sql,
                            reason:
                                "column \(old.name).\(column.name) was declared before and is missing now; dropping or "
                                + "renaming a column is not supported, because older app versions still write it",
                            fix: "keep the column (stop using it, or add a new one beside it)"
                        )
                    )
                    continue
                }
                if now.type.uppercased() != column.type.uppercased() {
                    problems.append(
                        .init(
                            statement: new.sql,
                            reason:
                                "column \(old.name).\(column.name) changed type from \(column.type.isEmpty ? "none" : column.type) "
                                + "to \(now.type.isEmpty ? "none" : now.type); devices with the older declaration still write the old type",
                            fix: "keep its type, and add a new column for values of the new type"
                        )
                    )
                }
                if old.counters.contains(column.name) != new.counters.contains(now.name) {
                    problems.append(
                        .init(
                            statement: new.sql,
                            reason:
                                "column \(old.name).\(column.name) \(old.counters.contains(column.name) ? "was" : "was not") "
                                + "a counter; changing that changes how values already written merge",
                            fix: "keep the `-- lansync: counter` line as it was, and add a new column instead"
                        )
                    )
                }
                if old.extremes[column.name] != new.extremes[now.name] {
                    let was =
                        old.extremes[column.name].map { "merged by \($0.rawValue)imum" } ?? "a last-writer-wins value"
                    let isNow =
                        new.extremes[now.name].map { "merges by \($0.rawValue)imum" } ?? "is a last-writer-wins value"
                    problems.append(
                        .init(
                            statement: new.sql,
                            reason:
                                "column \(old.name).\(column.name) \(was) and now \(isNow); changing that changes how values "
                                + "already written merge",
                            fix: "keep the `-- lansync: max` or `min` line as it was, and add a new column instead"
                        )
                    )
                }
            }
            for column in new.columns where old.column(column.name) == nil {
                if column.notNull && column.defaultSQL == nil {
                    problems.append(
                        .init(
                            statement: new.sql,
                            reason:
                                "new column \(new.name).\(column.name) is NOT NULL without a default; rows written by "
                                + "devices that do not know it yet would have no value",
                            fix: "give it a DEFAULT, or leave out NOT NULL"
                        )
                    )
                } else {
                    changes.append(.addColumn(table: new.name, column: column))
                }
            }
        }
        for table in newer.tables where self.table(table.name) == nil { changes.append(.addTable(table)) }
        for index in newer.indexes where !indexes.contains(where: { $0.name.lowercased() == index.name.lowercased() }) {
            changes.append(.addIndex(index))
        }
        for index in indexes where !newer.indexes.contains(where: { $0.name.lowercased() == index.name.lowercased() }) {
            problems.append(
                .init(
                    statement: index.sql,
                    reason: "index \(index.name) was declared before and is missing now; schemas only grow",
                    fix: "keep its CREATE INDEX in the schema"
                )
            )
        }
        if !problems.isEmpty { throw AppSchemaError(problems: problems) }
        return changes
    }
}

/// One thing a newer declaration adds.
package enum AppSchemaChange: Hashable, Sendable, CustomStringConvertible {
    case addTable(AppSchema.Table)
    case addColumn(table: String, column: AppSchema.Column)
    case addIndex(AppSchema.Index)

    package var description: String {
        switch self {
        case .addTable(let table):
            return
                "add \(table.appendOnly ? "append-only" : "mutable") table \(table.name) (\(table.columns.count) columns)"
        case .addColumn(let table, let column): return "add column \(table).\(column.name)"
        case .addIndex(let index): return "add index \(index.name) on \(index.table)"
        }
    }
}

/// Why a schema was refused: every problem found, each with the statement, the reason in words a
/// developer who knows SQLite understands, and what to do instead. Nothing was applied.
package struct AppSchemaError: Error, Equatable, Sendable, CustomStringConvertible {
    package struct Problem: Equatable, Sendable {
        /// The statement or directive line at fault, as written.
        package let statement: String
        package let reason: String
        package let fix: String
    }

    package let problems: [Problem]

    package var description: String {
        let count = problems.count == 1 ? "a problem" : "\(problems.count) problems"
        return "the schema has \(count); nothing was applied:\n"
            + problems.map { problem in
                let statement = problem.statement.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                    .joined(separator: " ")
                let shown = statement.count > 120 ? String(statement.prefix(117)) + "..." : statement
                return "- in `\(shown)`: \(problem.reason). Instead: \(problem.fix)."
            }.joined(separator: "\n")
    }
}
