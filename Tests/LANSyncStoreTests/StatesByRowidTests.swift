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
        try await AppendOnlyCascadeTests.strokes(store, session: "s1", count: 5, from: 30, now: 2_001)
        #expect(try Self.counts(store) == (5, 40))
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
}
