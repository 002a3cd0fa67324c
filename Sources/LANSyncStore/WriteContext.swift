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
    /// Set while an app writes seed rows (`ReplicaStore.write(seed:)`): their changes take the seed clock.
    var seeding = false
    var digest: StateDigest
    private(set) var entryCount: Int
    private(set) var preferenceCount: Int
    private(set) var numbers: [ReplicaID: Int64]
    private(set) var counters: [ReplicaID: UInt64]
    private(set) var replicasByNumber: [Int64: ReplicaID]
    private var changedCounters: Set<ReplicaID> = []
    /// Device IDs as blobs, made once per transaction instead of once per row.
    private var deviceBlobs: [DeviceID: Data] = [:]
    private var insertEntryStatement: BoundStatement?
    /// Multi-row entry INSERTs by row count (`mergeEntries`).
    var insertEntriesStatements: [Int: BoundStatement] = [:]
    private var selectEntryStatement: BoundStatement?
    private let ownDeviceBlob: Data
    let hasher: ElementHasher
    /// One buffer for the canonical bytes of every entry this transaction hashes (local appends).
    private var canonicalBytes: [UInt8] = []
    /// App tables: the capture functions and the catalog (loaded on first use in the transaction).
    let apps: AppTableAccess
    var appCatalog: AppCatalog?
    var appStatements: AppRowStatements?
    /// Reads the app's rows that stored states name values of (`StoredRowState.rowValueTag`).
    var appRowReader: AppRowValues?
    /// The app's row whose captured write is being turned into changes (`LocalRow`).
    var localRow: LocalRow?
    /// Finds rows' stored states by key or by rowid (loaded on first use in the transaction).
    var storedStateLookup: StoredStates?
    /// The rows whose state was read from `app_rowid_states` in this transaction, with their
    /// rowid: a state written for such a row by key leaves its place there (`writeStateByKey`).
    var statesAtRowids: [RowAddress: Int64] = [:]
    /// The append-only rows the app's write being turned into changes deleted, so that an
    /// insert of one of their keys after it says what happened: an `INSERT OR REPLACE` over a
    /// held row deletes it first, without the table's DELETE trigger (SQLite fires it only with
    /// recursive triggers).
    var appendOnlyRowsDeletedHere: Set<RowAddress> = []
    /// The numbers stored row states give column names (loaded on first use in the transaction).
    var columnNumbering: ColumnNumbering?
    /// Per app table, what its encoded inserts share (see `WriteContext+EncodedInserts`).
    var insertLayouts: [Int64: InsertLayout] = [:]
    /// One buffer for the bytes of every first row this transaction hashes itself (`FirstRow`).
    var firstRowBuffer: [UInt8] = []
    /// New rows' dots not yet stored in the dot index, as one run (see `DotRun`).
    var pendingRun: DotRun?
    /// What `insertEncoded` reuses from row to row, and the rows it has yet to hash.
    var encodedInsertBuffers = EncodedInsertBuffers()
    /// Live app-table rows gained (or lost) per table number in this transaction.
    var rowCountChanges: [Int64: Int] = [:]
    var rowCount: Int

    init(_ db: Database, hasher: ElementHasher, apps: AppTableAccess) throws {
        self.db = db
        self.hasher = hasher
        self.apps = apps
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT replica_id, device_id, hlc, digest, entry_count, preference_count, row_count FROM meta"
                )
            )
        else { throw StoreError(.notInitialized, "this replica has no metadata; run `lansync init`") }
        replica = ReplicaID(bytes: [UInt8](row[0] as Data))!
        device = DeviceID(bytes: [UInt8](row[1] as Data))!
        ownDeviceBlob = Data(device.bytes)
        clock = HybridLogicalClock(last: HybridTimestamp(rawValue: UInt64(row[2] as Int64)))
        digest = StateDigest(bytes: [UInt8](row[3] as Data)) ?? StateDigest()
        entryCount = row[4]
        preferenceCount = row[5]
        rowCount = row[6]
        var numbers: [ReplicaID: Int64] = [:]
        var counters: [ReplicaID: UInt64] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT num, replica_id, counter FROM replicas")) {
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
        guard Int64(numbers.count) < DotKey.maxReplicaNumber else {
            throw StoreError(.database, "this replica has heard of too many replicas (\(numbers.count))")
        }
        try db.execute(sql: "INSERT INTO replicas (replica_id, counter) VALUES (?, 0)", arguments: [Data(id.bytes)])
        let number = db.lastInsertedRowID
        numbers[id] = number
        replicasByNumber[number] = id
        counters[id] = 0
        return number
    }

    /// The next dot of this replica.
    mutating func nextDot() -> Dot {
        // One dictionary access: a bulk insert takes a dot for every row.
        func increment(_ counter: inout UInt64) -> UInt64 {
            counter += 1
            return counter
        }
        let counter = increment(&counters[replica, default: 0])
        changedCounters.insert(replica)
        return Dot(replica: replica, counter: counter)
    }

    /// The clock of a change made now: the next HLC reading, or, while an app writes seed rows
    /// (`seeding`), the seed clock, which every real write's stamp follows.
    mutating func tick(now: UInt64) -> HybridTimestamp { seeding ? Self.seedClock : clock.tick(now: now) }

    /// The HLC of a seed write's changes: zero, below every reading a real write takes, so any
    /// real edit of a column wins over the seed's value of it, on every device, whichever was
    /// merged first; seeds of one row on two devices order by replica ID, as equal clocks do.
    static let seedClock = HybridTimestamp.zero

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

    /// The entry held under `id`, read through the C API as the delta's reads are: a merge looks
    /// up every entry it holds already (a range sent again, a relay's overlap), often enough that
    /// GRDB's statement cache and `Row` showed in a group simulation's profile.
    mutating func entry(id: String) throws -> Entry? {
        if selectEntryStatement == nil {
            selectEntryStatement = try BoundStatement(
                db,
                sql: "SELECT \(RowDecoding.entryColumns) FROM entries WHERE id = ?"
            )
        }
        let statement = selectEntryStatement!
        statement.bind(1, id)
        var found: Entry?
        var devices = RowDecoding.DeviceCache()
        try statement.forEachRow { columns in
            found = try RowDecoding.entry(columns, replicas: replicasByNumber, devices: &devices)
        }
        return found
    }

    /// Counts an entry a multi-row INSERT added (`mergeEntries`; its hash is in the digest).
    mutating func countInsertedEntry() { entryCount += 1 }

    /// Inserts an entry, or replaces the version held under its id when the incoming one wins.
    /// Returns whether the replica changed. `hash` is the entry's element hash when the caller
    /// has it already (a checked delta), else it is computed here.
    mutating func mergeEntry(_ entry: Entry, hash: [UInt8]? = nil) throws -> Bool {
        let key = try dotKey(entry.dot)
        let insert = try insertEntry()
        Self.bind(entry, key: key, to: insert)
        if try insert.run() == 1 {
            digest.insert(hash: hash ?? hasher.hash(entry, reusing: &canonicalBytes))
            entryCount += 1
            return true
        }
        // Rare: the id is held already (keep whichever version the merge rule picks), or the dot
        // names another operation, which only a broken or hostile replica can send.
        guard let existing = try self.entry(id: entry.id) else { throw dotReused(entry.dot) }
        if existing == entry { return false }
        guard existing.dot != entry.dot else { throw dotReused(entry.dot) }
        guard MergeRule.entryReplaces(entry, existing: existing) else {
            try keepLosingEntry(entry)
            return false
        }
        try keepLosingEntry(existing)
        try db.execute(sql: "DELETE FROM entries WHERE id = ?", arguments: [entry.id])
        Self.bind(entry, key: key, to: insert)
        guard try insert.run() == 1 else { throw dotReused(entry.dot) }
        digest.remove(hash: hasher.hash(existing, reusing: &canonicalBytes))
        digest.insert(hash: hash ?? hasher.hash(entry, reusing: &canonicalBytes))
        return true
    }

    /// Binds an entry's row (`entryInsertColumns`, in order) from parameter `first` on.
    static func bind(_ entry: Entry, key: Int64, to insert: BoundStatement, from first: Int32 = 1) {
        insert.bind(first, key)
        insert.bind(first + 1, entry.id)
        insert.bind(first + 2, entry.stream)
        insert.bind(first + 3, entry.originDevice.bytes)
        insert.bind(first + 4, Int64(entry.hlc.rawValue))
        insert.bind(first + 5, entry.wallMilliseconds)
        insert.bind(first + 6, entry.payload)
    }

    /// The `entries` columns an entry INSERT names, in the order `bind` binds them.
    static let entryInsertColumns = "entries (dot, id, stream, origin_device, hlc, wall_ms, payload)"

    /// The entry INSERT, looked up once per transaction rather than once per row (GRDB's
    /// statement cache hashes the SQL text on every lookup).
    private mutating func insertEntry() throws -> BoundStatement {
        if let insertEntryStatement { return insertEntryStatement }
        let statement = try BoundStatement(
            db,
            sql: """
                INSERT OR IGNORE INTO \(Self.entryInsertColumns) VALUES (?, ?, ?, ?, ?, ?, ?)
                """
        )
        insertEntryStatement = statement
        return statement
    }

    mutating func blob(_ device: DeviceID) -> Data {
        if device == self.device { return ownDeviceBlob }
        if let blob = deviceBlobs[device] { return blob }
        let blob = Data(device.bytes)
        deviceBlobs[device] = blob
        return blob
    }

    mutating func dotKey(_ dot: Dot) throws -> Int64 {
        try Self.checkCounter(of: dot)
        return DotKey.key(number: try number(of: dot.replica), counter: dot.counter)
    }

    /// The same for a dot whose replica's number the caller holds (its own, in a bulk insert).
    static func dotKey(_ dot: Dot, number: Int64) throws -> Int64 {
        try checkCounter(of: dot)
        return DotKey.key(number: number, counter: dot.counter)
    }

    private static func checkCounter(of dot: Dot) throws {
        guard dot.counter > 0, dot.counter <= UInt64(DotKey.counterMask) else {
            throw StoreError(.invalidDelta, "counter \(dot.counter) of replica \(dot.replica) is out of range")
        }
    }

    func dotReused(_ dot: Dot) -> StoreError {
        StoreError(.invalidDelta, "rejected a delta: operation \(dot) is already held with different contents")
    }

    // MARK: Preferences

    func preference(key: String) throws -> PreferenceWrite? {
        let statement = try db.cachedStatement(
            sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE key = ?"
        )
        return try Row.fetchOne(statement, arguments: [key]).map {
            try RowDecoding.preference($0, replicas: replicasByNumber)
        }
    }

    /// Stores a preference write when it wins over the one held. Returns whether it did.
    mutating func mergePreference(_ write: PreferenceWrite) throws -> Bool {
        let existing = try preference(key: write.key)
        if existing == write { return false }
        guard MergeRule.preferenceReplaces(write, existing: existing) else {
            try keepLosingPreference(write, elementHash: hasher.hash(write))
            return false
        }
        let key = try dotKey(write.dot)
        if existing != nil { try db.execute(sql: "DELETE FROM preferences WHERE key = ?", arguments: [write.key]) }
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO preferences (dot, key, value, origin_device, hlc, wall_ms)
                VALUES (?, ?, ?, ?, ?, ?)
                """
        )
        try statement.execute(arguments: [
            key, write.key, write.value, blob(write.originDevice), Int64(write.hlc.rawValue), write.wallMilliseconds,
        ])
        guard db.changesCount == 1 else { throw dotReused(write.dot) }
        if let existing {
            let hash = hasher.hash(existing)
            digest.remove(hash: hash)
            try keepLosingPreference(existing, elementHash: hash)
        } else {
            preferenceCount += 1
        }
        digest.insert(hash: hasher.hash(write))
        return true
    }

    /// Writes the bookkeeping back: version vector entries that moved, clock, digest, counts.
    mutating func save() throws {
        try storePendingRun()
        try saveRowCounts()
        let counter = try db.cachedStatement(sql: "UPDATE replicas SET counter = ? WHERE replica_id = ?")
        for id in changedCounters {
            _ = try number(of: id)
            try counter.execute(arguments: [Int64(counters[id] ?? 0), Data(id.bytes)])
        }
        changedCounters.removeAll()
        let meta = try db.cachedStatement(
            sql: "UPDATE meta SET hlc = ?, digest = ?, entry_count = ?, preference_count = ?, row_count = ?"
        )
        try meta.execute(arguments: [
            Int64(clock.last.rawValue), Data(digest.bytes), entryCount, preferenceCount, rowCount,
        ])
    }
}

/// Turns rows back into Core values.
enum RowDecoding {
    static let entryColumns = "dot, id, stream, origin_device, hlc, wall_ms, payload"
    static let preferenceColumns = "dot, key, value, origin_device, hlc, wall_ms"

    static func dot(_ key: Int64, replicas: [Int64: ReplicaID]) throws -> Dot {
        guard let replica = replicas[DotKey.number(key)] else {
            throw StoreError(.database, "a row refers to an unknown replica; the database is damaged")
        }
        return Dot(replica: replica, counter: DotKey.counter(key))
    }

    static func device(_ value: Data) throws -> DeviceID {
        guard let device = DeviceID(bytes: [UInt8](value)) else {
            throw StoreError(.database, "a row has a malformed device ID; the database is damaged")
        }
        return device
    }

    static func entry(_ row: Row, replicas: [Int64: ReplicaID]) throws -> Entry {
        Entry(
            id: row[1],
            stream: row[2],
            originDevice: try device(row[3]),
            dot: try dot(row[0], replicas: replicas),
            hlc: HybridTimestamp(rawValue: UInt64(row[4] as Int64)),
            wallMilliseconds: row[5],
            payload: row[6]
        )
    }

    /// The last device ID read, so consecutive rows of one device (the usual case) share it.
    struct DeviceCache {
        var last: DeviceID?

        mutating func device(_ bytes: UnsafeRawBufferPointer) throws -> DeviceID {
            if let last, last.bytes.elementsEqual(bytes) { return last }
            let device = try RowDecoding.device(Data(bytes))
            last = device
            return device
        }
    }

    /// An entry from a row of `entryColumns`, read through the C API (see `BoundStatement`).
    static func entry(
        _ columns: BoundStatement.Columns,
        replicas: [Int64: ReplicaID],
        devices: inout DeviceCache
    )
        throws -> Entry
    {
        Entry(
            id: columns.text(1),
            stream: columns.text(2),
            originDevice: try columns.withBlob(3) { try devices.device($0) },
            dot: try dot(columns.int64(0), replicas: replicas),
            hlc: HybridTimestamp(rawValue: UInt64(columns.int64(4))),
            wallMilliseconds: columns.int64(5),
            payload: columns.text(6)
        )
    }

    static func preference(_ row: Row, replicas: [Int64: ReplicaID]) throws -> PreferenceWrite {
        PreferenceWrite(
            key: row[1],
            value: row[2],
            originDevice: try device(row[3]),
            dot: try dot(row[0], replicas: replicas),
            hlc: HybridTimestamp(rawValue: UInt64(row[4] as Int64)),
            wallMilliseconds: row[5]
        )
    }
}
