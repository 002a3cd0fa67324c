import Foundation
import LANSyncTestSupport
import Testing

/// App tables from the shell, between real agents on loopback: what a newcomer does with the
/// README — declare a schema on two machines, edit one row on both while apart, meet, see both.
@Suite(.serialized) struct AppTableCLITests {
    static let schema = """
        -- lansync: counter athletes.xp
        CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight_kg REAL, xp INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE sessions (id TEXT PRIMARY KEY, athlete_id TEXT REFERENCES athletes(id) ON DELETE CASCADE, notes TEXT);
        """

    func query(_ cli: CLI, _ sql: String, node: String) async throws -> [[String: Any]] {
        try await cli.ok(["query", sql, "--json"], node: node).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }

    /// Each argument of `exec` is one statement, all in one transaction; words of one statement
    /// given unquoted are refused whole with the advice to quote it.
    @Test func execTakesOneStatementPerArgument() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "a"])
        try await cli.ok(["schema", "apply", "-"], node: "a", stdin: Self.schema)
        try await cli.ok(
            [
                "exec", "INSERT INTO athletes (id, name) VALUES ('ana', 'Ana')",
                "UPDATE athletes SET name = 'Ana B.' WHERE id = 'ana'",
            ],
            node: "a"
        )
        #expect(try await query(cli, "SELECT name FROM athletes", node: "a").first?["name"] as? String == "Ana B.")
        let unquoted = try await cli.run(
            ["exec", "INSERT", "INTO", "athletes", "(id)", "VALUES", "('ben')"],
            node: "a"
        )
        #expect(unquoted.status != 0)
        #expect(unquoted.stderr.contains("quote each whole statement"), "\(unquoted.stderr)")
        #expect(
            try await query(cli, "SELECT count(*) AS n FROM athletes", node: "a").first?["n"] as? Int == 1,
            "nothing applied"
        )
    }

    /// `doctor` lists app-table rows whose parent is missing, with the fix.
    @Test func doctorListsOrphanRows() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "a"])
        try await cli.ok(["schema", "apply", "-"], node: "a", stdin: Self.schema)
        let clean = try await cli.run(["doctor"], node: "a")
        #expect(clean.stdout.contains("no orphan rows"), "\(clean.stdout)")
        try await cli.ok(["exec", "INSERT INTO sessions (id, athlete_id) VALUES ('s1', 'nobody')"], node: "a")
        let found = try await cli.run(["doctor"], node: "a")
        #expect(found.stdout.contains("1 orphan row: sessions (s1) lacks its athletes row"), "\(found.stdout)")
        #expect(found.stdout.contains("insert its parent again"))
    }

    @Test func editsOfOneRowOnTwoMachinesApartBothSurviveWhenTheyMeet() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        for node in ["a", "b"] { try await cli.ok(["schema", "apply", "-"], node: node, stdin: Self.schema) }
        try await cli.ok(["exec", "INSERT INTO athletes (id, name, weight_kg) VALUES ('ana', 'Ana', 60.0)"], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        var b: AgentProcess? = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        #expect(try await query(cli, "SELECT name FROM athletes", node: "b").first?["name"] as? String == "Ana")
        // A live write reaches the other side by itself.
        try await cli.ok(["exec", "UPDATE athletes SET xp = xp + 5 WHERE id = 'ana'"], node: "a")
        #expect(
            try await eventually {
                try await query(cli, "SELECT xp FROM athletes", node: "b").first?["xp"] as? Int == 5
            }
        )
        // Apart: a renames, b weighs and adds xp; then they meet.
        #expect(b?.stop() == 0)
        b = nil
        try await cli.ok(["exec", "UPDATE athletes SET name = 'Ana B.', xp = xp + 1 WHERE id = 'ana'"], node: "a")
        try await cli.ok(["exec", "UPDATE athletes SET weight_kg = 61.5, xp = xp + 10 WHERE id = 'ana'"], node: "b")
        b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        #expect(try await eventually { try await cli.digest("a") == cli.digest("b") })
        for node in ["a", "b"] {
            let row = try await query(cli, "SELECT name, weight_kg, xp FROM athletes", node: node).first
            #expect(row?["name"] as? String == "Ana B.")
            #expect(row?["weight_kg"] as? Double == 61.5)
            #expect(row?["xp"] as? Int == 16)
        }
        let tables = try await cli.status("b")["tables"] as? [[String: Any]]
        #expect(tables?.first { $0["name"] as? String == "athletes" }?["rows"] as? Int == 1)
        let why = try await cli.ok(["why", "athletes:ana"], node: "a")
        #expect(why.contains("exists") && why.contains("held by:  this node, b"), "\(why)")
        #expect(a.stop() == 0)
        #expect(b?.stop() == 0)
    }

    /// The outside tester's two faults: `exec "DELETE FROM entries"` said "ok: 3 rows changed" and
    /// lost the log for good; `exec "DELETE FROM meta"` killed the running agent and the replica.
    @Test func execCannotReachLANSyncsOwnTablesWhileTheAgentRuns() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        _ = try await cli.group(of: "a")
        try await cli.ok(["schema", "apply", "-"], node: "a", stdin: Self.schema)
        for index in 0..<3 { try await cli.ok(["log", "append", "taps", "{\"n\":\(index)}"], node: "a") }
        let agent = try await AgentProcess(cli, node: "a")
        let digest = try await cli.digest("a")
        for sql in ["DELETE FROM entries", "DELETE FROM meta", "DROP TABLE athletes", "PRAGMA writable_schema = 1"] {
            let refused = try await cli.run(["exec", sql], node: "a")
            #expect(refused.status == 1, "\(sql): \(refused.stdout)")
            #expect(
                refused.stderr.contains("nothing was applied") && refused.stderr.contains("athletes"),
                "\(refused.stderr)"
            )
            #expect(!refused.stdout.contains("ok:"))
        }
        let query = try await cli.run(["query", "SELECT * FROM meta"], node: "a")
        #expect(query.status == 1 && query.stderr.contains("LANSync's own table"), "\(query.stderr)")
        #expect(try await cli.ok(["log", "list", "taps"], node: "a").split(separator: "\n").count == 3)
        #expect(try await cli.digest("a") == digest)
        // The agent kept running, and its replica still works.
        #expect(agent.process.isRunning)
        try await cli.ok(["exec", "INSERT INTO athletes (id, name) VALUES ('ana', 'Ana')"], node: "a")
        #expect(try await cli.ok(["log", "append", "taps", "{\"n\":3}"], node: "a").isEmpty == false)
        #expect(agent.stop() == 0)
    }

    @Test func badInputIsRefusedWithWhatToDoAndNothingChanges() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        try await cli.ok(["schema", "apply", "-"], node: "a", stdin: Self.schema)
        let before = try await cli.digest("a")
        let refused = try await cli.run(
            ["schema", "apply", "-"],
            node: "a",
            stdin: "CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT);"
        )
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains("rowid") && refused.stderr.contains("Instead: use a key the app generates"),
            "\(refused.stderr)"
        )
        let dropped = try await cli.run(
            ["schema", "apply", "-"],
            node: "a",
            stdin: "CREATE TABLE athletes (id TEXT PRIMARY KEY);"
        )
        #expect(dropped.status == 1 && dropped.stderr.contains("missing now"), "\(dropped.stderr)")
        let badSQL = try await cli.run(
            ["exec", "INSERT INTO athletes (id) VALUES ('x'); INSERT INTO nowhere VALUES (1)"],
            node: "a"
        )
        #expect(
            badSQL.status == 1 && badSQL.stderr.contains("no such table: nowhere")
                && badSQL.stderr.contains("nothing was applied")
        )
        let ddl = try await cli.run(["exec", "DROP TABLE athletes"], node: "a")
        #expect(ddl.status == 1 && ddl.stderr.contains("schema apply"))
        let write = try await cli.run(["query", "DELETE FROM athletes"], node: "a")
        #expect(write.status == 1 && write.stderr.contains("lansync exec"))
        #expect(try await cli.digest("a") == before)
        #expect(try await query(cli, "SELECT count(*) AS n FROM athletes", node: "a").first?["n"] as? Int == 0)
        // Another program writing the file directly fails loudly instead of writing an unsynced row.
        let sqlite = try await CLI.shell(
            "sqlite3 \(cli.dataDir("a"))/replica.sqlite \"INSERT INTO athletes (id) VALUES ('x')\" 2>/dev/null"
        )
        #expect(sqlite != 0)
        #expect(try await cli.digest("a") == before)
    }

    @Test func exportAndImportCarryRowsAndCSVExportsOneTable() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        try await cli.device("b")
        try await cli.ok(["schema", "apply", "-"], node: "a", stdin: Self.schema)
        try await cli.ok(
            [
                "exec",
                "INSERT INTO athletes (id, name) VALUES ('a1', 'Ana, \"the\" rower'), ('b2', 'Ben'); DELETE FROM athletes WHERE id = 'b2'",
            ],
            node: "a"
        )
        let file = cli.root + "/export.jsonl"
        try await cli.ok(["export", "--out", file], node: "a")
        try await cli.ok(["import", file], node: "b")
        // b's app has not declared the table yet: the rows are held, then shown once it does.
        try await cli.ok(["schema", "apply", "-"], node: "b", stdin: Self.schema)
        #expect(try await cli.digest("a") == cli.digest("b"))
        #expect(try await query(cli, "SELECT id, name FROM athletes", node: "b").map { $0["id"] as? String } == ["a1"])
        let csv = try await cli.ok(["export", "--format", "csv", "--table", "athletes"], node: "b")
        #expect(csv == "id,name,weight_kg,xp\r\na1,\"Ana, \"\"the\"\" rower\",,0\r\n", "\(csv)")
    }
}
