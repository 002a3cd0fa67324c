import Foundation
import GRDB
package import LANSyncCore

/// Reads for apps and for sync: entries, preferences, status, the sync summary.
extension ReplicaStore {

    package func versionVector() throws(StoreError) -> VersionVector {
        try Self.database { try writer.read(Self.readVersionVector) }
    }

    /// The version vector as the `replicas` table holds it: the one place it is read.
    static func readVersionVector(_ db: Database) throws -> VersionVector {
        var vector = VersionVector()
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT replica_id, counter FROM replicas")) {
            vector[ReplicaID(bytes: [UInt8](row[0] as Data))!] = UInt64(row[1] as Int64)
        }
        return vector
    }

    /// Counts and summary. Preferences whose key starts with `reservedPrefix` (the group's
    /// records, which the node keeps under its own prefix) are not counted as preferences.
    package func status(reservedPrefix: String? = nil) throws(StoreError) -> StoreStatus {
        try Self.database {
            try writer.read { db in
                let meta = try Row.fetchOne(
                    db,
                    sql: "SELECT digest, entry_count, preference_count, hlc FROM meta"
                )!
                let tombstones = try Int.fetchOne(db, sql: "SELECT count(*) FROM preferences WHERE value IS NULL") ?? 0
                let records =
                    try reservedPrefix.map { prefix in
                        try Int.fetchOne(
                            db,
                            sql: "SELECT count(*) FROM preferences WHERE key >= ? AND key < ? AND value IS NOT NULL",
                            arguments: [prefix, Self.prefixEnd(prefix)]
                        ) ?? 0
                    } ?? 0
                let streams = try Int.fetchOne(db, sql: "SELECT count(DISTINCT stream) FROM entries") ?? 0
                let vector = try Self.readVersionVector(db)
                let preferences: Int = meta[2]
                return StoreStatus(
                    replica: replica,
                    device: device,
                    entries: meta[1],
                    preferences: preferences - tombstones - records,
                    tombstones: tombstones,
                    streams: streams,
                    digest: StateDigest(bytes: [UInt8](meta[0] as Data)) ?? StateDigest(),
                    versionVector: vector,
                    hlc: HybridTimestamp(rawValue: UInt64(meta[3] as Int64)),
                    tables: try Self.appTableCounts(db)
                )
            }
        }
    }

    /// What a peer needs to know about this replica: version vector, digest, clock. Cheap (no counting).
    package func syncSummary() throws(StoreError) -> (
        versionVector: VersionVector, digest: StateDigest, hlc: HybridTimestamp
    ) {
        try Self.database {
            try writer.read { db in
                let meta = try Row.fetchOne(db.cachedStatement(sql: "SELECT digest, hlc FROM meta"))!
                return (
                    try Self.readVersionVector(db), StateDigest(bytes: [UInt8](meta[0] as Data)) ?? StateDigest(),
                    HybridTimestamp(rawValue: UInt64(meta[1] as Int64))
                )
            }
        }
    }

    /// A value that changes whenever any process commits a change to this replica: what a
    /// running agent polls to notice writes made by the CLI.
    package func changeMarker() throws(StoreError) -> [UInt8] {
        try Self.database {
            try writer.read { db in
                let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT digest, hlc FROM meta"))!
                return [UInt8](row[0] as Data) + withUnsafeBytes(of: (row[1] as Int64).bigEndian) { Array($0) }
            }
        }
    }

    /// Tells GRDB's observers on this store (live queries) that the database changed: SQLite
    /// reports only commits made through this store's own connections, not another process's.
    /// An empty write transaction, so nothing is written.
    package func notifyObserversOfChangesElsewhere() throws(StoreError) {
        guard !isReadOnly else { return }
        try Self.database { try writer.write { db in try db.notifyChanges(in: .fullDatabase) } }
    }

    /// Recomputes the digest from every row, ignoring the stored one: for integrity checks and tests.
    package func recomputeDigest() throws(StoreError) -> StateDigest {
        var digest = StateDigest()
        _ = try Self.database {
            try forEachRow(
                entry: { digest.insert(hash: hasher.hash($0)) },
                preference: { digest.insert(hash: hasher.hash($0)) }
            )
            try forEachAppRow { key, state in
                digest.insert(hash: hasher.hash(key.canonicalBytes + state.canonicalBytes))
            }
        }
        return digest
    }

    /// Calls `body` for each entry matching `query`, oldest first (wall-clock time, then id).
    package func forEachEntry(_ query: EntryQuery, _ body: (Entry) throws -> Void) throws {
        var clauses = [String]()
        var arguments = StatementArguments()
        if let stream = query.stream {
            clauses.append("stream = ?")
            arguments += [stream]
        }
        if let since = query.since {
            clauses.append("wall_ms >= ?")
            arguments += [since]
        }
        if let until = query.until {
            clauses.append("wall_ms < ?")
            arguments += [until]
        }
        var sql = "SELECT \(RowDecoding.entryColumns) FROM entries"
        if !clauses.isEmpty { sql += " WHERE " + clauses.joined(separator: " AND ") }
        sql += " ORDER BY wall_ms, id"
        if let limit = query.limit { sql += " LIMIT \(limit)" }
        try Self.databaseCallingBack {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
                while let row = try rows.next() { try body(try RowDecoding.entry(row, replicas: replicas)) }
            }
        }
    }

    package func entries(_ query: EntryQuery) throws(StoreError) -> [Entry] {
        var result = [Entry]()
        try Self.database { try forEachEntry(query) { result.append($0) } }
        return result
    }

    package func entry(id: String) throws(StoreError) -> Entry? {
        try row("SELECT \(RowDecoding.entryColumns) FROM entries WHERE id = ?", id, RowDecoding.entry)
    }

    /// The winning write of a key (a tombstone when it was unset), or nil when never set.
    package func preference(key: String) throws(StoreError) -> PreferenceWrite? {
        try row("SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE key = ?", key, RowDecoding.preference)
    }

    /// The one row `sql` selects by `key`, decoded; nil when there is none.
    private func row<T>(
        _ sql: String,
        _ key: String,
        _ decode: (Row, [Int64: ReplicaID]) throws -> T
    ) throws(StoreError) -> T? {
        try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                return try Row.fetchOne(db, sql: sql, arguments: [key]).map { try decode($0, replicas) }
            }
        }
    }

    /// Every preference's winning write, tombstones included, ordered by key.
    package func preferences() throws(StoreError) -> [PreferenceWrite] {
        try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                return try Row.fetchAll(
                    db,
                    sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences ORDER BY key"
                ).map { try RowDecoding.preference($0, replicas: replicas) }
            }
        }
    }

    /// The winning writes of the keys that start with `prefix` (a range of the key index, not a
    /// scan): the group's member records are read on every handshake.
    package func preferences(withPrefix prefix: String) throws(StoreError) -> [PreferenceWrite] {
        try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                return try Row.fetchAll(
                    db,
                    sql:
                        "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE key >= ? AND key < ? ORDER BY key",
                    arguments: [prefix, Self.prefixEnd(prefix)]
                ).map { try RowDecoding.preference($0, replicas: replicas) }
            }
        }
    }

    /// A value that changes whenever the set of winning writes under `prefix` changes (their
    /// count and the sum of their dots): a cache of what is derived from them stays valid while
    /// it holds. One pass over the key index's range.
    package func fingerprint(ofPreferencesWithPrefix prefix: String) throws(StoreError) -> [Int64] {
        try Self.database {
            try writer.read { db in
                // Cached: a signed merge asks before every batch.
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT count(*), total(dot), max(dot) FROM preferences WHERE key >= ? AND key < ?"
                    ),
                    arguments: [prefix, Self.prefixEnd(prefix)]
                )
                return [row?[0] ?? 0, Int64(row?[1] as Double? ?? 0), row?[2] ?? 0]
            }
        }
    }

    /// A bound above every key that starts with `prefix` and below every other key after it: the
    /// prefix followed by U+10FFFF (keys are ASCII), for a range of the key index.
    private static func prefixEnd(_ prefix: String) -> String { prefix + "\u{10FFFF}" }

    /// Calls the closures for every row in one consistent read, and returns the version vector of
    /// that same snapshot: what an export writes.
    @discardableResult
    package func forEachRow(
        entry: (Entry) throws -> Void,
        preference: (PreferenceWrite) throws -> Void,
        row: (RowKey, RowState) throws -> Void = { _, _ in }
    ) throws -> VersionVector {
        try Self.databaseCallingBack {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                let entries = try Row.fetchCursor(
                    db,
                    sql: "SELECT \(RowDecoding.entryColumns) FROM entries ORDER BY id"
                )
                while let row = try entries.next() { try entry(try RowDecoding.entry(row, replicas: replicas)) }
                let preferences = try Row.fetchCursor(
                    db,
                    sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences ORDER BY key"
                )
                while let row = try preferences.next() {
                    try preference(try RowDecoding.preference(row, replicas: replicas))
                }
                try Self.forEachAppRow(db, catalogs: apps.catalogCache, row)
                return try Self.readVersionVector(db)
            }
        }
    }

    /// Runs SQLite's `PRAGMA integrity_check`; returns its complaints (empty when healthy).
    package func integrityProblems() throws(StoreError) -> [String] {
        try Self.database {
            try writer.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").filter { $0 != "ok" } }
        }
    }

    static func replicaNumbers(_ db: Database) throws -> [Int64: ReplicaID] {
        var map: [Int64: ReplicaID] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT num, replica_id FROM replicas")) {
            map[row[0]] = ReplicaID(bytes: [UInt8](row[1] as Data))!
        }
        return map
    }
}

