import Foundation
import GRDB
import LANSync
import LANSyncCore

/// What an app table costs on disk beside the same rows in a plain SQLite file (WAL, the same
/// schema and statements, SQLite's default page size, as an app without sync would have it):
/// the writer's replica and a peer's that merged the rows, each checkpointed, for an
/// append-only table and a mutable one. Sizes do not vary from run to run, so one run is the
/// figure. The goals: an append-only table at most 1.3 times the plain file, a mutable one at
/// most 1.6 times.
struct StorageBenchmark {
    let root: String
    let rows: Int

    static let goals: [Bool: Double] = [true: 1.3, false: 1.6]

    func run() async throws {
        print("Storage: \(rows) rows of the 10-column table (1,000 a transaction), file sizes after a checkpoint")
        for appendOnly in [true, false] {
            let schema = (appendOnly ? "-- lansync: append-only sets\n" : "") + AppTableBenchmark.table
            let plainPath = root + "/storage-plain-\(appendOnly).sqlite"
            let plain = try DatabasePool(path: plainPath)
            try await plain.write { db in try db.execute(sql: AppTableBenchmark.table) }
            let writer = try AppTableBenchmark.node(at: root + "/storage-writer-\(appendOnly)", schema: schema)
            let peer = try AppTableBenchmark.node(at: root + "/storage-peer-\(appendOnly)", schema: schema)
            let rows = rows
            for first in stride(from: 0, to: rows, by: 1_000) {
                let range = first..<min(first + 1_000, rows)
                try await plain.write { db in
                    let insert = try db.cachedStatement(sql: AppTableBenchmark.insert)
                    for index in range { try insert.execute(arguments: AppTableBenchmark.arguments(index)) }
                }
                try await writer.write { db in
                    let insert = try db.cachedStatement(sql: AppTableBenchmark.insert)
                    for index in range { try insert.execute(arguments: AppTableBenchmark.arguments(index)) }
                }
            }
            try await writer.store.extendOwnChain()
            let keys = [writer.replicaID: writer.identity.signingKey.publicKey]
            for batch in try AppTableBenchmark.deltas(of: writer) {
                _ = try await peer.store.mergeSigned(batch, keys: keys)
            }
            let (merged, written) = (try peer.status().digest, try writer.status().digest)
            precondition(merged == written, "the merged replica differs from its writer")
            let plainBytes = try Self.checkpointedSize(plainPath)
            print("    \(appendOnly ? "append-only" : "mutable") table: plain SQLite \(Self.megabytes(plainBytes))")
            for (label, node) in [("writer's replica", writer), ("peer's replica", peer)] {
                let bytes = try Self.checkpointedSize(node.dataDirectory.path + "/replica.sqlite")
                let ratio = Double(bytes) / Double(plainBytes)
                let goal = Self.goals[appendOnly]!
                GoalRecord.record(
                    "storage, \(appendOnly ? "append-only" : "mutable") table, \(label)",
                    figure: String(
                        format: "%.2f × plain SQLite (%.1f MB against %.1f MB)",
                        ratio,
                        Double(bytes) / 1e6,
                        Double(plainBytes) / 1e6
                    ),
                    goal: String(format: "≤ %.1f × plain SQLite", goal),
                    met: ratio <= goal
                )
                print(
                    "        \(label.padding(toLength: 17, withPad: " ", startingAt: 0)) \(Self.megabytes(bytes))   "
                        + String(
                            format: "%.2f x plain (goal <= %.1f: %@)",
                            ratio,
                            goal,
                            ratio <= goal ? "met" : "NOT met"
                        )
                )
            }
            print(
                "        where the writer's bytes go: "
                    + (try Self.breakdown(writer.dataDirectory.path + "/replica.sqlite"))
            )
        }
        print("")
        fflush(nil)
    }

    static func megabytes(_ bytes: Int) -> String { String(format: "%6.1f MB", Double(bytes) / 1e6) }

    /// The file's size once its WAL is written back (read through a connection of its own, which
    /// sees every commit: the nodes' writers are idle by now).
    static func checkpointedSize(_ path: String) throws -> Int {
        let queue = try DatabaseQueue(path: path)
        return try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            return try Int.fetchOne(
                db,
                sql: "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
            )!
        }
    }

    /// The largest tables and indexes of a file, in megabytes (SQLite's `dbstat`).
    static func breakdown(_ path: String) throws -> String {
        let queue = try DatabaseQueue(path: path)
        return try queue.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC LIMIT 5"
            )
            .map { row in "\(row["name"] as String) \(String(format: "%.1f", Double(row["bytes"] as Int) / 1e6))" }
            .joined(separator: ", ")
        }
    }
}
