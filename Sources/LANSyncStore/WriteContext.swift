import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto

/// The state one write transaction works on: this replica's metadata, the replica numbering and
/// version vector, the clock and the digest, loaded at the start and saved at the end, so each
/// row written costs one statement and the bookkeeping costs a few per transaction.
///
/// Every mutation of entries and preferences goes through `mergeEntry`/`mergePreference`, which
/// apply `MergeRule` and keep the digest and counts in step with the rows.
struct WriteContext {
    let db: Database
    let replica: ReplicaID
    let device: DeviceID
    private(set) var clock: HybridLogicalClock
    private(set) var digest: StateDigest
    private(set) var entryCount: Int
    private(set) var preferenceCount: Int
    private(set) var numbers: [ReplicaID: Int64]
    private(set) var counters: [ReplicaID: UInt64]
    private(set) var replicasByNumber: [Int64: ReplicaID]
    private var changedCounters: Set<ReplicaID> = []
    let hasher: ElementHasher

    init(_ db: Database, hasher: ElementHasher) throws {
        self.db = db
        self.hasher = hasher
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT replica_id, device_id, hlc, digest, entry_count, preference_count FROM meta")
        else { throw StoreError(.notInitialized, "this replica has no metadata; run `lansync init`") }
        replica = ReplicaID(bytes: [UInt8](row[0] as Data))!
        device = DeviceID(bytes: [UInt8](row[1] as Data))!
        clock = HybridLogicalClock(last: HybridTimestamp(rawValue: UInt64(row[2] as Int64)))
        digest = StateDigest(bytes: [UInt8](row[3] as Data)) ?? StateDigest()
        entryCount = row[4]
        preferenceCount = row[5]
        var numbers: [ReplicaID: Int64] = [:]
        var counters: [ReplicaID: UInt64] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT num, replica_id, counter FROM replicas") {
            let id = ReplicaID(bytes: [UInt8](row[1] as Data))!
            numbers[id] = row[0]
            counters[id] = UInt64(row[2] as Int64)
        }
        self.numbers = numbers
        self.counters = counters
        replicasByNumber = Dictionary(uniqueKeysWithValues: numbers.map { ($0.value, $0.key) })
    }

    var versionVector: VersionVector { VersionVector(counters) }

    /// The local number of a replica, registering it on first sight.
    mutating func number(of id: ReplicaID) throws -> Int64 {
        if let number = numbers[id] { return number }
        try db.execute(sql: "INSERT INTO replicas (replica_id, counter) VALUES (?, 0)", arguments: [Data(id.bytes)])
        let number = db.lastInsertedRowID
        numbers[id] = number
        replicasByNumber[number] = id
        counters[id] = 0
        return number
    }

    /// The next dot of this replica.
    mutating func nextDot() -> Dot {
        let counter = (counters[replica] ?? 0) + 1
        counters[replica] = counter
        changedCounters.insert(replica)
        return Dot(replica: replica, counter: counter)
    }

    mutating func tick(now: UInt64) -> HybridTimestamp { clock.tick(now: now) }

    /// Moves the clock up to a reading seen in merged rows (already checked against the skew bound).
    mutating func observe(_ reading: HybridTimestamp) {
        if reading > clock.last { clock = HybridLogicalClock(last: reading) }
    }

    mutating func advance(by coverage: [Delta.Coverage]) throws {
        var vector = versionVector
        vector.advance(by: coverage)
        for range in coverage where vector[range.replica] != (counters[range.replica] ?? 0) {
            _ = try number(of: range.replica)
            counters[range.replica] = vector[range.replica]
            changedCounters.insert(range.replica)
        }
    }

    // MARK: Entries

    func entry(id: String) throws -> Entry? {
        let statement = try db.cachedStatement(
            sql: "SELECT id, stream, origin_device, replica, counter, hlc, wall_ms, payload FROM entries WHERE id = ?")
        return try Row.fetchOne(statement, arguments: [id]).map { try RowDecoding.entry($0, replicas: replicasByNumber) }
    }

    /// Inserts an entry, or replaces the version held under its id when the incoming one wins.
    /// Returns whether the replica changed.
    mutating func mergeEntry(_ entry: Entry) throws -> Bool {
        let number = try number(of: entry.dot.replica)
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO entries (id, stream, origin_device, replica, counter, hlc, wall_ms, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING
                """)
        try insert.execute(arguments: [
            entry.id, entry.stream, Data(entry.originDevice.bytes), number, Int64(entry.dot.counter),
            Int64(entry.hlc.rawValue), entry.wallMilliseconds, entry.payload,
        ])
        if db.changesCount == 1 {
            digest.insert(hash: hasher.hash(entry))
            entryCount += 1
            return true
        }
        // Rare: the id is held already. Keep whichever version the merge rule picks.
        guard let existing = try self.entry(id: entry.id), MergeRule.entryReplaces(entry, existing: existing) else {
            return false
        }
        let update = try db.cachedStatement(
            sql: """
                UPDATE entries SET stream = ?, origin_device = ?, replica = ?, counter = ?, hlc = ?, wall_ms = ?,
                payload = ? WHERE id = ?
                """)
        try update.execute(arguments: [
            entry.stream, Data(entry.originDevice.bytes), number, Int64(entry.dot.counter), Int64(entry.hlc.rawValue),
            entry.wallMilliseconds, entry.payload, entry.id,
        ])
        digest.remove(hash: hasher.hash(existing))
        digest.insert(hash: hasher.hash(entry))
        return true
    }

    // MARK: Preferences

    func preference(key: String) throws -> PreferenceWrite? {
        let statement = try db.cachedStatement(
            sql: "SELECT key, value, origin_device, replica, counter, hlc, wall_ms FROM preferences WHERE key = ?")
        return try Row.fetchOne(statement, arguments: [key]).map {
            try RowDecoding.preference($0, replicas: replicasByNumber)
        }
    }

    /// Stores a preference write when it wins over the one held. Returns whether it did.
    mutating func mergePreference(_ write: PreferenceWrite) throws -> Bool {
        let existing = try preference(key: write.key)
        guard MergeRule.preferenceReplaces(write, existing: existing) else { return false }
        let number = try number(of: write.dot.replica)
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO preferences (key, value, origin_device, replica, counter, hlc, wall_ms)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        try statement.execute(arguments: [
            write.key, write.value, Data(write.originDevice.bytes), number, Int64(write.dot.counter),
            Int64(write.hlc.rawValue), write.wallMilliseconds,
        ])
        if let existing {
            digest.remove(hash: hasher.hash(existing))
        } else {
            preferenceCount += 1
        }
        digest.insert(hash: hasher.hash(write))
        return true
    }

    /// Writes the bookkeeping back: version vector entries that moved, clock, digest, counts.
    mutating func save() throws {
        let counter = try db.cachedStatement(sql: "UPDATE replicas SET counter = ? WHERE replica_id = ?")
        for id in changedCounters {
            _ = try number(of: id)
            try counter.execute(arguments: [Int64(counters[id] ?? 0), Data(id.bytes)])
        }
        changedCounters.removeAll()
        let meta = try db.cachedStatement(
            sql: "UPDATE meta SET hlc = ?, digest = ?, entry_count = ?, preference_count = ?")
        try meta.execute(arguments: [
            Int64(clock.last.rawValue), Data(digest.bytes), entryCount, preferenceCount,
        ])
    }
}

/// Turns rows back into Core values.
enum RowDecoding {
    static func entry(_ row: Row, replicas: [Int64: ReplicaID]) throws -> Entry {
        guard let replica = replicas[row[3]], let device = DeviceID(bytes: [UInt8](row[2] as Data)) else {
            throw StoreError(.database, "entry \(row[0] as String) refers to an unknown replica; the database is damaged")
        }
        return Entry(
            id: row[0], stream: row[1], originDevice: device,
            dot: Dot(replica: replica, counter: UInt64(row[4] as Int64)),
            hlc: HybridTimestamp(rawValue: UInt64(row[5] as Int64)), wallMilliseconds: row[6], payload: row[7])
    }

    static func preference(_ row: Row, replicas: [Int64: ReplicaID]) throws -> PreferenceWrite {
        guard let replica = replicas[row[3]], let device = DeviceID(bytes: [UInt8](row[2] as Data)) else {
            throw StoreError(.database, "preference \(row[0] as String) refers to an unknown replica; the database is damaged")
        }
        return PreferenceWrite(
            key: row[0], value: row[1], originDevice: device,
            dot: Dot(replica: replica, counter: UInt64(row[4] as Int64)),
            hlc: HybridTimestamp(rawValue: UInt64(row[5] as Int64)), wallMilliseconds: row[6])
    }
}
