import Foundation
import GRDB
import GRDBSQLite
import LANSync

/// The yardstick: the same rows inserted into a plain SQLite table (same columns, a primary key
/// on id, no other index, no bookkeeping) through one prepared statement, in batched
/// transactions, with the same durability settings as a replica (WAL, synchronous=FULL).
///
/// `raw` binds through SQLite's C API, as the store's hot paths do: the baseline the goals are
/// measured against. `throughGRDB` binds with GRDB's `execute(arguments:)`, for reference: what
/// the same loop costs written the ordinary Swift way.
enum Baseline {
    enum Binding { case raw, throughGRDB }

    /// The median of three runs, each into a new file: a single 100,000-row run takes a quarter
    /// of a second, and its rate varied from 357k to 428k rows/s between runs of the benchmark.
    static func medianInsert(_ entries: [Entry], batch: Int, directory: String, binding: Binding) throws -> Duration {
        let times = try (1...3).map { run in
            try insert(entries, batch: batch, path: directory + "/baseline-\(binding)-\(run).sqlite", binding: binding)
        }
        return times.sorted()[1]
    }

    static func insert(_ entries: [Entry], batch: Int, path: String, binding: Binding) throws -> Duration {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE rows (id TEXT NOT NULL PRIMARY KEY, stream TEXT NOT NULL, origin_device BLOB NOT NULL,
                    replica INTEGER NOT NULL, counter INTEGER NOT NULL, hlc INTEGER NOT NULL, wall_ms INTEGER NOT NULL,
                    payload TEXT NOT NULL)
                    """
            )
        }
        let clock = ContinuousClock()
        let start = clock.now
        var index = 0
        while index < entries.count {
            let end = min(index + batch, entries.count)
            let slice = entries[index..<end]
            try pool.write { db in
                let statement = try db.cachedStatement(sql: "INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
                switch binding {
                case .raw: try insertRaw(slice, statement.sqliteStatement)
                case .throughGRDB:
                    for entry in slice {
                        try statement.execute(arguments: [
                            entry.id, entry.stream, Data(entry.originDevice.bytes), 1, Int64(entry.dot.counter),
                            Int64(entry.hlc.rawValue), entry.wallMilliseconds, entry.payload,
                        ])
                    }
                }
            }
            index = end
        }
        return clock.now - start
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private static func insertRaw(_ entries: ArraySlice<Entry>, _ statement: OpaquePointer) throws {
        func bind(_ index: Int32, _ text: String) {
            var text = text
            text.withUTF8 { _ = sqlite3_bind_text(statement, index, $0.baseAddress, Int32($0.count), transient) }
        }
        for entry in entries {
            bind(1, entry.id)
            bind(2, entry.stream)
            entry.originDevice.bytes.withUnsafeBytes {
                _ = sqlite3_bind_blob(statement, 3, $0.baseAddress, Int32($0.count), transient)
            }
            sqlite3_bind_int64(statement, 4, 1)
            sqlite3_bind_int64(statement, 5, Int64(entry.dot.counter))
            sqlite3_bind_int64(statement, 6, Int64(entry.hlc.rawValue))
            sqlite3_bind_int64(statement, 7, entry.wallMilliseconds)
            bind(8, entry.payload)
            let code = sqlite3_step(statement)
            sqlite3_reset(statement)
            guard code == SQLITE_DONE else { throw DatabaseError(resultCode: ResultCode(rawValue: code)) }
        }
    }
}
