import Foundation
import GRDB
public import LANSyncCore
import LANSyncCrypto

/// An entry to append locally. Validated by the caller (names, JSON) before it reaches the store.
public struct AppendRequest: Sendable {
    /// A caller-chosen id for idempotent retries, or nil for a generated time-ordered id.
    public var id: String?
    public var stream: String
    /// Compact JSON text.
    public var payload: String

    public init(id: String? = nil, stream: String, payload: String) {
        self.id = id
        self.stream = stream
        self.payload = payload
    }
}

/// A preference to set locally: compact JSON text, or nil to unset it (a tombstone).
public struct PreferenceRequest: Sendable {
    public var key: String
    public var value: String?

    public init(key: String, value: String?) {
        self.key = key
        self.value = value
    }
}

/// The rows a merge added or changed, for change observers.
public struct MergeResult: Sendable {
    public var entries: [Entry] = []
    public var preferences: [PreferenceWrite] = []

    public init() {}

    public var outcome: MergeOutcome {
        MergeOutcome(entriesAdded: entries.count, preferencesChanged: preferences.count)
    }
}

/// What `status` shows about a replica.
public struct StoreStatus: Sendable, Equatable {
    public let replica: ReplicaID
    public let device: DeviceID
    public let entries: Int
    /// Preferences holding a value (tombstones excluded).
    public let preferences: Int
    /// Preference keys that were unset (tombstones), kept so the unset reaches every peer.
    public let tombstones: Int
    public let streams: Int
    public let digest: StateDigest
    public let versionVector: VersionVector
    public let hlc: HybridTimestamp
}

/// Which entries to list.
public struct EntryQuery: Sendable {
    public var stream: String?
    /// Wall-clock bounds in milliseconds since the epoch: `since` inclusive, `until` exclusive.
    public var since: Int64?
    public var until: Int64?
    public var limit: Int?

    public init(stream: String? = nil, since: Int64? = nil, until: Int64? = nil, limit: Int? = nil) {
        self.stream = stream
        self.since = since
        self.until = until
        self.limit = limit
    }
}

/// One replica's SQLite database: a `Sendable` value around GRDB's `DatabaseWriter` whose write
/// methods keep the CRDT invariants (every row change through `WriteContext`, one transaction per
/// call, committed with `synchronous=FULL` in WAL mode before the call returns).
public struct ReplicaStore: Sendable {
    let writer: any DatabaseWriter
    public let replica: ReplicaID
    public let device: DeviceID
    let hasher: ElementHasher
    /// Local writes waiting for the writer; merges take them along (see `LocalWriteQueue`).
    let localWrites = LocalWriteQueue()
    /// What a merged row costs lately: how merges size their transactions.
    let mergeCost = MergeCost()
    /// Runs WAL checkpoints in the background (nil for in-memory replicas).
    let checkpointer: Checkpointer?

    /// BLAKE2b-256 of an element's canonical bytes: what the state digest sums, on every replica.
    public static let elementHasher = ElementHasher { BLAKE2b.hash($0) }

    private init(writer: any DatabaseWriter, path: String? = nil) throws(StoreError) {
        self.writer = writer
        hasher = Self.elementHasher
        checkpointer = path.map(Checkpointer.init(path:))
        let ids = try Self.database {
            try writer.read { db in try Row.fetchOne(db, sql: "SELECT replica_id, device_id FROM meta") }
        }
        guard let ids else {
            throw StoreError(.notInitialized, "the replica's initialisation never finished; run `lansync init` again")
        }
        replica = ReplicaID(bytes: [UInt8](ids[0] as Data))!
        device = DeviceID(bytes: [UInt8](ids[1] as Data))!
    }

    // MARK: Opening

