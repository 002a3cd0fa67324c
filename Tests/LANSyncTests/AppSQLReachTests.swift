import Foundation
import GRDB
import LANSync
import Testing

/// An app's SQL reaches its declared tables and nothing else (issue: `lansync exec "DELETE FROM
/// entries"` emptied a node's log for good, and `DELETE FROM meta` killed the agent). SQLite refuses
/// the rest as it compiles each statement, whatever the SQL's text looks like.
@Suite struct AppSQLReachTests {
    static let schema = "CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT);"

    /// Statements that reach past the app's tables, each in a write that also inserts a row first.
    static let refusedWrites: [(sql: String, says: String)] = [
        ("DELETE FROM entries", "entries (LANSync's own table"),
        ("DELETE FROM meta", "meta (LANSync's own table"),
        ("UPDATE app_rows SET state = x''", "app_rows (LANSync's own table"),
        (
            "INSERT INTO athletes (id, name) SELECT id, payload FROM entries",
            "entries (LANSync's own table, not an app table) cannot be read"
        ),
        // SQLite itself refuses this one before asking the guard.
        ("UPDATE sqlite_master SET sql = 'x' WHERE name = 'athletes'", "table sqlite_master may not be modified"),
        ("DELETE FROM sqlite_master WHERE name = 'athletes'", "table sqlite_master may not be modified"),
        ("ATTACH '/tmp/lansync-attached.sqlite' AS other", "ATTACH and DETACH"),
        ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode changes how the replica works"),
        ("PRAGMA writable_schema = 1", "PRAGMA writable_schema"),
        ("CREATE TEMP TRIGGER wipe AFTER INSERT ON athletes BEGIN DELETE FROM entries; END", "changes the schema"),
        ("CREATE TEMP VIEW everything AS SELECT * FROM entries", "changes the schema"),
        ("CREATE TABLE other (id TEXT PRIMARY KEY)", "changes the schema"),
        ("DROP TABLE athletes", "changes the schema"),
        ("ALTER TABLE athletes ADD COLUMN age INTEGER", "changes the schema"),
        ("COMMIT", "transaction control"),
        ("ROLLBACK", "transaction control"),
        ("SAVEPOINT mine", "transaction control"),
    ]

    @Test(arguments: refusedWrites.indices)
    func aWriteThatReachesPastTheAppsTablesIsRefusedWholeAndSaysWhatMayBeReached(_ index: Int) async throws {
        let (sql, says) = Self.refusedWrites[index]
        let temporary = try TemporaryNode()
        let node = temporary.node
        try node.applySchema(Self.schema)
        _ = try await node.append(to: "taps", payload: "{\"n\":1}")
        let before = try node.status()
        await #expect {
            try await node.write { db in
                try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('a1', 'Ana')")
                try db.execute(sql: sql)
            }
        } throws: { error in
            let message = (error as? LANSyncError)?.message ?? ""
            let bySQLite = says.hasPrefix("table sqlite_master")
            return (error as? LANSyncError)?.code == (bySQLite ? .sql : .invalidInput) && message.contains(says)
                && (bySQLite || message.contains("reaches the app's declared tables (athletes) and nothing else"))
        }
        // Nothing of that write stays; LANSync's own state is whole.
        #expect(try node.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM athletes") } == 0)
        let after = try node.status()
        #expect(after.entries == before.entries && after.digest == before.digest)
        #expect(try node.entries().count == 1)
        #expect(try node.store.recomputeDigest() == after.digest)
        // And the node still writes.
        try await node.write { db in try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('a2', 'Ben')") }
        #expect(try node.read { db in try String.fetchOne(db, sql: "SELECT name FROM athletes") } == "Ben")
    }

    @Test func readsReachTheAppsTablesAndTheirSchemaButNotLANSyncsOwnTables() async throws {
        let temporary = try TemporaryNode()
        let node = temporary.node
        try node.applySchema(Self.schema)
        _ = try await node.append(to: "taps", payload: "{\"n\":1}")
        try await node.write { db in try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('a1', 'Ana')") }
        // What an app (and GRDB's records) needs to read its tables works.
        #expect(try node.read { db in try db.columns(in: "athletes").map(\.name) } == ["id", "name"])
        #expect(try node.read { db in try db.primaryKey("athletes").columns } == ["id"])
        #expect(
            try node.read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE name = 'athletes'")
            } == ["athletes"]
        )
        #expect(try node.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") } != nil)
        for sql in [
            "SELECT * FROM entries", "SELECT count(*) FROM meta", "SELECT a.name FROM athletes a JOIN app_rows r ON 1",
        ] {
            #expect(throws: LANSyncError.self, "\(sql)") {
                try node.read { db in try Row.fetchAll(db, sql: sql) }
            }
        }
        #expect {
            try node.read { db in try Row.fetchAll(db, sql: "SELECT * FROM entries") }
        } throws: { error in
            (error as? LANSyncError)?.message.contains(
                "entries (LANSync's own table, not an app table) cannot be read here"
            ) == true
        }
        // LANSync itself still reads its tables (the guard is off outside the app's SQL).
        #expect(try node.entries().count == 1)
    }
}
