import Foundation
import GRDB
import LANSync

/// The yardstick: the same rows inserted into a plain SQLite table (same columns, a primary key
/// on id, no indexes or bookkeeping) through one prepared statement, in batched transactions,
/// with the same durability settings as a replica (WAL, synchronous=FULL).
enum Baseline {
    static func insert(_ entries: [Entry], batch: Int, directory: String) throws -> Duration {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let pool = try DatabasePool(path: directory + "/baseline.sqlite", configuration: configuration)
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE rows (id TEXT NOT NULL PRIMARY KEY, stream TEXT NOT NULL, origin_device BLOB NOT NULL,
                    replica INTEGER NOT NULL, counter INTEGER NOT NULL, hlc INTEGER NOT NULL, wall_ms INTEGER NOT NULL,
                    payload TEXT NOT NULL)
                    """)
        }
        let clock = ContinuousClock()
        let start = clock.now
        var index = 0
        while index < entries.count {
            let end = min(index + batch, entries.count)
            let slice = entries[index..<end]
            try pool.write { db in
                let statement = try db.cachedStatement(sql: "INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
                for entry in slice {
                    try statement.execute(arguments: [
                        entry.id, entry.stream, Data(entry.originDevice.bytes), 1, Int64(entry.dot.counter),
                        Int64(entry.hlc.rawValue), entry.wallMilliseconds, entry.payload,
                    ])
                }
            }
            index = end
        }
        return clock.now - start
    }
}
