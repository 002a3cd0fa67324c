import Foundation
import GRDB
import LANSync
import LANSyncCore

/// What an app table costs on disk beside the same rows in a plain SQLite file (WAL, the same
/// schema and statements, SQLite's default page size, as an app without sync would have it):
/// the writer's replica and a peer's that merged the rows, each checkpointed, for an
/// append-only table and a mutable one. Sizes do not vary from run to run, so one run is the
/// figure. The goals: an append-only table at most 1.3 times the plain file, a mutable one at
/// most 1.6 times. Each with two kinds of keys: the table benchmark's UUIDs, which count up in
/// their last digits (as many apps' time-ordered IDs do), and random ones (version 4, as most
/// apps make them, made from the row's number so that every run writes the same), which share
/// nothing from row to row and so cost the dot index the most (`DotRun`). Beside the sizes, the
/// time of the writer's transactions against the plain file's (alternated, 1,000 rows each) and
/// of the peer's merge: what the layout costs in speed, on a table of each kind.
struct StorageBenchmark {
    let root: String
    let rows: Int

    static let goals: [Bool: Double] = [true: 1.3, false: 1.6]

    func run() async throws {
        print("Storage: \(rows) rows of the 10-column table (1,000 a transaction), file sizes after a checkpoint")
        for (appendOnly, randomKeys) in [(true, false), (false, false), (true, true), (false, true)] {
            let kind = (appendOnly ? "append-only" : "mutable") + (randomKeys ? ", random keys" : "")
            let tag = "\(appendOnly)\(randomKeys ? "-random" : "")"
            @Sendable func arguments(_ index: Int) -> StatementArguments {
                AppTableBenchmark.arguments(
                    index,
                    id: randomKeys ? Self.randomUUID(index) : AppTableBenchmark.uuid(index)
                )
            }
            let schema = (appendOnly ? "-- lansync: append-only sets\n" : "") + AppTableBenchmark.table
            let plainPath = root + "/storage-plain-\(tag).sqlite"
            let plain = try DatabasePool(path: plainPath)
            try await plain.write { db in try db.execute(sql: AppTableBenchmark.table) }
            let writer = try AppTableBenchmark.node(at: root + "/storage-writer-\(tag)", schema: schema)
            let peer = try AppTableBenchmark.node(at: root + "/storage-peer-\(tag)", schema: schema)
            let rows = rows
            // The plain file's and the writer's transactions alternate (A B A B), each timed.
            let clock = ContinuousClock()
            var (plainSeconds, writeSeconds) = (0.0, 0.0)
            for first in stride(from: 0, to: rows, by: 1_000) {
                let range = first..<min(first + 1_000, rows)
                var start = clock.now
                try await plain.write { db in
                    let insert = try db.cachedStatement(sql: AppTableBenchmark.insert)
                    for index in range { try insert.execute(arguments: arguments(index)) }
                }
                plainSeconds += (clock.now - start).seconds
                start = clock.now
                try await writer.write { db in
                    let insert = try db.cachedStatement(sql: AppTableBenchmark.insert)
                    for index in range { try insert.execute(arguments: arguments(index)) }
                }
                writeSeconds += (clock.now - start).seconds
            }
            try await writer.store.extendOwnChain()
            let keys = [writer.replicaID: writer.identity.signingKey.publicKey]
            let batches = try AppTableBenchmark.deltas(of: writer)
            let mergeStart = clock.now
            // Checked as a session checks them: with the peer's numbers, so new rows go in many
            // to a statement once the writer is known.
            for batch in batches {
                _ = try await peer.store.mergeSigned(try peer.store.check(batch, signed: true), keys: keys)
            }
            let mergeSeconds = (clock.now - mergeStart).seconds
            let (merged, written) = (try peer.status().digest, try writer.status().digest)
            precondition(merged == written, "the merged replica differs from its writer")
            let plainBytes = try Self.checkpointedSize(plainPath)
            print("    \(kind) table: plain SQLite \(Self.megabytes(plainBytes))")
            for (label, node) in [("writer's replica", writer), ("peer's replica", peer)] {
                let bytes = try Self.checkpointedSize(node.dataDirectory.path + "/replica.sqlite")
                let ratio = Double(bytes) / Double(plainBytes)
                let goal = Self.goals[appendOnly]!
                GoalRecord.record(
                    "storage, \(kind) table, \(label)",
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
                String(
                    format:
                        "        time: plain inserts %.2f s, the writer's %.2f s (%.2f x plain), the peer's merge %.2f s",
                    plainSeconds,
                    writeSeconds,
                    writeSeconds / plainSeconds,
                    mergeSeconds
                )
            )
            print(
                "        where the writer's bytes go: "
                    + (try Self.breakdown(writer.dataDirectory.path + "/replica.sqlite"))
            )
        }
        print("")
        fflush(nil)
    }

    /// A version 4 UUID's text made from `index` (SplitMix64), the same in every run.
    static func randomUUID(_ index: Int) -> String {
        func mix(_ seed: UInt64) -> UInt64 {
            var z = seed &+ 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let high = mix(UInt64(index) &* 2)
        let low = mix(UInt64(index) &* 2 &+ 1)
        let bytes =
            (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
        var uuid = bytes
        uuid[6] = uuid[6] & 0x0F | 0x40
        uuid[8] = uuid[8] & 0x3F | 0x80
        return UUID(
            uuid: (
                uuid[0], uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7],
                uuid[8], uuid[9], uuid[10], uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]
            )
        ).uuidString.lowercased()
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
