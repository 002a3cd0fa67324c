import Foundation
import GRDB
import LANSyncCore
import Testing

@testable import LANSyncStore

/// A row's stored state names the values its app's row holds instead of keeping them again
/// (`StoredRowState.rowValueTag`), and still reads back exactly as merged: the digest recomputed
/// from the stored states equals the running one after every kind of write, and a value the
/// table holds in another form (SQLite's affinity), or a row the table does not show, keeps its
/// values in the state.
@Suite struct RowValuesInStatesTests {
    /// A column of every affinity, a `NOT NULL` column with a default, and a CHECK that a peer's
    /// value can break.
    static let schema = """
        CREATE TABLE things (
            id TEXT PRIMARY KEY,
            label TEXT,
            count INTEGER,
            weight REAL,
            amount NUMERIC,
            raw,
            photo BLOB,
            mood TEXT NOT NULL DEFAULT 'calm',
            size INTEGER CHECK (size IS NULL OR size < 100)
        );
        """

    static func store(_ number: UInt8) throws -> ReplicaStore {
        let store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!)
        _ = try store.applySchema(schema)
        return store
    }

    /// Values of every type, some of which an affinity converts ('5' in an INTEGER column, 7 in
    /// a REAL one), -0.0, text with two spellings of "é" and an embedded NUL.
    static let values: [DatabaseValue] = [
        DatabaseValue.null, 5.databaseValue, "5".databaseValue, 7.databaseValue, 2.5.databaseValue,
        (-0.0).databaseValue, "e\u{301}\u{0}x".databaseValue, "\u{e9}".databaseValue,
        Data([0, 1, 2]).databaseValue, "".databaseValue,
    ]

    /// How many cells of the table's stored states name their row's value, and how many keep it.
    static func cells(_ store: ReplicaStore) throws -> (named: Int, kept: Int) {
        try store.readInternals { db in
            let (columns, replicas) = (try ColumnNumbering.load(db).names, try ReplicaStore.replicaNumbers(db))
            var (named, kept) = (0, 0)
            for state in try Data.fetchAll(db, sql: "SELECT state FROM app_rows") {
                var namedHere = 0
                let decoded = try StoredRowState.decode(state, columns: columns, replicas: replicas) { _ in
                    namedHere += 1
                    return .null
                }
                named += namedHere
                kept += decoded.columns.count - namedHere
            }
            return (named, kept)
        }
    }

    /// The running digest is the one the stored states make, read with their rows.
    static func expectStatesReadBack(_ store: ReplicaStore, _ comment: Comment) throws {
        #expect(try store.recomputeDigest() == store.status().digest, comment)
    }

    static func sync(_ from: ReplicaStore, to: ReplicaStore) async throws {
        while true {
            let delta = try from.delta(since: try to.versionVector(), maxRows: 7)
            if delta.isEmpty { return }
            _ = try await to.merge(delta)
        }
    }

    @Test func localWritesOfEveryKindNameTheirRowsValuesAndReadBack() async throws {
        let a = try Self.store(1)
        // The fast path: many rows in one statement, every value in every column.
        let columns = ["label", "count", "weight", "amount", "raw", "photo"]
        var rows = [String]()
        var arguments = StatementArguments()
        for (index, value) in Self.values.enumerated() {
            rows.append("(?, " + columns.map { _ in "?" }.joined(separator: ", ") + ")")
            arguments += ["bulk\(index)"]
            for _ in columns { arguments += [value] }
        }
        let (sql, bound) = (
            "INSERT INTO things (id, \(columns.joined(separator: ", "))) VALUES \(rows.joined(separator: ", "))",
            arguments
        )
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: sql, arguments: bound)
        }
        try Self.expectStatesReadBack(a, "after a bulk insert")
        let afterBulk = try Self.cells(a)
        #expect(afterBulk.kept == 0, "an app's insert leaves its row holding every value it wrote")
        // Every value but the NULLs, which an insert leaves out at their column's default.
        #expect(afterBulk.named == (Self.values.count - 1) * columns.count)

        // One write of several statements on one row: the state is read after all of them ran.
        _ = try await a.write(now: 2_000) { db in
            try db.execute(sql: "INSERT INTO things (id, label, count, size) VALUES ('one', 'first', 1, 10)")
            try db.execute(sql: "UPDATE things SET label = 'second' WHERE id = 'one'")
            try db.execute(sql: "UPDATE things SET count = count + 1, weight = 3 WHERE id = 'one'")
            try db.execute(sql: "UPDATE things SET label = label || '!' WHERE id = 'bulk1'")
            try db.execute(sql: "DELETE FROM things WHERE id = 'bulk2'")
            try db.execute(sql: "INSERT OR REPLACE INTO things (id, label) VALUES ('bulk3', 'replaced')")
            try db.execute(sql: "UPDATE things SET id = 'moved' WHERE id = 'bulk4'")
            try db.execute(sql: "INSERT INTO things (id, label) VALUES ('gone', 'briefly')")
            try db.execute(sql: "UPDATE things SET raw = x'ff' WHERE id = 'gone'")
            try db.execute(sql: "DELETE FROM things WHERE id = 'gone'")
        }
        try Self.expectStatesReadBack(a, "after a write of many statements")
        _ = try await a.write(now: 3_000) { db in
            try db.execute(sql: "INSERT INTO things (id, label) VALUES ('bulk2', 'again')")
            try db.execute(sql: "UPDATE things SET mood = 'glad', photo = NULL")
        }
        try Self.expectStatesReadBack(a, "after a re-insert and an update of every row")

        // A peer that takes it all by deltas ends with the same state.
        let b = try Self.store(2)
        try await Self.sync(a, to: b)
        try Self.expectStatesReadBack(b, "on the peer")
        #expect(try b.status().digest == a.status().digest)
        #expect(try Self.cells(b).named > 0, "the peer's merged rows name their values too")
    }

    /// "é" as one code point or as "e" and a combining accent: one Swift string, two SQLite values.
    /// Keys spelled both ways are two rows on every device, and an edit that only respells a
    /// value is a change: the writer's state, its digest and the peer all follow the bytes.
    @Test func aRespelledTextIsAnotherValue() async throws {
        let (composed, decomposed) = ("caf\u{e9}", "cafe\u{301}")
        let a = try Self.store(1)
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO things (id, label) VALUES (?, ?)", arguments: [composed, composed])
            try db.execute(sql: "INSERT INTO things (id, label) VALUES (?, 'other')", arguments: [decomposed])
        }
        let before = try a.versionVector()
        _ = try await a.write(now: 2_000) { db in
            try db.execute(sql: "UPDATE things SET label = ? WHERE id = ?", arguments: [decomposed, composed])
        }
        #expect(try a.versionVector() != before, "the respelling is a change of its own")
        try Self.expectStatesReadBack(a, "after the respelling")

        let b = try Self.store(2)
        try await Self.sync(a, to: b)
        let rows = "SELECT hex(id) || ' ' || hex(label) FROM things ORDER BY 1"
        let held = try b.read { db in try String.fetchAll(db, sql: rows) }
        #expect(held.count == 2, "two keys, two rows")
        #expect(held == (try a.read { db in try String.fetchAll(db, sql: rows) }))
        #expect(try b.status().digest == a.status().digest)
        try Self.expectStatesReadBack(b, "on the peer")
    }

    /// A peer's value the table holds in another form, a NULL its `NOT NULL` column shows as the
    /// default, a row its CHECK refuses: the state keeps those values, and reads back as merged.
    @Test func valuesTheTableHoldsOtherwiseStayInTheState() async throws {
        let a = try Self.store(1)
        let b = try Self.store(2)
        func change(_ id: String, counter: UInt64, _ values: [(String, SQLValue)]) -> RowChange {
            RowChange(
                key: RowKey(table: "things", primaryKey: [.text(id)]),
                kind: .insert,
                causalLength: 1,
                hlc: HybridTimestamp(physicalMilliseconds: 5_000 + counter, logical: 0),
                dot: Dot(replica: a.replica, counter: counter),
                values: values.sorted { $0.0 < $1.0 }.map { .init(column: $0.0, value: $0.1) }
            )
        }
        // Written by hand, as another app version's peer could send them.
        let changes = [
            change("text-in-integer", counter: 1, [("count", .text("5")), ("label", .text("kept"))]),
            change("integer-in-real", counter: 2, [("weight", .integer(7)), ("label", .integer(3))]),
            change("negative-zero", counter: 3, [("weight", .real(-0.0)), ("raw", .real(-0.0))]),
            change("null-for-default", counter: 4, [("mood", .null), ("label", .null)]),
            change("refused", counter: 5, [("size", .integer(500)), ("label", .text("too big"))]),
            change("real-in-numeric", counter: 6, [("amount", .real(2.0)), ("photo", .blob([9]))]),
        ]
        let delta = Delta(rows: changes, coverage: [.init(replica: a.replica, from: 0, through: UInt64(changes.count))])
        _ = try await b.merge(delta)
        try Self.expectStatesReadBack(b, "after merging values the table holds otherwise")
        let held = try #require(try b.row(RowKey(table: "things", primaryKey: [.text("text-in-integer")])))
        #expect(held.value(of: "count") == .text("5"), "the state keeps the value merged")
        let shown = try b.read { db in
            try Row.fetchOne(db, sql: "SELECT count FROM things WHERE id = 'text-in-integer'")
        }
        #expect(shown?[0] == 5, "the table holds it as an INTEGER")
        #expect(
            try b.row(RowKey(table: "things", primaryKey: [.text("refused")]))?.value(of: "label") == .text("too big")
        )
        #expect(try b.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM things WHERE id = 'refused'") } == 0)
        #expect(try Self.cells(b).kept > 0)

        // An edit that makes the refused row acceptable shows it, and a local edit of a merged row
        // reads the values its row held before.
        _ = try await b.write(now: 9_000) { db in
            try db.execute(sql: "UPDATE things SET label = 'edited', count = 6 WHERE id = 'text-in-integer'")
            try db.execute(sql: "DELETE FROM things WHERE id = 'negative-zero'")
        }
        try Self.expectStatesReadBack(b, "after local edits of merged rows")
        let fix = RowChange(
            key: RowKey(table: "things", primaryKey: [.text("refused")]),
            kind: .update,
            causalLength: 1,
            hlc: HybridTimestamp(physicalMilliseconds: 6_000, logical: 0),
            dot: Dot(replica: a.replica, counter: 7),
            values: [.init(column: "size", value: .integer(50))]
        )
        _ = try await b.merge(Delta(rows: [fix], coverage: [.init(replica: a.replica, from: 6, through: 7)]))
        try Self.expectStatesReadBack(b, "after a change shows a refused row")
        #expect(
            try b.read { db in try String.fetchOne(db, sql: "SELECT label FROM things WHERE id = 'refused'") }
                == "too big"
        )
    }
}
