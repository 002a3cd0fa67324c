import Foundation
import GRDB
package import LANSyncCore

/// Replicas' change chains as this replica holds them (docs/signed-changes.md): the signed heads,
/// and the leaves of a replica's changes rebuilt from what is stored — the rows that win and the
/// stubs of those that lost.
extension ReplicaStore {
    /// The latest head of `replica`'s chain this replica holds, with its signature (nil while
    /// unsigned); nil when it holds none.
    package func chainHead(of replica: ReplicaID) throws(StoreError) -> SignedChainPoint? {
        try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return nil }
                let row = try Row.fetchOne(db, sql: "SELECT counter, hash, signature FROM chain_heads WHERE replica = ?", arguments: [number])
                return row.map {
                    SignedChainPoint(
                        head: ChainHead(replica: replica, counter: UInt64($0[0] as Int64), hash: [UInt8]($0[1] as Data)),
                        signature: ($0[2] as Data?).map { [UInt8]($0) })
                }
            }
        }
    }

    /// The points kept of `replica`'s chain (its genesis and every 256th counter), in counter order.
    package func chainPoints(of replica: ReplicaID) throws(StoreError) -> [SignedChainPoint] {
        try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return [] }
                return try Row.fetchAll(
                    db, sql: "SELECT dot, hash, signature FROM chain_points WHERE dot >= ? AND dot <= ? ORDER BY dot",
                    arguments: [DotKey.key(number: number, counter: 0), DotKey.key(number: number, counter: Dot.maxCounter)]
                ).map {
                    SignedChainPoint(
                        head: ChainHead(replica: replica, counter: DotKey.counter($0[0]), hash: [UInt8]($0[1] as Data)),
                        signature: ($0[2] as Data?).map { [UInt8]($0) })
                }
            }
        }
    }

    /// The leaves of `replica`'s changes with counters in `(from, through]` that this replica holds,
    /// in counter order: each rebuilt from the change as stored, or from its stub when it lost.
    /// A counter missing from the result is one this replica holds nothing of.
    package func chainLeaves(of replica: ReplicaID, from: UInt64, through: UInt64) throws(StoreError) -> [(counter: UInt64, leaf: [UInt8])] {
        let hasher = hasher
        return try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return [] }
                let (lower, upper) = (DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through))
                let replicas = try Self.replicaNumbers(db)
                let tables = Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT num, name FROM app_tables").map { ($0[0] as Int64, $0[1] as String) })
                var leaves: [(counter: UInt64, leaf: [UInt8])] = []
                for sql in ["SELECT \(RowDecoding.entryColumns) FROM entries", "SELECT \(RowDecoding.entryColumns) FROM entry_stubs"] {
                    for row in try Row.fetchAll(db, sql: sql + " WHERE dot > ? AND dot <= ?", arguments: [lower, upper]) {
                        let entry = try RowDecoding.entry(row, replicas: replicas)
                        leaves.append((entry.dot.counter, ChangeLeaf.entry(entry, hasher: hasher)))
                    }
                }
                for row in try Row.fetchAll(
                    db, sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE dot > ? AND dot <= ?", arguments: [lower, upper])
                {
                    let write = try RowDecoding.preference(row, replicas: replicas)
                    leaves.append((write.dot.counter, ChangeLeaf.preference(write, hasher: hasher)))
                }
                for row in try Row.fetchAll(
                    db, sql: "SELECT dot, key, hlc, element_hash FROM preference_stubs WHERE dot > ? AND dot <= ?", arguments: [lower, upper])
                {
                    let stub = PreferenceStub(
                        key: row[1], hlc: HybridTimestamp(rawValue: UInt64(row[2] as Int64)), dot: try RowDecoding.dot(row[0], replicas: replicas),
                        elementHash: [UInt8](row[3] as Data))
                    leaves.append((stub.dot.counter, ChangeLeaf.preference(stub, hasher: hasher)))
                }
                // App-table changes: live ones rebuilt from their row's state (and their stub when a
                // part of them lost), superseded ones from their stub alone.
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT o.dot, o.tbl, o.key, o.stub, r.state FROM app_ops o JOIN app_rows r ON r.tbl = o.tbl AND r.key = o.key
                        WHERE o.dot > ? AND o.dot <= ?
                        UNION ALL
                        SELECT s.dot, s.tbl, s.key, s.stub, NULL FROM row_stubs s WHERE s.dot > ? AND s.dot <= ?
                        """,
                    arguments: [lower, upper, lower, upper])
                for row in rows {
                    let dot = try RowDecoding.dot(row[0], replicas: replicas)
                    guard let table = tables[row[1]] else {
                        throw StoreError(.database, "change \(dot) names app table \(row[1] as Int64), which is not registered; the database is damaged")
                    }
                    let key = RowKey(table: table, primaryKey: try SQLValue.key(from: [UInt8](row[2] as Data)))
                    let state = try (row[4] as Data?).map { try RowState(canonicalBytes: [UInt8]($0)) } ?? RowState()
                    let change: RowChange
                    var lost: [RowChange.LostCell] = []
                    if let stubBytes = row[3] as Data? {
                        let stub = try RowChangeStub(canonicalBytes: [UInt8](stubBytes))
                        change = stub.change(key: key, dot: dot, in: state)
                        lost = stub.lost
                    } else if let shown = state.change(key: key, dot: dot) {
                        change = shown
                    } else {
                        throw StoreError(.database, "change \(dot) of \(key) is indexed but not in its row; the database is damaged")
                    }
                    guard let leaf = change.leaf(lost: lost, hasher: hasher) else {
                        throw StoreError(.database, "the stub of change \(dot) of \(key) names a column twice; the database is damaged")
                    }
                    leaves.append((dot.counter, leaf))
                }
                leaves.sort { $0.counter < $1.counter }
                return leaves
            }
        }
    }

    static func number(of replica: ReplicaID, _ db: Database) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT num FROM replicas WHERE replica_id = ?", arguments: [Data(replica.bytes)])
    }
}

/// A head of a replica's chain as stored, with the device's signature (nil while unsigned: a
/// replica's own head written by a tool that did not hold the device's key).
package struct SignedChainPoint: Hashable, Sendable {
    package let head: ChainHead
    package let signature: [UInt8]?

    /// The head with its signature, once signed.
    package var signed: SignedHead? { signature.map { SignedHead(head: head, signature: $0) } }
}
