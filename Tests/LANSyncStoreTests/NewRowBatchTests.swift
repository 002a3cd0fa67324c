import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

@testable import LANSyncStore

/// A merge writes the new rows of a checked delta many to a statement
/// (`WriteContext.mergeNewRows`); whatever the delta holds, the replica ends exactly where the
/// general way, one change at a time, takes it.
@Suite struct NewRowBatchTests {
    /// The sender's tables. The receivers declare `scores` with a CHECK the sender's app does
    /// not have: rows it refuses are kept as states and left out of the table, alone.
    static let senderSchema = """
        -- lansync: counter athletes.xp
        CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight REAL, notes TEXT, xp INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE scores (id TEXT PRIMARY KEY, points INTEGER, label TEXT);
        """
    static let receiverSchema = senderSchema.replacingOccurrences(
        of: "points INTEGER,",
        with: "points INTEGER CHECK (points IS NULL OR points >= 0),"
    )

    static func store(_ number: UInt8, schema: String) throws -> ReplicaStore {
        let store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!)
        _ = try store.applySchema(schema)
        return store
    }

    /// What a replica's app tables show, and the live rows each table counts.
    static func shown(_ store: ReplicaStore) throws -> [String] {
        try store.readInternals { db in
            try Row.fetchAll(db, sql: "SELECT * FROM athletes ORDER BY id").map(\.description)
                + Row.fetchAll(db, sql: "SELECT * FROM scores ORDER BY id").map(\.description)
                + Row.fetchAll(db, sql: "SELECT name, row_count FROM app_tables ORDER BY name").map(\.description)
        }
    }

    static func states(_ store: ReplicaStore) throws -> [RowKey: RowState] {
        var states = [RowKey: RowState]()
        try store.forEachAppRow { states[$0] = $1 }
        return states
    }

    /// Random writes on one replica (inserts into both tables interleaved in one write, some
    /// the receivers' CHECK refuses; edits, deletes, re-inserts, counter increments), sent in
    /// deltas of random sizes, some twice. One receiver checks each delta with its own numbers
    /// (as a session does), so new rows come encoded and go in batches; the other merges each
    /// change the general way. Both end with the sender's digest and states, and show the same rows.
    @Test func newRowsInBatchesEndWhereTheGeneralWayDoes() async {
        await propertyCheck(count: 25, input: Gen.int(in: 0...1_000_000).array(of: 3...30)) { steps in
            do {
                let sender = try Self.store(1, schema: Self.senderSchema)
                let (batched, general) = (
                    try Self.store(2, schema: Self.receiverSchema), try Self.store(3, schema: Self.receiverSchema)
                )
                var now: UInt64 = 1_000
                // A first row in each table, every column set, so that the receivers number them all.
                _ = try await sender.write(now: now) { db in
                    try db.execute(sql: "INSERT INTO athletes VALUES ('first', 'n', 1.5, 'x', 1)")
                    try db.execute(sql: "INSERT INTO scores VALUES ('first', 1, 'x')")
                }
                for receiver in [batched, general] {
                    _ = try await receiver.merge(try sender.delta(since: VersionVector(), maxRows: 10))
                }
                for (number, step) in steps.enumerated() {
                    now += 10
                    let count = 1 + step % 40
                    let first = (step / 40) % 60
                    _ = try await sender.write(now: now) { db in
                        // The first write inserts: every schedule brings new rows.
                        switch number == 0 ? 0 : (step / 7) % 4 {
                        case 0, 1:
                            for index in first..<(first + count) {
                                try db.execute(
                                    sql:
                                        "INSERT OR REPLACE INTO athletes (id, name, weight, notes) VALUES (?, ?, ?, ?)",
                                    arguments: [
                                        "a\(index)", "n\(number)", Double(index) / 4,
                                        index % 3 == 0 ? nil : "note \(index)",
                                    ]
                                )
                                if index % 2 == number % 2 {
                                    // Negative points: the receivers' CHECK refuses them.
                                    try db.execute(
                                        sql: "INSERT OR REPLACE INTO scores (id, points, label) VALUES (?, ?, ?)",
                                        arguments: ["s\(index)", index % 5 == 0 ? -index : index, "l\(number)"]
                                    )
                                }
                            }
                        case 2:
                            try db.execute(
                                sql: "UPDATE athletes SET xp = xp + 3, name = ? WHERE id >= ? AND id < ?",
                                arguments: ["e\(number)", "a\(first)", "a\(first + 5)"]
                            )
                            try db.execute(
                                sql: "UPDATE scores SET points = ? WHERE id >= ? AND id < ?",
                                arguments: [number, "s\(first)", "s\(first + 9)"]
                            )
                        default:
                            try db.execute(
                                sql: "DELETE FROM athletes WHERE id >= ? AND id < ?",
                                arguments: ["a\(first)", "a\(first + count / 2)"]
                            )
                            try db.execute(
                                sql: "DELETE FROM scores WHERE id >= ? AND id < ?",
                                arguments: ["s\(first)", "s\(first + count / 3)"]
                            )
                        }
                    }
                }
                var encoded = 0
                var known = try batched.versionVector()
                for (index, step) in steps.enumerated() {
                    let delta = try sender.delta(since: known, maxRows: 1 + (step * 7 + index) % 37)
                    if delta.isEmpty { break }
                    known.advance(by: delta.coverage)
                    let checked = try batched.check(delta)
                    encoded += checked.firstRows.filter { $0.stored != nil }.count
                    _ = try await batched.merge(checked)
                    // Sent twice: every row of it is held now.
                    if step % 3 == 0 { _ = try await batched.merge(try batched.check(delta)) }
                    _ = try await general.merge(delta)
                }
                for receiver in [batched, general] {
                    while true {
                        let rest = try sender.delta(since: try receiver.versionVector(), maxRows: 500)
                        if rest.isEmpty { break }
                        _ = try await receiver.merge(try receiver.check(rest))
                    }
                }
                #expect(encoded > 0, "no change came encoded by the check")
                let digest = try sender.status().digest
                for receiver in [batched, general] {
                    #expect(try receiver.status().digest == digest)
                    #expect(try receiver.recomputeDigest() == digest)
                    #expect(try Self.states(receiver) == Self.states(sender))
                }
                #expect(try Self.shown(batched) == Self.shown(general))
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