/// One stream at a glance: how many entries, and when the newest was written.
package struct StreamSummary: Sendable, Equatable {
    package let name: String
    package let entries: Int
    /// Wall-clock milliseconds of its newest entry.
    package let newest: Int64
    /// Its entries written at or after the time `streamSummaries(since:)` was asked about.
    package let entriesSince: Int
}

extension ReplicaStore {
    /// Every stream with its entry count, newest entry and entries since `since` (wall-clock
    /// milliseconds; none by default), by name: one pass over the entries' index.
    package func streamSummaries(since: Int64 = .max) throws(StoreError) -> [StreamSummary] {
        try Self.database {
            try writer.read { db in
                try Row.fetchAll(
                    db,
                    sql:
                        "SELECT stream, count(*), max(wall_ms), total(wall_ms >= ?) FROM entries GROUP BY stream ORDER BY stream",
                    arguments: [since]
                ).map {
                    StreamSummary(name: $0[0], entries: $0[1], newest: $0[2], entriesSince: Int($0[3] as Double))
                }
            }
        }
    }
}

extension ReplicaStore {
    /// The changes received ranges said lost at their senders that have not lost here yet (see
    /// `WriteContext.openClaims`), per replica: the lowest counter of each replica's. A session
    /// that finds it lacks nothing its peer holds asks the peer to send those ranges again from
    /// just before it: the peer's copy then either carries the superseding change or the change
    /// itself, live, and the claim closes either way.
    package func openClaims() throws(StoreError) -> [ReplicaID: UInt64] {
        guard openClaimsMayExist.value else { return [:] }
        return try Self.database {
            try writer.read { db in
                var lowest: [ReplicaID: UInt64] = [:]
                let rows = try Row.fetchAll(
                    db.cachedStatement(
                        sql:
                            "SELECT r.replica_id, min(c.dot) FROM open_claims c JOIN replicas r ON r.num = c.dot >> \(DotKey.counterBits) GROUP BY r.num"
                    )
                )
                for row in rows {
                    lowest[ReplicaID(bytes: [UInt8](row[0] as Data))!] = DotKey.counter(row[1])
                }
                return lowest
            }
        }
    }

    /// The columns of app-table changes that open claims say lost at their senders, by change:
    /// what this replica lacks until a change that superseded them arrives (the group
    /// simulator's reference model leaves them out).
    package func openClaimedColumns() throws(StoreError) -> [Dot: Set<String>] {
        guard openClaimsMayExist.value else { return [:] }
        return try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                var columns: [Dot: Set<String>] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT dot, stub FROM open_claims WHERE tbl IS NOT NULL") {
                    let stub = try RowChangeStub(canonicalBytes: [UInt8](row[1] as Data))
                    columns[try RowDecoding.dot(row[0], replicas: replicas), default: []].formUnion(
                        stub.lost.filter { $0.kind == .value }.map(\.column)
                    )
                }
                return columns
            }
        }
    }
}
