import Foundation
import Testing

@testable import LANSyncStore

/// Declaring app tables (DESIGN.md, "App tables"): what a schema may say, what it may not (each
/// refusal names the statement, says why and what to do instead), and how a newer schema may grow.
@Suite struct AppSchemaTests {
    static func read(_ text: String) throws -> AppSchema { try AppSchemaReader.read(text) }

    /// The first reason given for refusing `text`.
    static func refusal(_ text: String) -> AppSchemaError? {
        do {
            _ = try AppSchemaReader.read(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func aSchemaDeclaresMutableAndAppendOnlyTablesCountersAndIndexes() throws {
        let schema = try Self.read(
            """
            CREATE TABLE profiles (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', xp INTEGER NOT NULL DEFAULT 0);
            -- lansync: counter profiles.xp
            -- lansync: append-only taps
            CREATE TABLE taps (id TEXT PRIMARY KEY, profile_id TEXT REFERENCES profiles(id), at INTEGER);
            CREATE INDEX taps_by_profile ON taps(profile_id, at);
            """
        )
        #expect(schema.tables.map(\.name) == ["profiles", "taps"])
        #expect(schema.table("profiles")?.appendOnly == false)
        #expect(schema.table("profiles")?.counters == ["xp"])
        #expect(schema.table("taps")?.appendOnly == true)
        // A CHECK over several columns is fine where rows never change.
        let sessions = try Self.read(
            """
            -- lansync: append-only game_sessions
            CREATE TABLE game_sessions (id TEXT PRIMARY KEY, started INTEGER NOT NULL, ended INTEGER NOT NULL,
                CHECK (ended >= started AND ended - started <= 86400000));
            """
        )
        #expect(sessions.table("game_sessions")?.appendOnly == true)
        #expect(schema.table("taps")?.primaryKey == ["id"])
        #expect(schema.indexes.map(\.name) == ["taps_by_profile"])
        #expect(schema.table("profiles")?.column("name")?.defaultSQL == "''")
    }

    @Test func compositeKeysAndWithoutRowidIntegerKeysAreFine() throws {
        let schema = try Self.read(
            """
            CREATE TABLE set_muscles (set_id TEXT, muscle TEXT, PRIMARY KEY (set_id, muscle));
            CREATE TABLE levels (level INTEGER PRIMARY KEY, title TEXT) WITHOUT ROWID;
            """
        )
        #expect(schema.table("set_muscles")?.primaryKey == ["set_id", "muscle"])
        #expect(schema.table("levels")?.primaryKey == ["level"])
    }

    @Test(arguments: [
        ("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);", "rowid"),
        ("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);", "AUTOINCREMENT"),
        ("CREATE TABLE t (v TEXT);", "no primary key"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY, email TEXT UNIQUE);", "UNIQUE"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY, a INTEGER, b INTEGER, CHECK (a < b));", "spans columns"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY, v TEXT); CREATE UNIQUE INDEX t_v ON t(v);", "UNIQUE index"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY); INSERT INTO t VALUES ('x');", "only CREATE TABLE and CREATE INDEX"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY); DROP TABLE t;", "only CREATE TABLE and CREATE INDEX"),
        ("CREATE TEMP TABLE t (id TEXT PRIMARY KEY);", "temporary"),
        ("CREATE TABLE lansync_t (id TEXT PRIMARY KEY);", "reserved"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY, v TEXT GENERATED ALWAYS AS (id || 'x'));", "generated"),
        (
            "-- lansync: append-only t\nCREATE TABLE p (id TEXT PRIMARY KEY);\nCREATE TABLE t (id TEXT PRIMARY KEY, p TEXT REFERENCES p(id) ON DELETE SET NULL);",
            "cannot apply"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, " + (1...60).map { "c\($0) TEXT" }.joined(separator: ", ") + ");",
            "at most 60 columns"
        ),
        ("CREATE TABLE t (id TEXT PRIMARY KEY, xp TEXT);\n-- lansync: counter t.xp", "declare it INTEGER"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY);\n-- lansync: counter t.xp", "no column xp"),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER);\n-- lansync: append-only t\n-- lansync: counter t.n",
            "append-only"
        ),
        ("CREATE TABLE t (id TEXT PRIMARY KEY);\n-- lansync: append-only other", "no table other"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY);\n-- lansync: mutable t", "not one LANSync knows"),
        ("CREATE TABLE t (id TEXT PRIMARY KEY, v TEXT", "SQLite could not read it"),
    ])
    func refusedWithTheReasonAndWhatToDoInstead(schema: String, reason: String) {
        guard let error = Self.refusal(schema) else {
            Issue.record("accepted: \(schema)")
            return
        }
        #expect(error.description.contains(reason), "\(error)")
        #expect(error.description.contains("Instead:"))
        #expect(error.description.contains("nothing was applied"))
    }

    @Test func everyProblemIsListedAtOnce() {
        let error = Self.refusal(
            """
            CREATE TABLE a (id INTEGER PRIMARY KEY);
            CREATE TABLE b (v TEXT);
            -- lansync: sometimes b
            """
        )
        #expect(error?.problems.count == 3)
    }

    @Test func theSameSchemaAgainChangesNothing() throws {
        let text = try String(contentsOf: Self.example("rowing"), encoding: .utf8)
        let schema = try Self.read(text)
        #expect(try schema.changes(to: Self.read(text)).isEmpty)
        #expect(try AppSchema().changes(to: schema).count == 3 + 2)
    }

    @Test func aNewerSchemaMayAddTablesNullableOrDefaultedColumnsAndIndexes() throws {
        let old = try Self.read("CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT);")
        let new = try Self.read(
            """
            CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT, weight REAL, active INTEGER NOT NULL DEFAULT 1);
            CREATE TABLE u (id TEXT PRIMARY KEY);
            CREATE INDEX t_by_name ON t(name);
            """
        )
        let changes = try old.changes(to: new).map(\.description)
        #expect(
            changes == [
                "add column t.weight", "add column t.active", "add mutable table u (1 columns)",
                "add index t_by_name on t",
            ]
        )
    }

    @Test(arguments: [
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT);", "CREATE TABLE t (id TEXT PRIMARY KEY);",
            "dropping or renaming a column"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT);", "CREATE TABLE u (id TEXT PRIMARY KEY);",
            "dropping or renaming a table"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, n TEXT);", "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER);",
            "changed type"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY);", "CREATE TABLE t (id TEXT PRIMARY KEY, n TEXT NOT NULL);",
            "NOT NULL without a default"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY);", "CREATE TABLE t (id TEXT PRIMARY KEY);\n-- lansync: append-only t",
            "append-only"
        ),
        (
            "CREATE TABLE t (a TEXT, b TEXT, PRIMARY KEY (a, b));", "CREATE TABLE t (a TEXT PRIMARY KEY, b TEXT);",
            "primary key"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER);",
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER);\n-- lansync: counter t.n", "counter"
        ),
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY); CREATE INDEX i ON t(id);", "CREATE TABLE t (id TEXT PRIMARY KEY);",
            "index i"
        ),
    ])
    func aNewerSchemaMayNotTakeAwayOrChange(old: String, new: String, reason: String) throws {
        let before = try Self.read(old)
        let after = try Self.read(new)
        do {
            _ = try before.changes(to: after)
            Issue.record("accepted: \(old) → \(new)")
        } catch {
            #expect(error.description.contains(reason), "\(error)")
        }
    }

    static func example(_ name: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("docs/examples/\(name).sql")
    }

    /// Every example schema of the seed apps is accepted as it stands.
    @Test func theExampleSchemasAreAccepted() throws {
        let examples = try FileManager.default.contentsOfDirectory(
            atPath: Self.example("x").deletingLastPathComponent().path
        ).filter { $0.hasSuffix(".sql") }
        #expect(!examples.isEmpty)
        for file in examples {
            let schema = try Self.read(try String(contentsOf: Self.example(String(file.dropLast(4))), encoding: .utf8))
            #expect(!schema.tables.isEmpty, "\(file)")
        }
        let rowing = try Self.read(try String(contentsOf: Self.example("rowing"), encoding: .utf8))
        #expect(rowing.table("performance_metrics")?.appendOnly == true)
        #expect(rowing.table("rowing_sessions")?.appendOnly == false)
    }
}