    /// Opens the replica at `path`, which must exist and be a LANSync replica.
    public static func open(path: String) throws(StoreError) -> ReplicaStore {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError(.notInitialized, "no replica at \(path); run `lansync init` first")
        }
        guard try probe(path: path) else {
            throw StoreError(.notInitialized, "the replica at \(path) is empty; run `lansync init`")
        }
        return try ReplicaStore(writer: pool(path: path), path: path)
    }

    /// Opens the replica at `path`, creating it for `device` with a fresh replica ID when there is
    /// none. Returns whether it was created.
    public static func openOrCreate(path: String, device: DeviceID) throws(StoreError) -> (ReplicaStore, created: Bool) {
        if FileManager.default.fileExists(atPath: path) { _ = try probe(path: path) }
        let pool = try pool(path: path)
        // Health data: only the owner may read the replica (its -wal and -shm inherit this mode).
        chmod(path, 0o600)
        let created = try initialize(pool, device: device)
        return (try ReplicaStore(writer: pool, path: path), created)
    }

    /// A replica in memory, for tests.
    public static func inMemory(device: DeviceID) throws(StoreError) -> ReplicaStore {
        let queue = try database { try DatabaseQueue() }
        try database { try Schema.migrator.migrate(queue) }
        _ = try initialize(queue, device: device)
        return try ReplicaStore(writer: queue)
    }

    /// Checks, without writing anything, that the file is a LANSync replica this build can open.
    /// Returns false for an SQLite file with no tables yet (an init that was cut short).
    static func probe(path: String) throws(StoreError) -> Bool {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        let (applicationID, version, tables) = try database {
            try retryingWhileBusy {
                let queue = try DatabaseQueue(path: path, configuration: configuration)
                defer { try? queue.close() }
                return try queue.read { db in
                    (
                        try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0,
                        try Int32.fetchOne(db, sql: "PRAGMA user_version") ?? 0,
                        try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
                    )
                }
            }
        } onError: { error in
            if error.resultCode == .SQLITE_NOTADB {
                return StoreError(.notAReplica, "\(path) is not a LANSync replica (not an SQLite database); "
                    + "point --data-dir at a LANSync data directory")
            }
            return nil
        }
        if tables == 0 { return false }
        guard applicationID == Schema.applicationID else {
            throw StoreError(.notAReplica, "\(path) is an SQLite database but not a LANSync replica; "
                + "point --data-dir at a LANSync data directory")
        }
        guard version <= Schema.version else {
            throw StoreError(.newerSchema, "\(path) was written by a newer LANSync (schema \(version); this build "
                + "knows up to \(Schema.version)); upgrade lansync to open it")
        }
        return true
    }

    static func pool(path: String) throws(StoreError) -> DatabasePool {
        SQLiteProcessSettings.apply()
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // Durable at commit: an acknowledged write survives power loss, not only a crash.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Checkpoints run in the background (see `Checkpointer`), not inside a commit.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        return try database {
            try retryingWhileBusy {
                let pool = try DatabasePool(path: path, configuration: configuration)
                try Schema.migrator.migrate(pool)
                // A reader connection's first read is where recovery in another process shows.
                try pool.read { db in _ = try Row.fetchOne(db, sql: "SELECT 1") }
                return pool
            }
        }
    }

    /// Runs `body` again while SQLite says busy, for up to 10 s. Opening a replica can meet another
    /// process recovering the WAL (left by a process that exited without checkpointing): SQLite
    /// then answers SQLITE_BUSY_RECOVERY at once instead of waiting in the busy handler.
    static func retryingWhileBusy<T>(_ body: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(10)
        while true {
            do {
                return try body()
            } catch let error as DatabaseError
                where (error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED) && Date() < deadline
            {
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
    }

    /// Writes the metadata row with a new replica ID unless there is one. Returns whether it wrote.
    static func initialize(_ writer: any DatabaseWriter, device: DeviceID) throws(StoreError) -> Bool {
        try database {
            try writer.write { db in
                guard try Int.fetchOne(db, sql: "SELECT count(*) FROM meta") == 0 else { return false }
                let replica = ReplicaID(bytes: randomBytes(16))!
                try db.execute(
                    sql: """
                        INSERT INTO meta (singleton, replica_id, device_id, created_ms, hlc, digest)
                        VALUES (1, ?, ?, ?, 0, ?)
                        """,
                    arguments: [
                        Data(replica.bytes), Data(device.bytes), Int64(Date().timeIntervalSince1970 * 1000),
                        Data(StateDigest().bytes),
                    ])
                try db.execute(
                    sql: "INSERT INTO replicas (replica_id, counter) VALUES (?, 0)", arguments: [Data(replica.bytes)])
                return true
            }
        }
    }

    // MARK: Local writes

    /// Appends entries made on this replica in one durable transaction: each gets the next dot and
    /// HLC reading. A request whose id is held already returns the entry held (idempotent retry).
    /// Suspends, never blocks, until the transaction has committed: its own, or a merge
    /// transaction's that took it along (see `LocalWriteQueue`). Concurrent appends share a
    /// commit. `onCommit` is called once it is durable, in commit order across callers.
    public func append(_ requests: [AppendRequest], now: UInt64, onCommit: (@Sendable ([Entry]) -> Void)? = nil)
        async throws(StoreError) -> [Entry]
    {
        try await commit({ context in try Self.append(requests, now: now, context: &context) }, onCommit: onCommit)
    }

    /// Sets preferences (a nil value unsets: a tombstone) in one durable transaction.
    public func setPreferences(
        _ writes: [PreferenceRequest], now: UInt64, onCommit: (@Sendable ([PreferenceWrite]) -> Void)? = nil
    ) async throws(StoreError) -> [PreferenceWrite] {
        try await commit({ context in try Self.set(writes, now: now, context: &context) }, onCommit: onCommit)
    }

    /// Runs a local write in the next transaction and returns its result once committed.
    private func commit<T: Sendable>(
        _ write: @escaping @Sendable (inout WriteContext) throws -> T, onCommit: (@Sendable (T) -> Void)?
    ) async throws(StoreError) -> T {
        let (writer, hasher, queue, checkpointer) = (writer, hasher, localWrites, checkpointer)
        return try await Self.database {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                queue.add(
                    LocalWrite(
                        apply: { context in
                            let result = try write(&context)
                            return {
                                onCommit?(result)
                                continuation.resume(returning: result)
                            }
                        },
                        fail: { continuation.resume(throwing: $0) }))
                writer.asyncWriteWithoutTransaction { db in
                    if Self.commitWaiting(queue, db: db, hasher: hasher) { checkpointer?.committed() }
                }
            }
        }
    }

    /// Commits every waiting local write in one transaction (none, when a merge took them).
    /// Returns whether it committed anything.
    private static func commitWaiting(_ queue: LocalWriteQueue, db: Database, hasher: ElementHasher) -> Bool {
        guard queue.hasWaiting else { return false }
        var taken = TakenWrites()
        do {
            try db.inTransaction {
                var context = try WriteContext(db, hasher: hasher)
                try taken.take(from: queue, into: &context)
                if !taken.writes.isEmpty { try context.save() }
                return .commit
            }
        } catch {
            for write in taken.writes { write.fail(error) }
            return false
        }
        taken.reportCommitted()
        return !taken.writes.isEmpty
    }

    static func append(_ requests: [AppendRequest], now: UInt64, context: inout WriteContext) throws -> [Entry] {
        var results = [Entry]()
        results.reserveCapacity(requests.count)
        var random = SplitMix64()
        for request in requests {
            if let id = request.id, let existing = try context.entry(id: id) {
                results.append(existing)
                continue
            }
            let hlc = context.tick(now: now)
            let entry = Entry(
                id: request.id ?? EntryIDs.make(hlc: hlc, random: &random), stream: request.stream, originDevice: context.device,
                dot: context.nextDot(), hlc: hlc, wallMilliseconds: Int64(now), payload: request.payload)
            _ = try context.mergeEntry(entry)
            results.append(entry)
        }
        return results
    }

    private static func set(_ writes: [PreferenceRequest], now: UInt64, context: inout WriteContext) throws
        -> [PreferenceWrite]
    {
        var results = [PreferenceWrite]()
        for request in writes {
            // Our clock is past every reading merged so far, so a local write always wins here.
            let hlc = context.tick(now: now)
            let write = PreferenceWrite(
                key: request.key, value: request.value, originDevice: context.device, dot: context.nextDot(),
                hlc: hlc, wallMilliseconds: Int64(now))
            _ = try context.mergePreference(write)
            results.append(write)
        }
        return results
    }

    // MARK: Merge

    /// Merges a delta from another replica. Rejected whole when malformed. A large delta is
    /// committed in several transactions, the coverage with the last, sized by `MergePacer`; the
    /// app's own writes ride along instead of waiting (see `LocalWriteQueue`). A crash part-way
    /// leaves merged rows (merge is idempotent) and an unmoved version vector, so the rest is
    /// simply sent again.
    public func merge(_ delta: Delta) async throws(StoreError) -> MergeResult {
        try await merge(Self.check(delta))
    }

    /// Merges a delta checked beforehand (see `check`).
    public func merge(_ checked: CheckedDelta) async throws(StoreError) -> MergeResult {
        let (hasher, queue) = (hasher, localWrites)
        // Which rows changed the replica, by index: the writer copies no rows.
        var changed = (entries: [Int](), preferences: [Int]())
        var pacer = MergePacer(cost: mergeCost)
        while let share = pacer.next(of: checked.delta) {
            let (part, elapsed) = try await Self.database {
                try await writer.writeWithoutTransaction { db in
                    // Timed on the writer from BEGIN to the end of COMMIT: not the wait for the writer.
                    let begin = ContinuousClock.now
                    var part = MergedShare()
                    var taken = TakenWrites()
                    do {
                        try db.inTransaction {
                            part = try Self.merge(share, of: checked, db: db, hasher: hasher, localWrites: queue, taken: &taken)
                            return .commit
                        }
                    } catch {
                        // The writes it took get their own transaction: a peer's bad delta fails no app write.
                        queue.putBack(taken.writes)
                        throw error
                    }
                    taken.reportCommitted()
                    return (part, ContinuousClock.now - begin)
                }
            }
            pacer.record(share, merged: (part.entriesMerged, part.preferencesMerged), elapsed: elapsed)
            checkpointer?.committed()
            await checkpointer?.checkpointBeforeRewind()
            changed.entries += part.changedEntries
            changed.preferences += part.changedPreferences
        }
        var result = MergeResult()
        let delta = checked.delta
        result.entries = changed.entries.count == delta.entries.count ? delta.entries : changed.entries.map { delta.entries[$0] }
        result.preferences = changed.preferences.map { delta.preferences[$0] }
        return result
    }

    /// Checks a delta from another replica (see `Delta.problem()`) and hashes its entries: the
    /// part of a merge that needs no database, so a receiver can run it on any thread while the
    /// batch before is being written. Rejects the delta whole when anything is wrong.
    public static func check(_ delta: Delta) throws(StoreError) -> CheckedDelta {
        if let problem = delta.problem() { throw StoreError(.invalidDelta, "rejected a malformed delta: \(problem)") }
        // One buffer for every entry's canonical bytes, and entries read in place by index.
        var hashes = [[UInt8]]()
        hashes.reserveCapacity(delta.entries.count)
        let hasher = elementHasher
        var buffer = [UInt8]()
        for index in delta.entries.indices { hashes.append(hasher.hash(delta.entries[index], reusing: &buffer)) }
        return CheckedDelta(delta: delta, entryHashes: hashes)
    }

    /// What one merge transaction did with its share: how far it got (it stops early once a local
    /// write it took is due), and which rows changed the replica, by index.
    struct MergedShare {
        var entriesMerged = 0
        var preferencesMerged = 0
        var changedEntries: [Int] = []
        var changedPreferences: [Int] = []
    }

    /// Merges one transaction's share of a delta, taking waiting local writes along.
    private static func merge(
        _ share: MergePacer.Share, of checked: CheckedDelta, db: Database, hasher: ElementHasher,
        localWrites: LocalWriteQueue, taken: inout TakenWrites
    ) throws -> MergedShare {
        let delta = checked.delta
        var context = try WriteContext(db, hasher: hasher)
        var merged = MergedShare()
        merged.changedEntries.reserveCapacity(share.entries.count)
        /// Every few rows: take waiting local writes; true when the transaction should commit now.
        func lookAtLocalWrites(_ rows: Int, _ context: inout WriteContext) throws -> Bool {
            guard rows % LocalWriteQueue.rowsBetweenLooks == 0 else { return false }
            try taken.take(from: localWrites, into: &context)
            return taken.isDue
        }
        for index in share.entries {
            // The clock passes every reading merged before a local write can tick: that write wins.
            context.observe(delta.entries[index].hlc)
            // Read in place (no copy of the entry, nor retains of its strings).
            if try context.mergeEntry(delta.entries[index], hash: checked.entryHashes[index]) {
                merged.changedEntries.append(index)
            }
            merged.entriesMerged += 1
            if try lookAtLocalWrites(merged.entriesMerged, &context) { break }
        }
        if merged.entriesMerged == share.entries.count {
            for index in share.preferences {
                let write = delta.preferences[index]
                context.observe(write.hlc)
                if try context.mergePreference(write) { merged.changedPreferences.append(index) }
                merged.preferencesMerged += 1
                if try lookAtLocalWrites(merged.preferencesMerged, &context) { break }
            }
        }
        // Writes that came meanwhile go out with this commit too.
        try taken.take(from: localWrites, into: &context)
        if share.isLast && merged.entriesMerged + merged.preferencesMerged == share.rows {
            try context.advance(by: delta.coverage)
        }
        try context.save()
        return merged
    }

    /// Runs `body` inside one write transaction that merges whatever rows it feeds in; when
    /// `body` throws, everything is rolled back and nothing is written. For imports.
    public func importing<T>(_ body: (inout ImportSession) throws -> T) throws -> (T, MergeOutcome) {
        let hasher = hasher
        return try writer.write { db in
            var session = ImportSession(context: try WriteContext(db, hasher: hasher))
            let result = try body(&session)
            try session.finish()
            return (result, session.outcome)
        }
    }

    // MARK: Reads

    public func versionVector() throws(StoreError) -> VersionVector {
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

    public func status() throws(StoreError) -> StoreStatus {
        try Self.database {
            try writer.read { db in
                let meta = try Row.fetchOne(
                    db, sql: "SELECT digest, entry_count, preference_count, hlc FROM meta")!
                let tombstones = try Int.fetchOne(db, sql: "SELECT count(*) FROM preferences WHERE value IS NULL") ?? 0
                let streams = try Int.fetchOne(db, sql: "SELECT count(DISTINCT stream) FROM entries") ?? 0
                let vector = try Self.readVersionVector(db)
                let preferences: Int = meta[2]
                return StoreStatus(
                    replica: replica, device: device, entries: meta[1], preferences: preferences - tombstones,
                    tombstones: tombstones, streams: streams,
                    digest: StateDigest(bytes: [UInt8](meta[0] as Data)) ?? StateDigest(), versionVector: vector,
                    hlc: HybridTimestamp(rawValue: UInt64(meta[3] as Int64)))
            }
        }
    }

    /// What a peer needs to know about this replica: version vector, digest, clock. Cheap (no counting).
    public func syncSummary() throws(StoreError) -> (versionVector: VersionVector, digest: StateDigest, hlc: HybridTimestamp) {
        try Self.database {
            try writer.read { db in
                let meta = try Row.fetchOne(db.cachedStatement(sql: "SELECT digest, hlc FROM meta"))!
                return (try Self.readVersionVector(db), StateDigest(bytes: [UInt8](meta[0] as Data)) ?? StateDigest(),
                    HybridTimestamp(rawValue: UInt64(meta[1] as Int64)))
            }
        }
    }

    /// A value that changes whenever any process commits a change to this replica: what a
    /// running agent polls to notice writes made by the CLI.
    public func changeMarker() throws(StoreError) -> [UInt8] {
        try Self.database {
            try writer.read { db in
                let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT digest, hlc FROM meta"))!
                return [UInt8](row[0] as Data) + withUnsafeBytes(of: (row[1] as Int64).bigEndian) { Array($0) }
            }
        }
    }

    /// Recomputes the digest from every row, ignoring the stored one: for integrity checks and tests.
    public func recomputeDigest() throws(StoreError) -> StateDigest {
        var digest = StateDigest()
        _ = try Self.database {
            try forEachRow(
                entry: { digest.insert(hash: hasher.hash($0)) }, preference: { digest.insert(hash: hasher.hash($0)) })
        }
        return digest
    }

    /// Calls `body` for each entry matching `query`, oldest first (wall-clock time, then id).
    public func forEachEntry(_ query: EntryQuery, _ body: (Entry) throws -> Void) throws {
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
        try writer.read { db in
            let replicas = try Self.replicaNumbers(db)
            let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
            while let row = try rows.next() { try body(try RowDecoding.entry(row, replicas: replicas)) }
        }
    }

    public func entries(_ query: EntryQuery) throws -> [Entry] {
        var result = [Entry]()
        try forEachEntry(query) { result.append($0) }
        return result
    }

    public func entry(id: String) throws -> Entry? {
        try writer.read { db in
            let replicas = try Self.replicaNumbers(db)
            return try Row.fetchOne(
                db, sql: "SELECT \(RowDecoding.entryColumns) FROM entries WHERE id = ?",
                arguments: [id]
            ).map { try RowDecoding.entry($0, replicas: replicas) }
        }
    }

    /// The winning write of a key (a tombstone when it was unset), or nil when never set.
    public func preference(key: String) throws -> PreferenceWrite? {
        try writer.read { db in
            let replicas = try Self.replicaNumbers(db)
            return try Row.fetchOne(
                db, sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE key = ?",
                arguments: [key]
            ).map { try RowDecoding.preference($0, replicas: replicas) }
        }
    }

    /// Every preference's winning write, tombstones included, ordered by key.
    public func preferences() throws -> [PreferenceWrite] {
        try writer.read { db in
            let replicas = try Self.replicaNumbers(db)
            return try Row.fetchAll(
                db, sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences ORDER BY key"
            ).map { try RowDecoding.preference($0, replicas: replicas) }
        }
    }

    /// Calls the closures for every row in one consistent read, and returns the version vector of
    /// that same snapshot: what an export writes.
    @discardableResult
    public func forEachRow(entry: (Entry) throws -> Void, preference: (PreferenceWrite) throws -> Void) throws
        -> VersionVector
    {
        try writer.read { db in
            let replicas = try Self.replicaNumbers(db)
            let entries = try Row.fetchCursor(
                db, sql: "SELECT \(RowDecoding.entryColumns) FROM entries ORDER BY id")
            while let row = try entries.next() { try entry(try RowDecoding.entry(row, replicas: replicas)) }
            let preferences = try Row.fetchCursor(
                db, sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences ORDER BY key")
            while let row = try preferences.next() { try preference(try RowDecoding.preference(row, replicas: replicas)) }
            return try Self.readVersionVector(db)
        }
    }

    /// One bounded batch of what a replica covering `known` lacks: at most `maxRows` rows and
    /// about `maxBytes` bytes (always at least one row), in dot order per replica, with coverage
    /// ranges that say exactly how far the batch goes. Call again with `known` advanced by the
    /// returned coverage until the delta comes back empty. The byte bound keeps every batch far
    /// inside the wire's message limit, whatever the payload sizes. With a `bound`, rows beyond it
    /// are left out (the agent holds rows from other origins back for a moment, and sends no more
    /// than it held when it started sending; see `RelayGrace`).
    public func delta(
        since known: VersionVector, upTo bound: VersionVector? = nil, maxRows: Int, maxBytes: Int = 1 << 20
    ) throws(StoreError) -> Delta {
        precondition(maxRows > 0, "a delta batch needs room for at least one row")
        return try Self.database {
            try writer.read { db in
                let replicas = try Self.replicaNumbers(db)
                var delta = Delta()
                var devices = RowDecoding.DeviceCache()
                var rowsLeft = maxRows
                var bytesLeft = maxBytes
                let ranges = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT num, replica_id, counter FROM replicas ORDER BY replica_id"))
                for range in ranges {
                    let id = ReplicaID(bytes: [UInt8](range[1] as Data))!
                    let number: Int64 = range[0]
                    let through = min(UInt64(range[2] as Int64), bound?[id] ?? .max)
                    let from = known[id]
                    guard through > from else { continue }
                    guard rowsLeft > 0, bytesLeft > 0 else { break }
                    let (lower, upper) = (DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through))
                    var entries = [Entry]()
                    let select = try BoundStatement(
                        db, sql: "SELECT \(RowDecoding.entryColumns) FROM entries WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?")
                    select.bind(1, lower)
                    select.bind(2, upper)
                    select.bind(3, Int64(rowsLeft))
                    try select.forEachRow { columns in
                        entries.append(try RowDecoding.entry(columns, replicas: replicas, devices: &devices))
                    }
                    let preferences = try Row.fetchAll(
                        db.cachedStatement(
                            sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?"),
                        arguments: [lower, upper, rowsLeft]
                    ).map { try RowDecoding.preference($0, replicas: replicas) }
                    // Entries alone (a catch-up of logs) and all within the byte budget: taken whole,
                    // without the merge walk below.
                    let entryBytes = entries.reduce(0) { $0 + $1.payload.utf8.count + $1.id.utf8.count + 64 }
                    if preferences.isEmpty, entryBytes <= bytesLeft {
                        let cut = entries.count == rowsLeft
                        let reached = cut ? entries.last?.dot.counter ?? from : through
                        rowsLeft -= entries.count
                        bytesLeft -= entryBytes
                        // The first replica's rows become the batch's array as is (no copy of each entry).
                        if delta.entries.isEmpty { delta.entries = entries } else { delta.entries.append(contentsOf: entries) }
                        if reached > from { delta.coverage.append(.init(replica: id, from: from, through: reached)) }
                        if reached < through { break }
                        continue
                    }
                    // Both lists hold their smallest counters, so walking their union in counter order
                    // takes exactly the next rows; stop at either budget.
                    var rows = entries.indices.map { (counter: entries[$0].dot.counter, entry: $0, preference: -1) }
                        + preferences.indices.map { (counter: preferences[$0].dot.counter, entry: -1, preference: $0) }
                    rows.sort { $0.counter < $1.counter }
                    var last: UInt64?
                    var cut = entries.count == rowsLeft || preferences.count == rowsLeft
                    for row in rows {
                        let size = row.entry >= 0
                            ? entries[row.entry].payload.utf8.count + entries[row.entry].id.utf8.count + 64
                            : (preferences[row.preference].value?.utf8.count ?? 0) + preferences[row.preference].key.utf8.count + 64
                        let nothingYet = delta.entries.isEmpty && delta.preferences.isEmpty
                        guard rowsLeft > 0, size <= bytesLeft || nothingYet else {
                            cut = true
                            break
                        }
                        if row.entry >= 0 { delta.entries.append(entries[row.entry]) }
                        else { delta.preferences.append(preferences[row.preference]) }
                        rowsLeft -= 1
                        bytesLeft -= size
                        last = row.counter
                    }
                    let reached = cut ? (last ?? from) : through
                    if reached > from { delta.coverage.append(.init(replica: id, from: from, through: reached)) }
                    if reached < through { break }
                }
                return delta
            }
        }
    }

    /// Runs SQLite's `PRAGMA integrity_check`; returns its complaints (empty when healthy).
    public func integrityProblems() throws(StoreError) -> [String] {
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

    // MARK: Errors

    /// Runs `body`, turning any GRDB error into a `StoreError` with a message for people.
    static func database<T>(_ body: () throws -> T, onError: (DatabaseError) -> StoreError? = { _ in nil })
        throws(StoreError) -> T
    {
        do { return try body() } catch { throw translate(error, onError) }
    }

    static func database<T>(_ body: () async throws -> T) async throws(StoreError) -> T {
        do { return try await body() } catch { throw translate(error, { _ in nil }) }
    }

    private static func translate(_ error: any Error, _ onError: (DatabaseError) -> StoreError?) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? DatabaseError {
            if let mapped = onError(error) { return mapped }
            switch error.resultCode {
            case .SQLITE_NOTADB:
                return StoreError(.notAReplica, "not a LANSync replica (not an SQLite database): \(error.message ?? "")")
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return StoreError(
                    .database,
                    "the replica is locked by another process for too long; try again (SQLite \(error.extendedResultCode.rawValue))")
            case .SQLITE_FULL:
                return StoreError(.database, "the disk is full; free some space and try again (nothing of this write was committed)")
            case .SQLITE_CORRUPT:
                return StoreError(.database, "the replica's database is damaged (\(error.message ?? "corrupt")); "
                    + "restore it from an export or re-sync from peers")
            default:
                return StoreError(.database, "database error: \(error.message ?? "\(error)")")
            }
        }
        return StoreError(.database, "\(error)")
    }
}
