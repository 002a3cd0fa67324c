import Foundation
import GRDB
import LANSyncCore
import Testing

@testable import LANSyncStore

/// An append-only child declared `ON DELETE CASCADE` goes with its parent: the app deletes a
/// session, its strokes go on every device, and nothing else can delete or bring back a stroke.
@Suite struct AppendOnlyCascadeTests {
    static let schema = """
        CREATE TABLE sessions (id TEXT PRIMARY KEY, notes TEXT);
        -- lansync: append-only strokes
        CREATE TABLE strokes (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            watts REAL NOT NULL
        );
        """

    static func store(_ number: UInt8) throws -> ReplicaStore {
        let store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!)
        _ = try store.applySchema(schema)
        return store
    }

    static func count(_ store: ReplicaStore, _ sql: String) throws -> Int {
        try store.read { db in try Int.fetchOne(db, sql: sql)! }
    }

    static func strokes(
        _ store: ReplicaStore,
        session: String,
        count: Int,
        from first: Int = 0,
        now: UInt64
    ) async throws {
        _ = try await store.write(now: now) { db in
            for index in first..<(first + count) {
                try db.execute(
                    sql: "INSERT INTO strokes VALUES (?, ?, ?)",
                    arguments: ["\(session)-\(index)", session, Double(index)]
                )
            }
        }
    }

    @Test func aDeletedSessionTakesItsStrokesAlongOnEveryDevice() async throws {
        let (tablet, phone) = (try Self.store(1), try Self.store(2))
        _ = try await tablet.write(now: 1_000) { db in
            try db.execute(sql: "INSERT INTO sessions VALUES ('s1', 'morning'), ('s2', 'evening')")
        }
        try await Self.strokes(tablet, session: "s1", count: 500, now: 1_001)
        try await Self.strokes(tablet, session: "s2", count: 20, now: 1_002)
        try await AppTableStoreTests.sync(tablet, to: phone, maxRows: 200)
        #expect(try Self.count(phone, "SELECT count(*) FROM strokes") == 520)

        _ = try await phone.write(now: 2_000) { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        #expect(
            try Self.count(phone, "SELECT count(*) FROM strokes") == 20,
            "the cascade deleted the session's strokes here"
        )
        try await AppTableStoreTests.sync(phone, to: tablet, maxRows: 200)
        for store in [tablet, phone] {
            #expect(try Self.count(store, "SELECT count(*) FROM strokes WHERE session_id = 's1'") == 0)
            #expect(try Self.count(store, "SELECT count(*) FROM strokes WHERE session_id = 's2'") == 20)
            #expect(try Self.count(store, "SELECT count(*) FROM sessions") == 1)
        }
        #expect(try tablet.syncSummary().digest == phone.syncSummary().digest)
    }

    @Test func strokesAreRefusedAnyOtherDeleteAndTheirKeysAreNotUsedAgain() async throws {
        let store = try Self.store(1)
        _ = try await store.write(now: 1_000) { db in try db.execute(sql: "INSERT INTO sessions VALUES ('s1', NULL)") }
        try await Self.strokes(store, session: "s1", count: 3, now: 1_001)
        await #expect(throws: StoreError.self) {
            _ = try await store.write(now: 1_002) { db in try db.execute(sql: "DELETE FROM strokes WHERE id = 's1-0'") }
        }
        await #expect(throws: StoreError.self) {
            _ = try await store.write(now: 1_003) { db in
                try db.execute(sql: "UPDATE strokes SET watts = 1 WHERE id = 's1-0'")
            }
        }
        // INSERT OR REPLACE deletes the held row without the DELETE trigger: refused all the
        // same, and the message names what the app did, not a parent that is still there.
        do {
            _ = try await store.write(now: 1_003) { db in
                try db.execute(sql: "INSERT OR REPLACE INTO strokes VALUES ('s1-1', 's1', 5)")
            }
            Issue.record("an append-only row was replaced")
        } catch {
            #expect("\(error)".contains("which this write replaced (INSERT OR REPLACE)"), "\(error)")
        }
        #expect(try Self.count(store, "SELECT count(*) FROM strokes WHERE watts = 1") == 1)
        #expect(try Self.count(store, "SELECT count(*) FROM strokes") == 3)
        _ = try await store.write(now: 1_004) { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        #expect(try Self.count(store, "SELECT count(*) FROM strokes") == 0)
        // The session comes back under its key; a stroke under a key that went with it does not.
        _ = try await store.write(now: 1_005) { db in try db.execute(sql: "INSERT INTO sessions VALUES ('s1', 'again')")
        }
        do {
            _ = try await store.write(now: 1_006) { db in
                try db.execute(sql: "INSERT INTO strokes VALUES ('s1-0', 's1', 9)")
            }
            Issue.record("a key that went with its parent was appended again")
        } catch {
            #expect("\(error)".contains("that went with its parent"), "\(error)")
        }
        try await Self.strokes(store, session: "s1", count: 2, from: 10, now: 1_007)
        #expect(try Self.count(store, "SELECT count(*) FROM strokes") == 2)
    }

    /// Strokes appended on a device that had not heard of the delete stay, as orphans, on every
    /// device; the app may delete them, since their parent is gone.
    @Test func strokesAppendedMeanwhileStayAsOrphansTheAppMayDelete() async throws {
        let (tablet, phone) = (try Self.store(1), try Self.store(2))
        _ = try await tablet.write(now: 1_000) { db in try db.execute(sql: "INSERT INTO sessions VALUES ('s1', NULL)") }
        try await Self.strokes(tablet, session: "s1", count: 5, now: 1_001)
        try await AppTableStoreTests.sync(tablet, to: phone)
        _ = try await phone.write(now: 2_000) { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        try await Self.strokes(tablet, session: "s1", count: 3, from: 5, now: 2_001)
        try await AppTableStoreTests.sync(phone, to: tablet)
        try await AppTableStoreTests.sync(tablet, to: phone)
        for store in [tablet, phone] {
            #expect(try Self.count(store, "SELECT count(*) FROM strokes") == 3, "the three appended meanwhile")
            #expect(try store.orphans().count == 3)
        }
        _ = try await phone.write(now: 3_000) { db in try db.execute(sql: "DELETE FROM strokes WHERE session_id = 's1'")
        }
        try await AppTableStoreTests.sync(phone, to: tablet)
        for store in [tablet, phone] { #expect(try Self.count(store, "SELECT count(*) FROM strokes") == 0) }
        #expect(try tablet.syncSummary().digest == phone.syncSummary().digest)
    }
}
