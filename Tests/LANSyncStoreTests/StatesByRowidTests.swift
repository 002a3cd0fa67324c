import Foundation
import GRDB
import LANSyncCore
import Testing

@testable import LANSyncStore

/// An append-only table keeps the states of the rows it shows by their rowids
/// (`app_rowid_states`), not by key: written in bulk, merged one at a time and in batches, read
/// by every reader, and moved to `app_rows` with every value when a parent's delete takes the
/// rows along, here or at a peer.
@Suite struct StatesByRowidTests {
    static func counts(_ store: ReplicaStore) throws -> (byRowid: Int, byKey: Int) {
        try store.readInternals { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM app_rowid_states")!,
                try Int.fetchOne(
                    db,
                    sql: "SELECT count(*) FROM app_rows r JOIN app_tables t ON t.num = r.tbl WHERE t.name = 'strokes'"
                )!
            )
        }
    }

    /// A replica in memory of device `number` with `schema` applied.
    static func store(_ number: UInt8, schema: String) throws -> ReplicaStore {
        let store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!)
        _ = try store.applySchema(schema)
        return store
    }

    static func expectConsistent(_ stores: [ReplicaStore]) throws {
        for store in stores { #expect(try store.recomputeDigest() == store.status().digest) }
        let digests = try stores.map { try $0.syncSummary().digest }
        #expect(Set(digests.map(\.bytes)).count == 1, "every replica ends with one digest")
    }

    @Test func appendedRowsKeepTheirStatesByRowidUntilTheirParentGoes() async throws {
        let (tablet, phone, laptop) = (
            try AppendOnlyCascadeTests.store(1), try AppendOnlyCascadeTests.store(2),
            try AppendOnlyCascadeTests.store(3)
        )
        _ = try await tablet.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO sessions VALUES ('s1', 'morning'), ('s2', 'evening')")
        }
        try await AppendOnlyCascadeTests.strokes(tablet, session: "s1", count: 200, now: 1_001)
        try await AppendOnlyCascadeTests.strokes(tablet, session: "s2", count: 100, now: 1_002)
        // One at a time (deltas of a row), then in batches.
        let firstRows = try tablet.delta(since: try phone.versionVector(), maxRows: 1)
        _ = try await phone.merge(firstRows)
        try await AppTableStoreTests.sync(tablet, to: phone, maxRows: 1)
        #expect(try Self.counts(phone).byRowid >= 1)
        try await AppTableStoreTests.sync(tablet, to: laptop, maxRows: 128)
        for store in [tablet, phone, laptop] {
            let (byRowid, byKey) = try Self.counts(store)
            #expect(byRowid == 300 && byKey == 0, "\(byRowid) by rowid, \(byKey) by key")
            let stroke = try store.row(RowKey(table: "strokes", primaryKey: [.text("s2-7")]))
            #expect(stroke?.value(of: "watts") == .real(7) && stroke?.exists == true)
            var listed = 0
            try store.forEachAppRow(table: "strokes") { _, _ in listed += 1 }
            #expect(listed == 300)
        }
        try Self.expectConsistent([tablet, phone, laptop])

        // The phone deletes a session: its strokes' states move to `app_rows`, here and where it syncs.
        _ = try await phone.write(now: 2_000) { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        #expect(try Self.counts(phone) == (100, 200))
        try await AppTableStoreTests.sync(phone, to: tablet, maxRows: 50)
        try await AppTableStoreTests.sync(phone, to: laptop, maxRows: 500)
        for store in [tablet, phone, laptop] {
            #expect(try Self.counts(store) == (100, 200))
            #expect(try AppendOnlyCascadeTests.count(store, "SELECT count(*) FROM strokes") == 100)
            let gone = try store.row(RowKey(table: "strokes", primaryKey: [.text("s1-3")]))
            #expect(gone?.exists == false && gone?.causalLength == 2)
        }
        try Self.expectConsistent([tablet, phone, laptop])

        // A key that went with its session is refused; new strokes go by rowid, and a late
        // joiner takes everything from the laptop.
        _ = try await tablet.write(now: 3_000) { db in
            try db.execute(sql: "INSERT INTO sessions VALUES ('s1', 'again')")
        }
        await #expect(throws: StoreError.self) {
            _ = try await tablet.write(now: 3_001) { db in
                try db.execute(sql: "INSERT INTO strokes VALUES ('s1-0', 's1', 9)")
            }
        }
        try await AppendOnlyCascadeTests.strokes(tablet, session: "s1", count: 10, from: 500, now: 3_002)
        let late = try AppendOnlyCascadeTests.store(4)
        try await AppTableStoreTests.sync(tablet, to: laptop, maxRows: 7)
        try await AppTableStoreTests.sync(laptop, to: late, maxRows: 64)
        try await AppTableStoreTests.sync(tablet, to: phone, maxRows: 64)
        for store in [tablet, phone, laptop, late] { #expect(try Self.counts(store) == (110, 200)) }
        try Self.expectConsistent([tablet, phone, laptop, late])
    }

    /// A replica whose append-only rows kept their states by key (schema 11 and before) reads
    /// them, refuses their keys again, takes new rows by rowid, and deletes the old ones with
    /// their parent, in step with a peer.
    @Test func statesKeptByKeyBeforeStillReadAndGoWithTheirParent() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/replica.sqlite"
        let device = DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
        do {
            let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
            _ = try store.applySchema(AppendOnlyCascadeTests.schema)
            _ = try await store.write(now: 1_000) { db in
                try db.execute(sql: "INSERT INTO sessions VALUES ('s1', NULL), ('s2', NULL)")
            }
            try await AppendOnlyCascadeTests.strokes(store, session: "s1", count: 30, now: 1_001)
            try await AppendOnlyCascadeTests.strokes(store, session: "s2", count: 10, now: 1_002)
            #expect(try Self.counts(store) == (40, 0))
        }
        // As schema 11 kept them: by key.
        let old = try DatabaseQueue(path: path)
        try await old.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT s.tbl, s.rid, s.state, t.id FROM app_rowid_states s JOIN strokes t ON t.rowid = s.rid"
            )
            for row in rows {
                try db.execute(
                    sql: "INSERT INTO app_rows (tbl, key, state) VALUES (?, ?, ?)",
                    arguments: [row[0] as Int64, Data(SQLValue.keyBytes([.text(row[3])])), row[2] as Data]
                )
            }
            try db.execute(sql: "DELETE FROM app_rowid_states")
        }
        try old.close()
        let (store, _) = try ReplicaStore.openOrCreate(path: path, device: device)
        #expect(try Self.counts(store) == (0, 40))
        #expect(try store.recomputeDigest() == store.status().digest)
        await #expect(throws: StoreError.self) {
            _ = try await store.write(now: 2_000) { db in
                try db.execute(sql: "INSERT OR REPLACE INTO strokes VALUES ('s1-0', 's1', 9)")
            }
        }
        // Written in descending key order: their rowids and their keys' order differ.
        _ = try await store.write(now: 2_001) { db in
            for index in (30..<35).reversed() {
                try db.execute(
                    sql: "INSERT INTO strokes VALUES (?, 's1', ?)",
                    arguments: ["s1-\(index)", Double(index)]
                )
            }
        }
        #expect(try Self.counts(store) == (5, 40))
        // Rows of both places are listed as one, in the order of their key bytes.
        var listed = [[UInt8]]()
        try store.forEachAppRow(table: "strokes") { key, _ in listed.append(SQLValue.keyBytes(key.primaryKey)) }
        #expect(listed.count == 45)
        #expect(zip(listed, listed.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) })
        let peer = try AppendOnlyCascadeTests.store(2)
        try await AppTableStoreTests.sync(store, to: peer, maxRows: 16)
        #expect(try Self.counts(peer) == (45, 0))
        _ = try await store.write(now: 3_000) { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        #expect(try Self.counts(store) == (0, 45))
        try await AppTableStoreTests.sync(store, to: peer, maxRows: 16)
        #expect(try Self.counts(peer) == (10, 35))
        for replica in [store, peer] {
            #expect(try AppendOnlyCascadeTests.count(replica, "SELECT count(*) FROM strokes") == 10)
        }
        try Self.expectConsistent([store, peer])
    }

    /// Batches of new rows with integer keys out of order, merged at a peer that wrote rows of
    /// its own before and between them: each state is kept at its own row's rowid (a key that is
    /// SQLite's rowid is refused by the schema, so rowids and keys are unrelated).
    @Test func batchesMergedBesideTheReceiversOwnRowsKeepStatesAtTheirRows() async throws {
        let schema = """
            -- lansync: append-only taps
            CREATE TABLE taps (n INT PRIMARY KEY, word TEXT NOT NULL);
            """
        func store(_ number: UInt8) throws -> ReplicaStore { try Self.store(number, schema: schema) }
        let (home, clinic) = (try store(1), try store(2))
        // Keys out of order, with gaps the clinic's own rows fill.
        let homeKeys = [5, 100, 7, 3, 50, 9, 1_000, 8]
        _ = try await home.write(now: 1_000) { db in
            for key in homeKeys {
                try db.execute(sql: "INSERT INTO taps VALUES (?, ?)", arguments: [key, "home \(key)"])
            }
        }
        _ = try await clinic.write(now: 1_001) { db in
            for key in [6, 4, 51] {
                try db.execute(sql: "INSERT INTO taps VALUES (?, ?)", arguments: [key, "clinic \(key)"])
            }
        }
        try await Self.syncChecked(home, to: clinic, maxRows: 3)
        // The clinic writes a row between batches, and one whose key the home writes too: the
        // batch holding that key is refused whole and goes row by row.
        _ = try await clinic.write(now: 1_002) { db in
            try db.execute(sql: "INSERT INTO taps VALUES (2, 'clinic 2'), (70, 'clinic 70')")
        }
        let laterKeys = (0..<40).map { ($0 * 37) % 40 * 10 + 1_100 } + [70]
        _ = try await home.write(now: 1_003) { db in
            for key in laterKeys {
                try db.execute(sql: "INSERT INTO taps VALUES (?, ?)", arguments: [key, "home \(key)"])
            }
        }
        try await Self.syncChecked(home, to: clinic, maxRows: 64)
        try await Self.syncChecked(clinic, to: home, maxRows: 8)
        for replica in [home, clinic] {
            let misplaced = try replica.readInternals { db in
                try Int.fetchOne(
                    db,
                    sql: "SELECT count(*) FROM app_rowid_states s LEFT JOIN taps t ON t.rowid = s.rid WHERE t.n IS NULL"
                )!
            }
            #expect(misplaced == 0, "every state by rowid has its row")
            #expect(try AppendOnlyCascadeTests.count(replica, "SELECT count(*) FROM taps") == 53)
            // The home's row 70 lost to the clinic's earlier one; the home may keep the state
            // that merge wrote by key.
            let (byRowid, byKey) = try Self.countsOf(replica, table: "taps")
            #expect(byRowid + byKey == 53 && byKey <= 1, "\(byRowid) by rowid, \(byKey) by key")
            for key in homeKeys + laterKeys {
                let row = try replica.row(RowKey(table: "taps", primaryKey: [.integer(Int64(key))]))
                let word = key == 70 ? "clinic 70" : "home \(key)"
                #expect(row?.value(of: "word") == .text(word) && row?.exists == true)
            }
            var listed = 0
            try replica.forEachAppRow(table: "taps") { _, _ in listed += 1 }
            #expect(listed == 53)
        }
        try Self.expectConsistent([home, clinic])
    }

    /// A receiver whose table holds the greatest rowid SQLite has: a batch's new rows take
    /// rowids at random, and each row is looked up, in an append-only table and a mutable one
    /// (whose runs name rows by rowid too); a late joiner reading one change at a time from the
    /// receiver finds every row its runs name.
    @Test(arguments: [true, false]) func batchesAtTheGreatestRowidFindTheirRowsOneByOne(appendOnly: Bool) async throws {
        let schema =
            (appendOnly ? "-- lansync: append-only taps\n" : "")
            + "CREATE TABLE taps (n INT PRIMARY KEY, word TEXT NOT NULL);"
        let (home, clinic, late) = (
            try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!),
            try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 2, count: 16))!),
            try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 3, count: 16))!)
        )
        for store in [home, clinic, late] { _ = try store.applySchema(schema) }
        _ = try await clinic.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO taps (rowid, n, word) VALUES (9223372036854775807, 0, 'clinic 0')")
        }
        _ = try await home.write(now: 1_001) { db in try db.execute(sql: "INSERT INTO taps VALUES (1, 'home 1')") }
        try await Self.syncChecked(home, to: clinic, maxRows: 1)
        _ = try await home.write(now: 1_002) { db in
            for key in 2...40 {
                try db.execute(sql: "INSERT INTO taps VALUES (?, ?)", arguments: [key, "home \(key)"])
            }
        }
        try await Self.syncChecked(home, to: clinic, maxRows: 64)
        try await Self.syncChecked(clinic, to: home, maxRows: 64)
        #expect(try Self.runForms(clinic, table: "taps").byRowid >= 1)
        try await Self.syncChecked(clinic, to: late, maxRows: 1)
        for replica in [home, clinic, late] {
            #expect(try Self.countsOf(replica, table: "taps") == (appendOnly ? (41, 0) : (0, 41)))
            for key in 1...40 {
                let row = try replica.row(RowKey(table: "taps", primaryKey: [.integer(Int64(key))]))
                #expect(row?.value(of: "word") == .text("home \(key)") && row?.exists == true)
            }
        }
        try Self.expectConsistent([home, clinic, late])
    }

    /// Syncs as a session does: each delta checked with the receiver's numbers first, so that
    /// new rows from a replica it knows go in many to a statement (`WriteContext.mergeNewRows`).
    /// How many runs of the dot index of a table name their rows by rowid, and how many do not.
    static func runForms(_ store: ReplicaStore, table: String = "strokes") throws -> (byRowid: Int, byKey: Int) {
        try store.readInternals { db in
            let runs = "FROM app_op_runs r JOIN app_tables t ON t.num = r.tbl WHERE t.name = '\(table)'"
            let byRowid = try Int.fetchOne(
                db,
                sql: "SELECT count(*) \(runs) AND substr(r.keys, 1, 1) = x'\(String(format: "%02x", DotRun.rowidForm))'"
            )!
            return (byRowid, try Int.fetchOne(db, sql: "SELECT count(*) \(runs)")! - byRowid)
        }
    }

    /// Runs name an append-only table's rows by rowid (`DotRun.rowidForm`), at the writer and at
    /// a peer that merged them in batches. When rows leave their rowids (their parent's delete
    /// takes them along, here and merged) and SQLite gives those rowids to new rows, every
    /// replica, and late joiners reading in small deltas, still find each change.
    @Test func runsNameRowsByRowidAndRowsThatLeaveKeepTheirChanges() async throws {
        let (tablet, phone) = (try AppendOnlyCascadeTests.store(1), try AppendOnlyCascadeTests.store(2))
        _ = try await tablet.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO sessions VALUES ('s1', NULL), ('s2', NULL), ('s3', NULL), ('s4', NULL)")
        }
        // s1's strokes take the greatest rowids.
        try await AppendOnlyCascadeTests.strokes(tablet, session: "s2", count: 50, now: 1_001)
        try await AppendOnlyCascadeTests.strokes(tablet, session: "s1", count: 80, now: 1_002)
        try await Self.syncChecked(tablet, to: phone, maxRows: 32)
        for store in [tablet, phone] {
            let forms = try Self.runForms(store)
            #expect(forms.byRowid >= 1 && forms.byKey == 0, "\(forms)")
        }

        // The phone deletes s1, and its new strokes take the rowids s1's strokes left.
        _ = try await phone.write(now: 2_000) { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        try await AppendOnlyCascadeTests.strokes(phone, session: "s3", count: 40, now: 2_001)
        #expect(
            try AppendOnlyCascadeTests.count(
                phone,
                "SELECT count(*) FROM strokes WHERE session_id = 's3' AND rowid BETWEEN 51 AND 130"
            ) == 40
        )
        let firstLate = try AppendOnlyCascadeTests.store(3)
        try await Self.syncChecked(phone, to: firstLate, maxRows: 7)
        try await Self.syncChecked(phone, to: tablet, maxRows: 64)

        // The tablet's own rows left theirs in the merge; its new strokes take them again.
        try await AppendOnlyCascadeTests.strokes(tablet, session: "s4", count: 30, now: 3_000)
        let secondLate = try AppendOnlyCascadeTests.store(4)
        try await AppTableStoreTests.sync(tablet, to: secondLate, maxRows: 5)
        try await Self.syncChecked(tablet, to: phone, maxRows: 64)
        try await Self.syncChecked(phone, to: firstLate, maxRows: 64)
        for store in [tablet, phone, firstLate, secondLate] {
            #expect(try Self.counts(store) == (120, 80))
            #expect(try AppendOnlyCascadeTests.count(store, "SELECT count(*) FROM strokes") == 120)
            let gone = try store.row(RowKey(table: "strokes", primaryKey: [.text("s1-79")]))
            #expect(gone?.exists == false && gone?.causalLength == 2)
            let kept = try store.row(RowKey(table: "strokes", primaryKey: [.text("s3-0")]))
            #expect(kept?.exists == true && kept?.value(of: "session_id") == .text("s3"))
        }
        try Self.expectConsistent([tablet, phone, firstLate, secondLate])
    }

    /// A mutable table's runs name its new rows by rowid too, at the writer and at a peer that
    /// merged them in batches, while the states stay by key. Its rows leave their rowids in
    /// every way an app and a merge can move them: a DELETE (here and merged), a REPLACE that
    /// names only some columns, an UPDATE of the key, and a merged value that the desk's app
    /// version refuses (its CHECK, which the laptop's version does not have); SQLite gives a
    /// left rowid to a new row. Late joiners reading one to five changes at a time still end
    /// with every replica's rows and digest. An UPDATE of a rowid is refused.
    @Test func aMutableTablesRunsNameRowsByRowidAndRowsThatLeaveKeepTheirChanges() async throws {
        func store(_ number: UInt8, check: String = "") throws -> ReplicaStore {
            try Self.store(
                number,
                schema:
                    "CREATE TABLE sets (id TEXT PRIMARY KEY, reps INTEGER NOT NULL DEFAULT 0 \(check), weight REAL, note TEXT);"
            )
        }
        func shown(_ store: ReplicaStore) throws -> [[String: DatabaseValue]] {
            try AppTableStoreTests.rows(store, "SELECT id, reps, weight, note FROM sets ORDER BY id")
        }
        let (desk, laptop) = (try store(1, check: "CHECK (reps <= 100)"), try store(2))
        _ = try await desk.write(now: 1_000) { db in
            for index in 0..<60 {
                try db.execute(
                    sql: "INSERT INTO sets (id, reps, note) VALUES (?, ?, ?)",
                    arguments: [String(format: "r%02d", index), index % 50, "set \(index)"]
                )
            }
        }
        try await Self.syncChecked(desk, to: laptop, maxRows: 16)
        for (name, store) in [("desk", desk), ("laptop", laptop)] {
            let forms = try Self.runForms(store, table: "sets")
            #expect(forms.byRowid >= 1 && forms.byKey == 0, "\(name): \(forms)")
        }

        // An UPDATE of a rowid is refused, and nothing of its write stays.
        let refusal = await #expect(throws: StoreError.self) {
            _ = try await desk.write(now: 1_500) { db in
                try db.execute(sql: "UPDATE sets SET note = 'moved' WHERE id = 'r01'")
                try db.execute(sql: "UPDATE sets SET rowid = 1000 WHERE id = 'r01'")
            }
        }
        #expect(refusal.map { "\($0)".contains("an UPDATE of a row's rowid cannot run here") } == true)
        #expect(try AppendOnlyCascadeTests.count(desk, "SELECT count(*) FROM sets WHERE note = 'moved'") == 0)

        // Rows leave their rowids: a delete of the greatest, whose rowid a new row takes, a
        // REPLACE naming two columns, a key changed; the laptop deletes one.
        let greatest = try AppendOnlyCascadeTests.count(desk, "SELECT rowid FROM sets WHERE id = 'r59'")
        _ = try await desk.write(now: 2_000) { db in
            try db.execute(sql: "DELETE FROM sets WHERE id = 'r59'")
            try db.execute(sql: "INSERT INTO sets (id, reps) VALUES ('z1', 7)")
            try db.execute(sql: "INSERT OR REPLACE INTO sets (id, note) VALUES ('r20', 'replaced')")
            try db.execute(sql: "UPDATE sets SET id = 'r30x' WHERE id = 'r30'")
        }
        #expect(try AppendOnlyCascadeTests.count(desk, "SELECT rowid FROM sets WHERE id = 'z1'") == greatest)
        // SQLite's REPLACE deleted r20 (the capture saw it) and inserted it again: a new life.
        #expect(try desk.row(RowKey(table: "sets", primaryKey: [.text("r20")]))?.causalLength == 3)
        _ = try await laptop.write(now: 2_001) { db in try db.execute(sql: "DELETE FROM sets WHERE id = 'r40'") }
        // The laptop's edit of r50 breaks the desk's CHECK: merged there, r50 leaves the table
        // while its insert, which named neither column edited (reps was at its default), is still
        // shown whole (no stub indexes it by key).
        _ = try await desk.write(now: 2_002) { db in try db.execute(sql: "UPDATE sets SET weight = 20 WHERE id = 'r50'")
        }
        _ = try await laptop.write(now: 2_003) { db in
            try db.execute(sql: "UPDATE sets SET reps = 150 WHERE id = 'r50'")
        }
        try await Self.syncChecked(laptop, to: desk, maxRows: 4)
        try await Self.syncChecked(desk, to: laptop, maxRows: 4)
        #expect(try AppendOnlyCascadeTests.count(desk, "SELECT count(*) FROM sets WHERE id = 'r50'") == 0)
        #expect(try shown(desk) == shown(laptop).filter { $0["id"] != "r50".databaseValue })
        for store in [desk, laptop] {
            let row = try store.row(RowKey(table: "sets", primaryKey: [.text("r50")]))
            #expect(row?.exists == true && row?.value(of: "reps") == .integer(150))
            #expect(row?.value(of: "weight") == .real(20) && row?.value(of: "note") == .text("set 50"))
        }

        // Late joiners, one reading a change at a time from the desk, one five from the laptop.
        let (firstLate, secondLate) = (try store(3), try store(4))
        try await Self.syncChecked(desk, to: firstLate, maxRows: 1)
        try await AppTableStoreTests.sync(laptop, to: secondLate, maxRows: 5)
        for late in [firstLate, secondLate] {
            #expect(try shown(late) == shown(laptop))
            #expect(try late.versionVector() == desk.versionVector())
        }
        #expect(try shown(laptop).count == 59)
        try Self.expectConsistent([desk, laptop, firstLate, secondLate])
    }

    /// A table with a column named `rowid` (or `oid`, `_rowid_`) hides SQLite's rowid from SQL,
    /// so LANSync's reads by rowid would read the column: such a table keeps its states and runs
    /// by key, and syncs whole, late joiners reading one change at a time included.
    @Test(arguments: [true, false]) func aColumnNamedRowidKeepsItsTableByKey(appendOnly: Bool) async throws {
        let schema =
            (appendOnly ? "-- lansync: append-only marks\n" : "")
            + "CREATE TABLE marks (id TEXT PRIMARY KEY, rowid INTEGER, label TEXT);"
        func store(_ number: UInt8) throws -> ReplicaStore { try Self.store(number, schema: schema) }
        let (desk, laptop, late) = (try store(1), try store(2), try store(3))
        _ = try await desk.write(now: 1_000) { db in
            for index in 0..<40 {
                // The column's values run backwards, unlike SQLite's rowids.
                try db.execute(
                    sql: "INSERT INTO marks (id, rowid, label) VALUES (?, ?, ?)",
                    arguments: ["m\(index)", 1_000 - index, "mark \(index)"]
                )
            }
        }
        try await Self.syncChecked(desk, to: laptop, maxRows: 16)
        try await Self.syncChecked(laptop, to: late, maxRows: 1)
        for replica in [desk, laptop, late] {
            #expect(try Self.runForms(replica, table: "marks").byRowid == 0)
            #expect(try Self.countsOf(replica, table: "marks") == (0, 40))
            let rows = try AppTableStoreTests.rows(replica, "SELECT id, rowid, label FROM marks WHERE id = 'm7'")
            #expect(
                rows.count == 1 && rows[0]["rowid"] == 993.databaseValue && rows[0]["label"] == "mark 7".databaseValue
            )
        }
        #expect(try late.versionVector() == desk.versionVector())
        try Self.expectConsistent([desk, laptop, late])
    }

    /// Two devices append one key: the earlier append wins whole, and the later one, which a
    /// run names by rowid where it was written, is superseded while its row stays at that rowid.
    /// A late joiner that reads one change at a time still gets both: the winner and the
    /// loser's stub.
    @Test func anAppendThatLostIsStillSentFromARunOfRowids() async throws {
        let schema = """
            -- lansync: append-only spans
            CREATE TABLE spans (id TEXT PRIMARY KEY, start INTEGER NOT NULL DEFAULT 0, finish INTEGER);
            """
        func store(_ number: UInt8) throws -> ReplicaStore { try Self.store(number, schema: schema) }
        let (desk, laptop, late) = (try store(1), try store(2), try store(3))
        _ = try await laptop.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO spans (id, start) VALUES ('x', 10)")
        }
        _ = try await desk.write(now: 2_000) { db in
            try db.execute(sql: "INSERT INTO spans (id, start, finish) VALUES ('x', 1, 5), ('y', 2, 3)")
        }
        #expect(try Self.runForms(desk, table: "spans") == (1, 0))
        try await Self.syncChecked(laptop, to: desk, maxRows: 16)
        try await Self.syncChecked(desk, to: laptop, maxRows: 16)
        for store in [desk, laptop] {
            let shown = try AppTableStoreTests.rows(store, "SELECT id, start, finish FROM spans WHERE id = 'x'")
            #expect(shown.count == 1 && shown[0]["start"] == 10.databaseValue && shown[0]["finish"]!.isNull)
            #expect(try store.row(RowKey(table: "spans", primaryKey: [.text("x")]))?.liveDots.count == 1)
        }
        try await Self.syncChecked(desk, to: late, maxRows: 1)
        let row = try late.row(RowKey(table: "spans", primaryKey: [.text("x")]))
        #expect(row?.value(of: "start") == .integer(10) && row?.liveDots.count == 1)
        #expect(try late.versionVector() == desk.versionVector())
        try Self.expectConsistent([desk, laptop, late])
    }

    static func syncChecked(_ from: ReplicaStore, to: ReplicaStore, maxRows: Int) async throws {
        while true {
            let delta = try from.delta(since: try to.versionVector(), maxRows: maxRows)
            if delta.isEmpty { return }
            _ = try await to.merge(try to.check(delta))
        }
    }

    static func countsOf(_ store: ReplicaStore, table: String) throws -> (byRowid: Int, byKey: Int) {
        try store.readInternals { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM app_rowid_states")!,
                try Int.fetchOne(
                    db,
                    sql: "SELECT count(*) FROM app_rows r JOIN app_tables t ON t.num = r.tbl WHERE t.name = ?",
                    arguments: [table]
                )!
            )
        }
    }
}
