import Foundation
import GRDB
import LANSync
import LANSyncCore

/// What each kind of column costs beside a plain last-writer-wins one: the same rows, each
/// updated once in one column, 1,000 rows a transaction, and those updates merged into a replica
/// that holds the rows (the signed deltas a peer receives). The kinds alternate within each
/// round (plain, counter, max, REAL counter), so a noisy machine slows them alike.
struct ColumnKindsBenchmark {
    let root: String
    let rows: Int
    private let rounds = 3
    private var files = 0

    static let schema = """
        CREATE TABLE kinds (id TEXT PRIMARY KEY, plain INTEGER NOT NULL DEFAULT 0, hits INTEGER NOT NULL DEFAULT 0,
            best INTEGER NOT NULL DEFAULT 0, secs REAL NOT NULL DEFAULT 0);
        -- lansync: counter kinds.hits
        -- lansync: max kinds.best
        -- lansync: counter kinds.secs
        """

    /// Each kind's update of one row: its label and statement (arguments: a value, the key).
    static let kinds: [(label: String, sql: String)] = [
        ("plain (last writer wins)", "UPDATE kinds SET plain = ? WHERE id = ?"),
        ("counter", "UPDATE kinds SET hits = hits + ? WHERE id = ?"),
        ("max", "UPDATE kinds SET best = ? WHERE id = ?"),
        ("REAL counter", "UPDATE kinds SET secs = secs + ? * 0.25 WHERE id = ?"),
    ]

    init(root: String, rows: Int) {
        self.root = root
        self.rows = rows
    }

    private mutating func freshNode() throws -> LANSyncNode {
        files += 1
        return try AppTableBenchmark.node(at: root + "/kinds-node-\(files)", schema: Self.schema)
    }

    static func key(_ index: Int) -> String { AppTableBenchmark.uuid(index) }

    mutating func run() async throws {
        print(
            "Column kinds: \(rows) rows each updated once in one column (1,000 a transaction), then merged by a peer that holds"
        )
        print("the rows; the kinds alternate, \(rounds) rounds, medians [ranges], ratios against the plain column")
        let clock = ContinuousClock()
        var writes = [[Double]](repeating: [], count: Self.kinds.count)
        var merges = [[Double]](repeating: [], count: Self.kinds.count)
        for round in 0..<rounds {
            for (kind, update) in Self.kinds.enumerated() {
                let source = try freshNode()
                let target = try freshNode()
                let rows = rows
                for first in stride(from: 0, to: rows, by: 1_000) {
                    try await source.write { db in
                        let insert = try db.cachedStatement(sql: "INSERT INTO kinds (id) VALUES (?)")
                        for index in first..<min(first + 1_000, rows) {
                            try insert.execute(arguments: [Self.key(index)])
                        }
                    }
                }
                try await source.store.extendOwnChain()
                let keys = [source.replicaID: source.identity.signingKey.publicKey]
                for batch in try AppTableBenchmark.deltas(of: source) {
                    _ = try await target.store.mergeSigned(batch, keys: keys)
                }
                let before = try source.store.versionVector()

                var start = clock.now
                for first in stride(from: 0, to: rows, by: 1_000) {
                    try await source.write { db in
                        let statement = try db.cachedStatement(sql: update.sql)
                        for index in first..<min(first + 1_000, rows) {
                            try statement.execute(arguments: [index % 97 + 1 + round, Self.key(index)])
                        }
                    }
                }
                writes[kind].append(Double(rows) / (clock.now - start).seconds)

                try await source.store.extendOwnChain()
                let batches = try AppTableBenchmark.deltas(of: source, since: before)
                start = clock.now
                for batch in batches { _ = try await target.store.mergeSigned(batch, keys: keys) }
                merges[kind].append(Double(rows) / (clock.now - start).seconds)
                let (merged, written) = (try target.status().digest, try source.status().digest)
                precondition(merged == written, "the merged replica differs from its source")
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        for (title, figures) in [("write (rows/s)", writes), ("merge (rows/s)", merges)] {
            print(title)
            for (kind, values) in figures.enumerated() {
                let sorted = values.sorted()
                let label = Self.kinds[kind].label.padding(toLength: 26, withPad: " ", startingAt: 0)
                print(
                    "    " + label
                        + String(
                            format: "%7.0f [%.0f-%.0f]   %.2f x plain",
                            median(values),
                            sorted[0],
                            sorted[sorted.count - 1],
                            median(values) / median(figures[0])
                        )
                )
            }
        }
        print("")
        fflush(nil)
    }
}
