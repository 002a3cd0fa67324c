import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

@testable import LANSyncStore

/// The whole machinery under random schedules: 3–5 replicas write app tables with plain SQL
/// (inserts, updates of random columns, deletes, re-inserts, counter increments), some apply a
/// newer schema midway, and deltas travel in small batches between random pairs, delivered
/// twice at random, relayed through whoever holds them. Once everyone has heard everyone, every
/// replica holds the same digest, exactly the row states a reference merge of every write gives,
/// and app tables that show those states.
@Suite struct AppTableConvergenceTests {
    static let schema = """
        -- lansync: counter athletes.xp
        -- lansync: max athletes.best
        -- lansync: counter athletes.km
        CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight REAL, notes TEXT, best INTEGER NOT NULL DEFAULT 0,
            km REAL NOT NULL DEFAULT 0, xp INTEGER NOT NULL DEFAULT 0);
        """
    static let newer =
        schema.replacingOccurrences(
            of: "xp INTEGER NOT NULL DEFAULT 0);",
            with: "xp INTEGER NOT NULL DEFAULT 0, nick TEXT);"
        )
        + "\nCREATE TABLE athletes_extra (id TEXT PRIMARY KEY, v BLOB);"
    static let keys = ["a", "b", "c"]
    static let defaults: [String: SQLValue] = [
        "name": .text(""), "weight": .null, "notes": .null, "best": .integer(0), "km": .real(0), "xp": .integer(0),
        "nick": .null,
    ]

