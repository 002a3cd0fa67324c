import Foundation
import GRDB
import LANSyncCore
import PropertyBased
import Testing

@testable import LANSyncStore

/// App tables in the store: declared with SQL, written with plain SQL, synced by deltas, merged
/// column by column, and shown in the app's own tables.
@Suite struct AppTableStoreTests {
    static let schema = """
        CREATE TABLE athletes (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            weight_kg REAL,
            photo BLOB,
            xp INTEGER NOT NULL DEFAULT 0
        );
        -- lansync: counter athletes.xp
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            athlete_id TEXT REFERENCES athletes(id) ON DELETE CASCADE,
            notes TEXT
        );
        -- lansync: append-only metrics
        CREATE TABLE metrics (id TEXT PRIMARY KEY, session_id TEXT REFERENCES sessions(id), watts REAL NOT NULL);
        """

    static func store(_ number: UInt8 = 1) throws -> ReplicaStore {
        let store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!)
        _ = try store.applySchema(schema)
        return store
    }

    /// Ships everything `to` lacks from `from`, in small batches as sync does.
    static func sync(_ from: ReplicaStore, to: ReplicaStore, maxRows: Int = 3) async throws {
        while true {
            let delta = try from.delta(since: try to.versionVector(), maxRows: maxRows)
            if delta.isEmpty { return }
            _ = try await to.merge(delta)
        }
    }

    static func rows(_ store: ReplicaStore, _ sql: String) throws -> [[String: DatabaseValue]] {
        try store.read { db in
            try Row.fetchAll(db, sql: sql).map { row in
                Dictionary(uniqueKeysWithValues: row.columnNames.map { ($0, row[$0] as DatabaseValue) })
            }
        }
    }

    @Test func applyingTheSameSchemaTwiceChangesNothing() throws {
        let store = try Self.store()
        #expect(try store.applySchema(Self.schema).isEmpty)
        let added = try store.applySchema(Self.schema + "\nCREATE INDEX athletes_by_name ON athletes(name);")
        #expect(added.map(\.description) == ["add index athletes_by_name on athletes"])
        #expect(try store.appliedSchema()?.schema.tables.count == 3)
    }

    @Test func aRefusedSchemaChangesNothing() throws {
        let store = try Self.store()
        let before = try Self.rows(store, "SELECT name FROM sqlite_master ORDER BY name")
        #expect(throws: StoreError.self) {
            try store.applySchema(
                Self.schema + "\nCREATE TABLE later (id TEXT PRIMARY KEY);\nCREATE TABLE bad (n INTEGER PRIMARY KEY);"
            )
        }
        #expect(try Self.rows(store, "SELECT name FROM sqlite_master ORDER BY name") == before)
        #expect(throws: StoreError.self) { try store.applySchema("CREATE TABLE entries (id TEXT PRIMARY KEY);") }
    }

    @Test func twoDevicesEditDifferentColumnsOfOneRowAndBothEditsSurvive() async throws {
        let (a, b) = (try Self.store(1), try Self.store(2))
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name, weight_kg) VALUES ('ana', 'Ana', 60.0)")
        }
        try await Self.sync(a, to: b)
        _ = try await a.write(now: 2_000) { db in
            try db.execute(sql: "UPDATE athletes SET name = 'Ana B.' WHERE id = 'ana'")
        }
        _ = try await b.write(now: 2_001) { db in
            try db.execute(sql: "UPDATE athletes SET weight_kg = 61.5 WHERE id = 'ana'")
        }
        try await Self.sync(a, to: b)
        try await Self.sync(b, to: a)
        for store in [a, b] {
            let row = try Self.rows(store, "SELECT name, weight_kg FROM athletes")
            #expect(row == [["name": "Ana B.".databaseValue, "weight_kg": 61.5.databaseValue]])
        }
        #expect(try a.status().digest == b.status().digest)
        #expect(try a.recomputeDigest() == a.status().digest)
        #expect(try b.recomputeDigest() == b.status().digest)
    }

    /// A NULL from a device whose app declares the column nullable shows, on a device whose app
    /// declares it `NOT NULL` with a default, as that default; the row stays. (`INSERT OR
    /// REPLACE` gives it: a merge that writes rows another way must name such a column's value
    /// as `coalesce(?, default)`; see docs/app-table-storage.md.)
    @Test func aMergedNullInANotNullColumnWithADefaultShowsTheDefault() async throws {
        let a = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!)
        _ = try a.applySchema("CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT, weight_kg REAL);")
        let b = try Self.store(2)
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name, weight_kg) VALUES ('ana', 'Ana', 60.0)")
        }
        try await Self.sync(a, to: b)
        _ = try await a.write(now: 2_000) { db in
            try db.execute(sql: "UPDATE athletes SET name = NULL, weight_kg = 61.0 WHERE id = 'ana'")
        }
        try await Self.sync(a, to: b)
        #expect(
            try Self.rows(b, "SELECT name, weight_kg FROM athletes") == [
                ["name": "".databaseValue, "weight_kg": 61.0.databaseValue]
            ]
        )
        #expect(try a.status().digest == b.status().digest)
    }

    /// A peer's edit of a row this replica holds is written in place: the row keeps its rowid,
    /// which the storage design's rowid-keyed states rely on (docs/app-table-storage.md).
    @Test func aMergedEditOfAHeldRowKeepsItsRowid() async throws {
        let (a, b) = (try Self.store(1), try Self.store(2))
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('ana', 'Ana'), ('ben', 'Ben'), ('cy', 'Cy')")
        }
        try await Self.sync(a, to: b)
        func rowids(_ store: ReplicaStore) throws -> [String: Int64] {
            try store.read { db in
                Dictionary(
                    uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, rowid FROM athletes").map {
                        (String.fromDatabaseValue($0["id"])!, Int64.fromDatabaseValue($0["rowid"])!)
                    }
                )
            }
        }
        let before = try rowids(b)
        _ = try await a.write(now: 2_000) { db in
            try db.execute(sql: "UPDATE athletes SET name = 'Ana L.', weight_kg = 61.5 WHERE id = 'ana'")
            try db.execute(sql: "UPDATE athletes SET xp = xp + 3 WHERE id = 'ben'")
        }
        try await Self.sync(a, to: b)
        #expect(try rowids(b) == before)
        let shown = try b.read { db in
            try String.fetchAll(
                db,
                sql: "SELECT id || '|' || name || '|' || ifnull(weight_kg, '-') || '|' || xp FROM athletes ORDER BY id"
            )
        }
        #expect(shown == ["ana|Ana L.|61.5|0", "ben|Ben|-|3", "cy|Cy|-|0"])
        #expect(try a.status().digest == b.status().digest)
    }

    @Test func aDeleteBeatsAConcurrentEditAndCascadesToChildrenHeldLocally() async throws {
        let (a, b) = (try Self.store(1), try Self.store(2))
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('ana', 'Ana')")
            try db.execute(sql: "INSERT INTO sessions (id, athlete_id) VALUES ('s1', 'ana')")
        }
        try await Self.sync(a, to: b)
        _ = try await a.write(now: 2_000) { db in try db.execute(sql: "DELETE FROM athletes WHERE id = 'ana'") }
        #expect(try Self.rows(a, "SELECT id FROM sessions").isEmpty)
        // Concurrently, b edits the session (later by the clock) and adds one.
        _ = try await b.write(now: 3_000) { db in
            try db.execute(sql: "UPDATE sessions SET notes = 'edited' WHERE id = 's1'")
            try db.execute(sql: "INSERT INTO sessions (id, athlete_id) VALUES ('s2', 'ana')")
        }
        try await Self.sync(a, to: b)
        try await Self.sync(b, to: a)
        for store in [a, b] {
            #expect(try Self.rows(store, "SELECT id FROM athletes").isEmpty)
            // s1's delete beat the edit; s2, inserted concurrently elsewhere, survives as an orphan.
            #expect(try Self.rows(store, "SELECT id FROM sessions") == [["id": "s2".databaseValue]])
        }
        #expect(try a.status().digest == b.status().digest)
        #expect(try a.status().tables.first { $0.name == "sessions" }?.rows == 1)
    }

    @Test func aReinsertAfterADeleteRevivesTheRowWithItsColumns() async throws {
        let (a, b) = (try Self.store(1), try Self.store(2))
        _ = try await a.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name, weight_kg) VALUES ('ana', 'Ana', 60.0)")
        }
        _ = try await a.write(now: 2_000) { db in try db.execute(sql: "DELETE FROM athletes WHERE id = 'ana'") }
        _ = try await a.write(now: 3_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name) VALUES ('ana', 'Back')")
        }
        try await Self.sync(a, to: b)
        #expect(
            try Self.rows(b, "SELECT name, weight_kg FROM athletes") == [
                ["name": "Back".databaseValue, "weight_kg": .null]
            ]
        )
        #expect(try b.row(RowKey(table: "athletes", primaryKey: [.text("ana")]))?.causalLength == 3)
    }

    @Test func countersAddEveryDevicesIncrements() async throws {
        let stores = try (1...3).map { try Self.store(UInt8($0)) }
        _ = try await stores[0].write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id) VALUES ('ana')")
        }
        for store in stores.dropFirst() { try await Self.sync(stores[0], to: store) }
        for (index, store) in stores.enumerated() {
            _ = try await store.write(now: 2_000 + UInt64(index)) { db in
                try db.execute(sql: "UPDATE athletes SET xp = xp + 5 WHERE id = 'ana'")
            }
        }
        for from in stores { for to in stores where to.replica != from.replica { try await Self.sync(from, to: to) } }
        for store in stores { #expect(try Self.rows(store, "SELECT xp FROM athletes") == [["xp": 15.databaseValue]]) }
    }

    @Test func appendOnlyTablesRefuseUpdatesAndDeletes() async throws {
        let store = try Self.store()
        _ = try await store.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO metrics VALUES ('m1', 's1', 250.5)")
        }
        for sql in ["UPDATE metrics SET watts = 1", "DELETE FROM metrics"] {
            await #expect {
                try await store.write(now: 2_000) { db in try db.execute(sql: sql) }
            } throws: { error in
                (error as? StoreError)?.message.contains("append-only") == true
            }
        }
        #expect(try Self.rows(store, "SELECT watts FROM metrics") == [["watts": 250.5.databaseValue]])
    }

    @Test func aFailedWriteLeavesNothingAndOthersInTheSameCommitStay() async throws {
        let store = try Self.store()
        async let good: Void = store.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id) VALUES ('a')")
        }
        async let bad: Result<Void, StoreError> = {
            do {
                return .success(
                    try await store.write(now: 1_000) { db in
                        try db.execute(sql: "INSERT INTO athletes (id) VALUES ('b')")
                        try db.execute(sql: "INSERT INTO nowhere VALUES (1)")
                    }
                )
            } catch {
                return .failure(error as! StoreError)
            }
        }()
        try await good
        let failed = await bad
        #expect(throws: StoreError.self) { try failed.get() }
        #expect(try Self.rows(store, "SELECT id FROM athletes") == [["id": "a".databaseValue]])
        #expect(try store.status().tables.first { $0.name == "athletes" }?.rows == 1)
        #expect(try store.recomputeDigest() == store.status().digest)
    }

    @Test func writesOutsideLANSyncFail() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        _ = try store.applySchema(Self.schema)
        _ = try await store.write(now: 1_000) {
            try $0.execute(
                sql: "INSERT INTO athletes (id, name) VALUES ('a', 'Ada'); INSERT INTO metrics VALUES ('m', 's', 1)"
            )
        }
        let digest = try store.status().digest
        // Another program opening the file: no guard function, so every kind of write fails, and reading works.
        let other = try DatabaseQueue(path: path)
        for sql in [
            "INSERT INTO athletes (id) VALUES ('x')", "UPDATE athletes SET name = 'Bea'", "DELETE FROM athletes",
            "INSERT INTO metrics VALUES ('n', 's', 2)", "UPDATE metrics SET watts = 3", "DELETE FROM metrics",
        ] {
            #expect(throws: DatabaseError.self, "\(sql)") { try other.write { try $0.execute(sql: sql) } }
        }
        #expect(try await other.read { try String.fetchAll($0, sql: "SELECT name FROM athletes") } == ["Ada"])
        // LANSync's own connection, outside a write: refused too.
        for sql in [
            "INSERT INTO athletes (id) VALUES ('x')", "UPDATE athletes SET name = 'Bea'", "DELETE FROM athletes",
        ] {
            #expect(throws: (any Error).self, "\(sql)") {
                try (store.reader as! any DatabaseWriter).write { try $0.execute(sql: sql) }
            }
        }
        #expect(
            try Self.rows(store, "SELECT id, name FROM athletes") == [
                ["id": "a".databaseValue, "name": "Ada".databaseValue]
            ]
        )
        #expect(try store.status().digest == digest)
        #expect(try store.integrityProblems().isEmpty)
    }

    /// A database an earlier version made captured writes with triggers on each app table; opening
    /// it moves the table to the hook and its guards, keeping its rows, and writes sync as before.
    @Test func tablesOfAnEarlierVersionAreUpgradedWhenOpened() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        try await Self.replicaWithAda(at: path)
        // Made as the earlier version left it: no CHECK, a capture trigger calling a function this version lacks.
        let old = try DatabaseQueue(path: path)
        try await old.write { db in
            try Self.rewriteAthletes(db) { Self.withoutGuard($0) }
            try db.execute(sql: "DROP TRIGGER lansync_athletes_guard_delete")
            try db.execute(
                sql:
                    "CREATE TRIGGER lansync_athletes_insert AFTER INSERT ON athletes BEGIN SELECT lansync_capture(1, 1, NEW.id); END"
            )
        }
        try old.close()
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        let triggers = try store.read {
            try String.fetchAll(
                $0,
                sql: "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'athletes' ORDER BY name"
            )
        }
        #expect(triggers == ["lansync_athletes_guard_delete", "lansync_sessions_on_delete_0"])
        #expect(
            try store.read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_master WHERE name = 'athletes'") }?
                .contains(", " + Self.athletesGuard) == true
        )
        _ = try await store.write(now: 2_000) {
            try $0.execute(sql: "UPDATE athletes SET name = 'Ada L.' WHERE id = 'a'")
        }
        #expect(try Self.rows(store, "SELECT name FROM athletes") == [["name": "Ada L.".databaseValue]])
        #expect(try store.status().tables.first { $0.name == "athletes" }?.rows == 1)
        #expect(try store.recomputeDigest() == store.status().digest)
        #expect(try store.integrityProblems().isEmpty)
        #expect(throws: DatabaseError.self) {
            try DatabaseQueue(path: path).write { try $0.execute(sql: "INSERT INTO athletes (id) VALUES ('x')") }
        }
    }

    /// A replica at `path` with `schema` applied and one athlete written, closed again.
    static func replicaWithAda(at path: String) async throws {
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        _ = try store.applySchema(schema)
        _ = try await store.write(now: 1_000) {
            try $0.execute(sql: "INSERT INTO athletes (id, name) VALUES ('a', 'Ada')")
        }
    }

    /// Rewrites the stored `CREATE TABLE athletes` as an earlier version would have left it.
    static func rewriteAthletes(_ db: Database, _ transform: (String) -> String) throws {
        let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'athletes'")!
        let version = try Int.fetchOne(db, sql: "PRAGMA schema_version")!
        try db.execute(sql: "PRAGMA writable_schema = ON")
        try db.execute(sql: "UPDATE sqlite_master SET sql = ? WHERE name = 'athletes'", arguments: [transform(sql)])
        try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
        try db.execute(sql: "PRAGMA writable_schema = OFF")
    }

    /// The guard of `athletes` in `schema`: a CHECK naming each of its columns.
    static let athletesGuard = "CHECK (lansync_guard(\"id\", \"name\", \"weight_kg\", \"photo\", \"xp\"))"

    /// `sql` without the guard LANSync added, in any of its forms: the table as the app declared it.
    static func withoutGuard(_ sql: String) -> String {
        guard let close = AppTableGuard.closingParenthesis(of: sql),
            let start = sql[..<close].range(of: ", CHECK (lansync_guard(", options: .backwards)?.lowerBound
        else { return sql }
        return String(sql[..<start]) + String(sql[close...])
    }

    /// An earlier version guarded UPDATE with a trigger and its CHECK named no column; opening its
    /// database gives the CHECK the columns and drops the trigger, and another program's UPDATE
    /// and DELETE still fail while LANSync's own still sync.
    @Test func theFormerGuardIsReplacedWhenOpened() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        try await Self.replicaWithAda(at: path)
        let old = try DatabaseQueue(path: path)
        try await old.write { db in
            try Self.rewriteAthletes(db) {
                $0.replacingOccurrences(of: Self.athletesGuard, with: AppTableGuard.formerConstraint)
            }
            try db.execute(
                sql:
                    "CREATE TRIGGER lansync_athletes_guard_update BEFORE UPDATE ON athletes BEGIN SELECT lansync_guard(); END"
            )
        }
        let former = try await old.read {
            try String.fetchOne($0, sql: "SELECT sql FROM sqlite_master WHERE name = 'athletes'")
        }
        #expect(former?.contains(AppTableGuard.formerConstraint) == true)
        try old.close()
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        let (sql, triggers) = try store.read { db in
            (
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'athletes'") ?? "",
                try String.fetchAll(
                    db,
                    sql: "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'athletes' ORDER BY name"
                )
            )
        }
        #expect(sql.hasSuffix(", " + Self.athletesGuard + ")"), "\(sql)")
        #expect(!sql.contains(AppTableGuard.formerConstraint))
        #expect(triggers == ["lansync_athletes_guard_delete", "lansync_sessions_on_delete_0"])
        _ = try await store.write(now: 2_000) {
            try $0.execute(sql: "UPDATE athletes SET name = 'Ada L.' WHERE id = 'a'")
        }
        #expect(try Self.rows(store, "SELECT name FROM athletes") == [["name": "Ada L.".databaseValue]])
        #expect(try store.integrityProblems().isEmpty)
        let outside = try DatabaseQueue(path: path)
        for statement in ["UPDATE athletes SET weight_kg = 60", "UPDATE athletes SET id = 'b'", "DELETE FROM athletes"]
        {
            #expect(throws: DatabaseError.self, "\(statement)") { try outside.write { try $0.execute(sql: statement) } }
        }
        try outside.close()
        #expect(
            try Self.rows(store, "SELECT id, weight_kg FROM athletes") == [
                ["id": "a".databaseValue, "weight_kg": .null]
            ]
        )
    }

    /// A column the app adds is named by the guard at once: another program cannot update it alone.
    @Test func aColumnTheAppAddsIsGuardedToo() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        _ = try store.applySchema(Self.schema)
        _ = try store.applySchema(
            Self.schema.replacingOccurrences(
                of: "xp INTEGER NOT NULL DEFAULT 0",
                with: "xp INTEGER NOT NULL DEFAULT 0, club TEXT"
            )
        )
        _ = try await store.write(now: 1_000) {
            try $0.execute(sql: "INSERT INTO athletes (id, name) VALUES ('a', 'Ada')")
            try $0.execute(sql: "UPDATE athletes SET club = 'Leander' WHERE id = 'a'")
        }
        let sql = try store.read {
            try String.fetchOne($0, sql: "SELECT sql FROM sqlite_master WHERE name = 'athletes'")
        }
        #expect(
            sql?.hasSuffix(", CHECK (lansync_guard(\"id\", \"name\", \"weight_kg\", \"photo\", \"xp\", \"club\")))")
                == true,
            "\(sql ?? "")"
        )
        let outside = try DatabaseQueue(path: path)
        #expect(throws: DatabaseError.self) {
            try outside.write { try $0.execute(sql: "UPDATE athletes SET club = 'x'") }
        }
        try outside.close()
        #expect(try Self.rows(store, "SELECT club FROM athletes") == [["club": "Leander".databaseValue]])
        #expect(try store.integrityProblems().isEmpty)
    }

    /// A table of more columns than one call may take is guarded by several calls, each column named.
    @Test func aWideTableIsGuardedByCallsOfAtMostAHundredColumns() throws {
        let columns = (0..<250).map { "c\($0)" }
        let constraint = AppTableGuard.constraint(naming: columns)
        #expect(constraint.components(separatedBy: AppTableGuard.call).count - 1 == 3)
        let directory = TemporaryDirectory()
        let path = directory.path + "/wide.sqlite"
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            db.add(function: DatabaseFunction("lansync_guard", argumentCount: nil, pure: true) { _ in 1 })
            try db.execute(
                sql: "CREATE TABLE t (\(columns.map { "\($0) INTEGER" }.joined(separator: ", ")), \(constraint))"
            )
            try db.execute(sql: "INSERT INTO t (c0) VALUES (1)")
            try db.execute(sql: "UPDATE t SET c249 = 2")
        }
        try queue.close()
        // Without the function, an update of the last column alone does not compile.
        let other = try DatabaseQueue(path: path)
        #expect(throws: DatabaseError.self) { try other.write { try $0.execute(sql: "UPDATE t SET c249 = 3") } }
        #expect(try other.read { try Int.fetchOne($0, sql: "SELECT c249 FROM t") } == 2)
    }

    /// A row's state is stored in the compact form (`StoredRowState`), well under its canonical
    /// size, and reads back as the same state.
    @Test func aRowsStateIsStoredCompactly() async throws {
        let store = try Self.store()
        _ = try await store.write(now: 1_000) { db in
            try db.execute(
                sql:
                    "INSERT INTO athletes (id, name, weight_kg, photo, xp) VALUES ('a', 'Ada Lovelace', 61.5, x'00ff10', 12)"
            )
            try db.execute(sql: "UPDATE athletes SET name = 'Ada' WHERE id = 'a'")
        }
        let stored = try #require(try store.readInternals { try Data.fetchOne($0, sql: "SELECT state FROM app_rows") })
        let state = try #require(try store.row(RowKey(table: "athletes", primaryKey: [.text("a")])))
        #expect(stored.first == StoredRowState.tag)
        #expect(state.value(of: "name") == .text("Ada") && state.value(of: "photo") == .blob([0, 0xFF, 0x10]))
        #expect(state.counters.map(\.sum) == [12])
        // Two stamps, three columns and a counter.
        #expect(
            stored.count * 2 < state.canonicalBytes.count,
            "\(stored.count) bytes stored, \(state.canonicalBytes.count) canonical"
        )
    }

    /// A row's first write whose values its row holds, an append-only row's for good, is stored
    /// in the held form (`StoredRowState.heldTag`): its one stamp and its columns' numbers, no
    /// value. Written by the bulk path or a merge alike; once changed, the row takes the general form.
    @Test func aRowsFirstWriteIsStoredInTheHeldForm() async throws {
        let schema = """
            -- lansync: append-only strokes
            CREATE TABLE strokes (id TEXT PRIMARY KEY, watts REAL, spm INTEGER, note TEXT);
            CREATE TABLE boats (id TEXT PRIMARY KEY, name TEXT, seats INTEGER);
            """
        let a = try ReplicaStore.inMemory(device: device)
        let b = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 3, count: 16))!)
        for store in [a, b] { _ = try store.applySchema(schema) }
        _ = try await a.write(now: 1_000) { db in
            try db.execute(
                sql:
                    "INSERT INTO strokes VALUES ('s1', 210.5, 28, 'easy'), ('s2', 230.25, 30, NULL), ('s3', 198.0, 27, 'x')"
            )
            try db.execute(sql: "INSERT INTO boats VALUES ('b1', 'Aurora', 4), ('b2', 'Fen', 2)")
        }
        _ = try await b.merge(try a.delta(since: try b.versionVector(), maxRows: 100))
        for store in [a, b] {
            let states = try store.readInternals {
                try Data.fetchAll($0, sql: "SELECT state FROM app_rows UNION ALL SELECT state FROM app_rowid_states")
            }
            #expect(states.count == 5)
            // The append-only table's by its rows' rowids, written (a) or merged (b).
            let byRowid = try store.readInternals { try Int.fetchOne($0, sql: "SELECT count(*) FROM app_rowid_states") }
            #expect(byRowid == 3)
            #expect(states.allSatisfy { $0.first == StoredRowState.heldTag })
            // Tag, life, marker, stamp (8 + 1 + 1), cell count, three column numbers.
            #expect(states.allSatisfy { $0.count <= 18 }, "\(states.map(\.count))")
            #expect(try store.recomputeDigest() == store.status().digest)
            let stroke = try store.row(RowKey(table: "strokes", primaryKey: [.text("s2")]))
            #expect(stroke?.value(of: "watts") == .real(230.25) && stroke?.value(of: "note") == .null)
        }
        _ = try await a.write(now: 2_000) { db in try db.execute(sql: "UPDATE boats SET name = 'Dawn' WHERE id = 'b1'")
        }
        let changed = try a.readInternals { db in
            try Data.fetchOne(
                db,
                sql: "SELECT state FROM app_rows WHERE key = ?",
                arguments: [Data(SQLValue.keyBytes([.text("b1")]))]
            )
        }
        #expect(changed?.first == StoredRowState.tag)
        #expect(try a.row(RowKey(table: "boats", primaryKey: [.text("b1")]))?.value(of: "name") == .text("Dawn"))
        #expect(try a.recomputeDigest() == a.status().digest)
    }

    /// A replica whose rows were stored before the compact form (schema 4 kept canonical states)
    /// reads them, changes them (storing the changed rows compactly) and syncs them, with its
    /// digest in step; a stored state that does not read says the database is damaged.
    @Test func statesStoredCanonicallyStillReadAndChange() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        var before: [RowKey: RowState] = [:]
        do {
            let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
            _ = try store.applySchema(Self.schema)
            _ = try await store.write(now: 1_000) { db in
                try db.execute(
                    sql:
                        "INSERT INTO athletes (id, name, weight_kg, xp) VALUES ('a', 'Ada', 61.5, 3), ('b', 'Bo', 80, 0)"
                )
                try db.execute(sql: "INSERT INTO sessions (id, athlete_id, notes) VALUES ('s', 'a', 'row')")
            }
            try store.forEachAppRow { key, state in before[key] = state }
            // As schema 4 left it: canonical states, no column numbering.
            let held = before
            try await store.writer.write { db in
                for (key, state) in held {
                    try db.execute(
                        sql:
                            "UPDATE app_rows SET state = ? WHERE key = ? AND tbl = (SELECT num FROM app_tables WHERE name = ?)",
                        arguments: [Data(state.canonicalBytes), Data(SQLValue.keyBytes(key.primaryKey)), key.table]
                    )
                }
                try db.execute(
                    sql:
                        "DROP TABLE app_columns; DELETE FROM grdb_migrations WHERE identifier = 'v5 stored row states'; PRAGMA user_version = 4;"
                )
            }
            try store.writer.close()
        }
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        var after: [RowKey: RowState] = [:]
        try store.forEachAppRow { key, state in after[key] = state }
        #expect(after == before)
        #expect(try store.recomputeDigest() == store.status().digest)
        _ = try await store.write(now: 2_000) { db in
            try db.execute(sql: "UPDATE athletes SET weight_kg = 62, xp = xp + 2 WHERE id = 'a'")
            try db.execute(sql: "DELETE FROM athletes WHERE id = 'b'")
        }
        let forms = try store.readInternals {
            try String.fetchAll($0, sql: "SELECT hex(substr(state, 1, 1)) FROM app_rows ORDER BY key")
        }
        #expect(
            forms == ["C5", "C6", "00"],
            "a changed (compact), b deleted (the held form: its delete alone), s did not (canonical)"
        )
        #expect(try store.recomputeDigest() == store.status().digest)
        let peer = try Self.store(2)
        try await Self.sync(store, to: peer)
        #expect(try peer.status().digest == store.status().digest)
        #expect(
            try Self.rows(peer, "SELECT id, weight_kg, xp FROM athletes") == [
                ["id": "a".databaseValue, "weight_kg": 62.0.databaseValue, "xp": 5.databaseValue]
            ]
        )

        try await store.writer.write { db in
            try db.execute(
                sql: "UPDATE app_rows SET state = x'c50101' WHERE key = ?",
                arguments: [Data(SQLValue.keyBytes([.text("a")]))]
            )
        }
        #expect {
            _ = try store.row(RowKey(table: "athletes", primaryKey: [.text("a")]))
        } throws: { error in
            (error as? StoreError)?.description.contains("the database is damaged") == true
        }
    }

    @Test(arguments: [
        (
            "CREATE TABLE t (id TEXT PRIMARY KEY, n TEXT)",
            "CREATE TABLE t (id TEXT PRIMARY KEY, n TEXT, CHECK (lansync_guard(\"id\", \"n\")))"
        ),
        (
            "CREATE TABLE \"a(b\" (id TEXT PRIMARY KEY, n TEXT DEFAULT ')') WITHOUT ROWID",
            "CREATE TABLE \"a(b\" (id TEXT PRIMARY KEY, n TEXT DEFAULT ')', CHECK (lansync_guard(\"id\", \"n\"))) WITHOUT ROWID"
        ),
        (
            "CREATE TABLE [t)] (id TEXT PRIMARY KEY, -- the key )\n n REAL CHECK (n > 0) /* ) */\n) STRICT",
            "CREATE TABLE [t)] (id TEXT PRIMARY KEY, -- the key )\n n REAL CHECK (n > 0) /* ) */\n, CHECK (lansync_guard(\"id\", \"n\"))) STRICT"
        ),
        (
            "CREATE TABLE `it''s` (id TEXT PRIMARY KEY, n TEXT DEFAULT 'it''s (here')",
            "CREATE TABLE `it''s` (id TEXT PRIMARY KEY, n TEXT DEFAULT 'it''s (here', CHECK (lansync_guard(\"id\", \"n\")))"
        ),
    ])
    func theGuardIsTheTablesLastConstraint(sql: String, guarded: String) throws {
        #expect(AppTableGuard.guarded(sql, columns: ["id", "n"]) == guarded)
        // SQLite reads the result as the same table with one more constraint.
        let queue = try DatabaseQueue()
        try queue.write { db in
            db.add(function: DatabaseFunction("lansync_guard", argumentCount: nil, pure: true) { _ in 1 })
            try db.execute(sql: guarded)
        }
        // Named again, the guard is replaced, not added to.
        #expect(
            AppTableGuard.renamed(guarded, columns: ["id", "n", "m"])
                == AppTableGuard.guarded(sql, columns: ["id", "n", "m"])
        )
    }

    @Test func aTableWithoutAColumnListHasNoGuard() {
        #expect(AppTableGuard.guarded("CREATE TABLE t AS SELECT 1", columns: ["id"]) == nil)
        #expect(AppTableGuard.guarded("CREATE TABLE t (id TEXT", columns: ["id"]) == nil)
    }

    @Test func valuesRoundTripExactly() async throws {
        let (a, b) = (try Self.store(1), try Self.store(2))
        let blob = Data((0...255).map { UInt8($0) })
        _ = try await a.write(now: 1_000) { db in
            // GRDB binds text up to a NUL; SQL can still write one.
            try db.execute(
                sql: "INSERT INTO athletes (id, name, weight_kg, photo) VALUES (?, 'x' || char(0) || 'y', ?, ?)",
                arguments: ["é𝄞", 0.1 + 0.2, blob]
            )
        }
        try await Self.sync(a, to: b)
        let row = try Self.rows(b, "SELECT id, CAST(name AS BLOB) AS name, weight_kg, photo FROM athletes")[0]
        #expect(row["id"] == "é𝄞".databaseValue)
        #expect(row["name"] == Data([0x78, 0, 0x79]).databaseValue)
        #expect(Double.fromDatabaseValue(row["weight_kg"]!)?.bitPattern == (0.1 + 0.2).bitPattern)
        #expect(row["photo"] == blob.databaseValue)
    }

    /// An INSERT into a table without counters takes the encoded path (`insertEncoded`): the
    /// state it stores, the bytes it hashes into the digest and the change a peer merges must be
    /// what the general path makes of the same row, for every kind of value SQLite can hand it.
    /// The capture's ASCII test, eight bytes at a time, finds a high byte wherever it is.
    @Test func theCapturesASCIITestFindsEveryHighByte() {
        for count in 0..<20 {
            let plain = [UInt8](repeating: 0x41, count: count)
            #expect(plain.withUnsafeBytes { AppWriteCapture.isASCII($0) })
            for position in 0..<count {
                var bytes = plain
                bytes[position] = 0xC3
                #expect(
                    !bytes.withUnsafeBytes { AppWriteCapture.isASCII($0) },
                    "a high byte at \(position) of \(count)"
                )
            }
        }
    }

    @Test func encodedInsertsWriteWhatTheGeneralPathWrites() async throws {
        let schema = """
            CREATE TABLE readings (id TEXT PRIMARY KEY, r REAL, i INTEGER, t TEXT, b BLOB, n NUMERIC);
            CREATE TABLE pairs (x INTEGER, y TEXT, note TEXT, PRIMARY KEY (x, y));
            -- lansync: append-only log
            CREATE TABLE log (id TEXT PRIMARY KEY, line TEXT NOT NULL);
            """
        let (a, b) = (
            try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!),
            try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 2, count: 16))!)
        )
        _ = try a.applySchema(schema)
        _ = try b.applySchema(schema)
        _ = try await a.write(now: 1_000) { db in
            try db.execute(
                sql: """
                    INSERT INTO readings VALUES
                        ('whole', 15, -1, 'héllo', x'', '12'),
                        ('signs', -0.0, -9223372036854775808, '', x'00ff', 1.5),
                        ('nulls', NULL, NULL, NULL, NULL, NULL),
                        ('bytes', 1e308, 9223372036854775807, CAST(x'ff41' AS TEXT), zeroblob(3), 'text'),
                        ('nul', 0.1, 0, 'a' || char(0) || 'b', x'00', x'01');
                    INSERT INTO pairs VALUES (1, 'a', 'one'), (-1, '', NULL);
                    INSERT INTO log VALUES ('l1', 'first'), ('l2', 'second');
                    """
            )
        }
        // The running digest (hashed from the encoded bytes) is the one recomputed from the stored states.
        #expect(try a.recomputeDigest() == a.status().digest)
        let state = try #require(try a.row(RowKey(table: "readings", primaryKey: [.text("whole")])))
        #expect(
            state.value(of: "r") == .real(15) && state.value(of: "i") == .integer(-1)
                && state.value(of: "n") == .integer(12)
        )
        #expect(
            try a.row(RowKey(table: "readings", primaryKey: [.text("bytes")]))?.value(of: "t") == .text("\u{FFFD}A")
        )
        // A peer merges the same changes through the general path, to the same states and digest.
        try await Self.sync(a, to: b)
        var (held, merged) = ([RowKey: RowState](), [RowKey: RowState]())
        try a.forEachAppRow { held[$0] = $1 }
        try b.forEachAppRow { merged[$0] = $1 }
        #expect(held.count == 9 && merged == held)
        #expect(try b.status().digest == a.status().digest)
        // A row held already (deleted) goes the general way with the stamp it took, and revives.
        _ = try await a.write(now: 2_000) { try $0.execute(sql: "DELETE FROM readings WHERE id = 'nulls'") }
        _ = try await a.write(now: 3_000) {
            try $0.execute(sql: "INSERT INTO readings (id, t) VALUES ('nulls', 'back')")
        }
        let revived = try #require(try a.row(RowKey(table: "readings", primaryKey: [.text("nulls")])))
        #expect(revived.causalLength == 3 && revived.value(of: "t") == .text("back"))
        #expect(try a.recomputeDigest() == a.status().digest)
        #expect(try a.versionVector()[a.replica] == 11)
        // A key that is NULL is refused as by every write.
        await #expect {
            _ = try await a.write(now: 4_000) { try $0.execute(sql: "INSERT INTO readings (id, t) VALUES (NULL, 'x')") }
        } throws: { error in
            "\(error)".contains("the primary key of readings must not be NULL")
        }
        // A write of many rows hashes them on two threads; one that fails after a hundred rows
        // leaves none of their hashes in the digest.
        _ = try await a.write(now: 5_000) { db in
            for index in 0..<200 {
                try db.execute(
                    sql: "INSERT INTO readings (id, r, t) VALUES (?, ?, ?)",
                    arguments: ["bulk\(index)", Double(index) / 3, "t\(index)"]
                )
            }
        }
        await #expect(throws: (any Error).self) {
            _ = try await a.write(now: 6_000) { db in
                for index in 0..<100 {
                    try db.execute(sql: "INSERT INTO readings (id) VALUES (?)", arguments: ["failed\(index)"])
                }
                try db.execute(sql: "INSERT INTO readings (id, t) VALUES (NULL, 'x')")
            }
        }
        _ = try await a.write(now: 7_000) { try $0.execute(sql: "INSERT INTO readings (id) VALUES ('after')") }
        #expect(try a.recomputeDigest() == a.status().digest)
        #expect(try a.status().tables.first { $0.name == "readings" }?.rows == 206)
        // New rows' states go in many to a statement; a row held already among them (deleted,
        // then inserted again between new ones) goes the general way and revives.
        _ = try await a.write(now: 8_000) { try $0.execute(sql: "DELETE FROM readings WHERE id = 'bulk5'") }
        _ = try await a.write(now: 9_000) { db in
            for index in 0..<100 {
                try db.execute(sql: "INSERT INTO readings (id, t) VALUES (?, 'more')", arguments: ["more\(index)"])
                if index == 40 { try db.execute(sql: "INSERT INTO readings (id, t) VALUES ('bulk5', 'again')") }
            }
        }
        let again = try #require(try a.row(RowKey(table: "readings", primaryKey: [.text("bulk5")])))
        #expect(again.causalLength == 3 && again.value(of: "t") == .text("again"))
        #expect(try a.recomputeDigest() == a.status().digest)
        #expect(try a.status().tables.first { $0.name == "readings" }?.rows == 306)
        try await Self.sync(a, to: b, maxRows: 50)
        #expect(try b.status().digest == a.status().digest)
    }

    /// A replica whose app does not declare a table or column keeps and relays their changes,
    /// and shows them once its app declares them.
    @Test func unknownTablesAndColumnsAreKeptRelayedAndShownOnceDeclared() async throws {
        let newer = try Self.store(1)
        _ = try newer.applySchema(
            Self.schema.replacingOccurrences(of: "photo BLOB,", with: "photo BLOB,\n    nickname TEXT,")
        )
        let older = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 2, count: 16))!)
        _ = try older.applySchema(
            "CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight_kg REAL, photo BLOB, xp INTEGER NOT NULL DEFAULT 0);\n-- lansync: counter athletes.xp"
        )
        let third = try Self.store(3)
        _ = try await newer.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO athletes (id, name, nickname) VALUES ('ana', 'Ana', 'Nana')")
            try db.execute(sql: "INSERT INTO sessions (id, notes) VALUES ('s1', 'first')")
        }
        try await Self.sync(newer, to: older)
        #expect(try Self.rows(older, "SELECT name FROM athletes") == [["name": "Ana".databaseValue]])
        // older relays to third what it cannot show.
        try await Self.sync(older, to: third)
        #expect(try Self.rows(third, "SELECT notes FROM sessions") == [["notes": "first".databaseValue]])
        #expect(try older.status().digest == newer.status().digest)
        // older's app is updated: the table and the column appear with their rows.
        _ = try older.applySchema(
            Self.schema.replacingOccurrences(of: "photo BLOB,", with: "photo BLOB,\n    nickname TEXT,")
        )
        #expect(try Self.rows(older, "SELECT nickname FROM athletes") == [["nickname": "Nana".databaseValue]])
        #expect(try Self.rows(older, "SELECT notes FROM sessions") == [["notes": "first".databaseValue]])
    }
}