    final class Replica {
        let store: ReplicaStore
        let key = SigningKey(derivedFrom: KeyPair.generate())
        var newer = false
        init(_ number: Int) throws {
            store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: UInt8(number), count: 16))!)
                .signingHeads(with: key)
            _ = try store.applySchema(AppTableConvergenceTests.schema)
        }
    }

    static func value(_ seed: Int) -> DatabaseValue {
        switch seed % 4 {
        case 0: return .null
        case 1: return (Double(seed % 1000) / 8).databaseValue
        case 2: return "v\(seed % 97)".databaseValue
        default: return (seed % 50).databaseValue
        }
    }

    /// One write on `replica`, chosen by `choice`; returns the changes it made (its live part).
    static func write(_ replica: Replica, _ choice: Int, now: UInt64) async throws -> [RowChange] {
        let key = keys[(choice / 5) % keys.count]
        let known = try replica.store.versionVector()
        let exists =
            try replica.store.read { db in
                try Bool.fetchOne(db, sql: "SELECT 1 FROM athletes WHERE id = ?", arguments: [key])
            } ?? false
        let columns = replica.newer ? ["name", "weight", "notes", "nick"] : ["name", "weight", "notes"]
        let column = columns[(choice / 11) % columns.count]
        let newer = replica.newer
        do {
            switch (choice / 3) % 5 {
            case 0 where !exists, 1 where !exists:
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(
                        sql: "INSERT INTO athletes (id, \(column)) VALUES (?, ?)",
                        arguments: [key, column == "name" ? "n\(choice % 13)".databaseValue : value(choice)]
                    )
                    if newer {
                        try db.execute(
                            sql: "INSERT OR REPLACE INTO athletes_extra VALUES (?, x'00ff')",
                            arguments: [key]
                        )
                    }
                }
            case 0, 1:
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(
                        sql: "UPDATE athletes SET \(column) = ? WHERE id = ?",
                        arguments: [column == "name" ? "n\(choice % 13)".databaseValue : value(choice), key]
                    )
                }
            case 2 where choice % 4 == 0:
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(
                        sql: "UPDATE athletes SET xp = xp + ? WHERE id = ?",
                        arguments: [choice % 7 - 2, key]
                    )
                }
            case 2 where choice % 4 == 2:
                // A REAL counter: fractions that do not add up exactly in binary.
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(
                        sql: "UPDATE athletes SET km = km + ? WHERE id = ?",
                        arguments: [Double(choice % 23) / 10 - 0.7, key]
                    )
                }
            case 2:
                // A one-way column: any value, below or above the best.
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(
                        sql: "UPDATE athletes SET best = ? WHERE id = ?",
                        arguments: [choice % 41 - 10, key]
                    )
                }
            case 3:
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(sql: "DELETE FROM athletes WHERE id = ?", arguments: [key])
                }
            default:
                // Upserts: the form apps use to "save" a record.
                _ = try await replica.store.write(now: now) { db in
                    try db.execute(
                        sql:
                            "INSERT INTO athletes (id, notes) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET notes = excluded.notes",
                        arguments: [key, value(choice + 1)]
                    )
                }
            }
        }
        // What the write added to this replica's own counters: its changes, as shipped.
        var mine = known
        for (id, counter) in try replica.store.versionVector().counters where id != replica.store.replica {
            mine[id] = counter
        }
        return try replica.store.delta(since: mine, maxRows: 1_000).rows
    }

    static func ship(_ from: Replica, _ to: Replica, maxRows: Int, twice: Bool) async throws {
        while true {
            let delta = try from.store.delta(since: try to.store.versionVector(), maxRows: maxRows)
            if delta.isEmpty { return }
            _ = try await to.store.merge(delta)
            if twice { _ = try await to.store.merge(delta) }
        }
    }

    @Test func randomSchedulesConvergeToTheReference() async {
        await propertyCheck(
            count: 40,
            input: Gen.int(in: 3...5),
            Gen.int(in: 0...1_000_000).array(of: 1...60)
        ) { replicaCount, steps in
            do {
                let replicas = try (1...replicaCount).map { try Replica($0) }
                var all = [RowChange]()
                var now: UInt64 = 1_000_000
                for step in steps {
                    now += UInt64(1 + step % 3)
                    let replica = replicas[step % replicaCount]
                    switch (step / 7) % 8 {
                    case 0, 1, 2, 3:
                        all += try await Self.write(replica, step / 8, now: now)
                    case 4 where !replica.newer && step % 3 == 0:
                        _ = try replica.store.applySchema(Self.newer)
                        replica.newer = true
                    default:
                        let other = replicas[(step / 64) % replicaCount]
                        if other !== replica {
                            try await Self.ship(other, replica, maxRows: 1 + step % 4, twice: step % 2 == 0)
                        }
                    }
                }
                // Everyone hears everyone (twice round, so relays carry what a direct pair missed).
                for _ in 0..<2 {
                    for from in replicas {
                        for to in replicas where to !== from { try await Self.ship(from, to, maxRows: 5, twice: false) }
                    }
                }
                var expected: [RowKey: RowState] = [:]
                for change in all { expected[change.key, default: RowState()].merge(change) }
                let digest = try replicas[0].store.status().digest
                for replica in replicas {
                    #expect(try replica.store.status().digest == digest)
                    #expect(try replica.store.recomputeDigest() == digest)
                    var held: [RowKey: RowState] = [:]
                    try replica.store.forEachAppRow { key, state in held[key] = state }
                    #expect(held == expected)
                    // The app's table shows exactly the live rows, each column its winning value or default.
                    let shown = try replica.store.read { db in
                        try Row.fetchAll(db, sql: "SELECT * FROM athletes ORDER BY id").map { row in
                            Dictionary(
                                uniqueKeysWithValues: row.columnNames.map { ($0, SQLValue(row[$0] as DatabaseValue)) }
                            )
                        }
                    }
                    let wanted = expected.filter { $0.key.table == "athletes" && $0.value.exists }
                        .sorted { "\($0.key)" < "\($1.key)" }
                        .map { key, state -> [String: SQLValue] in
                            var row = ["id": key.primaryKey[0]]
                            for column in Self.defaults.keys where column != "nick" || replica.newer {
                                row[column] = state.value(of: column) ?? Self.defaults[column]!
                            }
                            // The one-way column: the greatest value written in the row's life.
                            if let best = state.counters.first(where: { $0.name == "best" }) {
                                row["best"] = .integer(best.cells.map(\.total).max()!)
                            }
                            // The REAL counter: the sum of the totals, in millionths.
                            if let km = state.counters.first(where: { $0.name == "km" }) {
                                row["km"] = .real(Double(km.cells.reduce(Int64(0)) { $0 + $1.total }) / 1_000_000)
                            }
                            return row
                        }
                    #expect(shown == wanted)
                    // Its own changes, however others' writes superseded them, still rebuild the
                    // chain its device signed.
                    try await ChainStoreTests.expectOwnChainVerifies(replica.store, key: replica.key)
                }
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
