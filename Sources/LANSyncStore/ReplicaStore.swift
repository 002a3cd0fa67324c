import Foundation
import GRDB
package import LANSyncCore
package import LANSyncCrypto

/// One replica's SQLite database: a `Sendable` value around GRDB's `DatabaseWriter` whose write
/// methods keep the CRDT invariants (every row change through `WriteContext`, one transaction per
/// call, committed with `synchronous=FULL` in WAL mode before the call returns).
package struct ReplicaStore: Sendable {
    let writer: any DatabaseWriter
    package let replica: ReplicaID
    package let device: DeviceID
    /// The nonce this replica's ID is derived with from `device` (`ReplicaBinding`); nil for a
    /// replica made before IDs were derived (a legacy ID).
    package let replicaNonce: [UInt8]?
    let hasher: ElementHasher
    /// Local writes waiting for the writer; merges take them along (see `LocalWriteQueue`).
    let localWrites = LocalWriteQueue()
    /// What a merged row costs lately: how merges size their transactions.
    let mergeCost = MergeCost()
    /// Runs WAL checkpoints in the background (nil for in-memory replicas).
    let checkpointer: Checkpointer?
    /// App tables: the functions their triggers call, and the catalog.
    let apps: AppTableAccess
    /// Whether local commits extend this replica's chain themselves, and which writes it may not cover.
    let chainCoverage = ChainCoverage()
    /// Whether `open_claims` may hold a row (false only once a merge left none): a session asks
    /// after every merge, so the usual answer costs no read.
    let openClaimsMayExist = SharedFlag(true)
    /// The device's key, which signs the heads of this replica's change chain; nil until
    /// `signingHeads(with:)` (heads are then kept unsigned until a store with the key commits).
    private(set) var headSigner: SigningKey?
    /// Opened read-only (`openReadOnly`): what a reader should know, or nil when nothing.
    package private(set) var readOnlyNote: String?
    /// Whether this replica was opened read-only (its directory cannot be written).
    package private(set) var isReadOnly = false

    /// This store, signing its chain's heads with `key` (the device's signing key).
    package func signingHeads(with key: SigningKey) -> ReplicaStore {
        var store = self
        store.headSigner = key
        return store
    }

    /// BLAKE2b-256 of an element's canonical bytes: what the state digest sums, on every replica.
    package static let elementHasher = ElementHasher { BLAKE2b.hash($0) }

    private init(writer: any DatabaseWriter, apps: AppTableAccess, path: String? = nil) throws(StoreError) {
        self.writer = writer
        self.apps = apps
        hasher = Self.elementHasher
        checkpointer = path.map(Checkpointer.init(path:))
        let ids = try Self.database {
            // `SELECT *`: a replica opened read-only may predate the nonce column (schema v8).
            try writer.read { db in try Row.fetchOne(db, sql: "SELECT * FROM meta") }
        }
        guard let ids else {
            throw StoreError(.notInitialized, "the replica's initialisation never finished; run `lansync init` again")
        }
        replica = ReplicaID(bytes: [UInt8](ids["replica_id"] as Data))!
        device = DeviceID(bytes: [UInt8](ids["device_id"] as Data))!
        replicaNonce = (ids["replica_nonce"] as Data?).map { [UInt8]($0) }
    }

    // MARK: Opening

    /// Opens the replica at `path`, which must exist and be a LANSync replica.
    package static func open(path: String) throws(StoreError) -> ReplicaStore {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError(.notInitialized, "no replica at \(path); run `lansync init` first")
        }
        if ReadOnlyReplica.directoryIsReadOnly(path) { return try openReadOnly(path: path) }
        guard try probe(path: path) else {
            throw StoreError(.notInitialized, "the replica at \(path) is empty; run `lansync init`")
        }
        let apps = AppTableAccess()
        return try ReplicaStore(writer: pool(path: path, apps: apps), apps: apps, path: path)
    }

    /// Opens a replica whose directory cannot be written (a read-only mount, a backup on a
    /// read-only medium): reads work; every write fails saying why (`ReadOnlyReplica`).
    /// SQLite cannot make the WAL's index there, so the file is read as it stands, without
    /// what a leftover `-wal` file holds (`ReadOnlyReplica.note` tells when there is some).
    static func openReadOnly(path: String) throws(StoreError) -> ReplicaStore {
        let uri = ReadOnlyReplica.uri(path)
        guard try probe(path: uri) else {
            throw StoreError(
                .notInitialized,
                "the replica at \(path) is empty; run `lansync init` where it can be written"
            )
        }
        let apps = AppTableAccess()
        let queue = try database {
            try DatabaseQueue(path: uri, configuration: configuration(apps: apps, readOnly: true))
        }
        var store = try ReplicaStore(writer: queue, apps: apps)
        store.isReadOnly = true
        store.readOnlyNote = ReadOnlyReplica.note(path)
        return store
    }

    /// Opens the replica at `path`, creating it for `device` with a fresh replica ID derived from
    /// the device when there is none (`ReplicaBinding`). `choice`: a simulation's nonce, drawn
    /// from its seed, or a test's ID as it is. Returns whether it was created.
    package static func openOrCreate(
        path: String,
        device: DeviceID,
        choosing choice: ReplicaChoice = .derived(nonce: nil)
    ) throws(StoreError) -> (ReplicaStore, created: Bool) {
        if FileManager.default.fileExists(atPath: path) { _ = try probe(path: path) }
        let apps = AppTableAccess()
        let pool = try pool(path: path, apps: apps)
        // Health data: only the owner may read the replica (its -wal and -shm inherit this mode).
        chmod(path, 0o600)
        let created = try initialize(pool, device: device, choosing: choice)
        return (try ReplicaStore(writer: pool, apps: apps, path: path), created)
    }

    /// A replica in memory, for tests.
    package static func inMemory(
        device: DeviceID,
        choosing choice: ReplicaChoice = .derived(nonce: nil)
    ) throws(StoreError) -> ReplicaStore {
        let apps = AppTableAccess()
        let queue = try database { try DatabaseQueue(configuration: configuration(apps: apps)) }
        try database { try Schema.migrator.migrate(queue) }
        _ = try initialize(queue, device: device, choosing: choice)
        return try ReplicaStore(writer: queue, apps: apps)
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
                return StoreError(
                    .notAReplica,
                    "\(path) is not a LANSync replica (not an SQLite database); "
                        + "point --data-dir at a LANSync data directory"
                )
            }
            return nil
        }
        if tables == 0 { return false }
        guard applicationID == Schema.applicationID else {
            throw StoreError(
                .notAReplica,
                "\(path) is an SQLite database but not a LANSync replica; "
                    + "point --data-dir at a LANSync data directory"
            )
        }
        guard version <= Schema.version else {
            throw StoreError(
                .newerSchema,
                "\(path) was written by a newer LANSync (schema \(version); this build "
                    + "knows up to \(Schema.version)); upgrade lansync to open it"
            )
        }
        return true
    }

    /// How every connection to a replica is set up.
    static func configuration(apps: AppTableAccess, readOnly: Bool = false) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        // App tables' REFERENCES are not enforced (a child may arrive before its parent); their
        // ON DELETE rules run as LANSync's triggers on the app's own deletes (see `AppTriggers`).
        configuration.foreignKeysEnabled = false
        configuration.readonly = readOnly
        configuration.prepareDatabase { db in
            guard !readOnly else {
                apps.capture.register(on: db)
                AppSQLGuard.install(on: db)
                return
            }
            // Takes effect only when the file is created (an existing replica keeps its size).
            try db.execute(sql: "PRAGMA page_size = \(Schema.pageSize)")
            // Durable at commit: an acknowledged write survives power loss, not only a crash
            // (set again once the pool has set up WAL; see `pool(path:apps:)`).
            try db.commitDurably()
            // Checkpoints run in the background (see `Checkpointer`), not inside a commit.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            // Statement journals and savepoints (each app write runs in one, and every statement
            // on an app table has triggers, so SQLite journals it) keep the pages they may undo
            // in memory instead of a temporary file: a file made bulk inserts into app tables
            // twice as slow, and holds nothing worth keeping past a crash.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            apps.capture.register(on: db)
            AppSQLGuard.install(on: db)
        }
        return configuration
    }

    /// Moves app tables an earlier version made to today's guards: a table that captured writes
    /// with triggers loses them for the pre-update hook, and a table guarded by a CHECK naming no
    /// column, with a trigger on UPDATE, gets the CHECK naming its columns in place of that trigger
    /// (`AppTableGuard`, `AppTriggers`). Does nothing, and writes nothing, once every declared
    /// table has today's guard.
    static func upgradeAppTables(_ pool: DatabasePool) throws {
        // One query at every open, no schema parsing: the declared tables whose stored CREATE
        // TABLE has no guard, or the former one.
        func unguarded(_ db: Database) throws -> [String] {
            try String.fetchAll(
                db,
                sql: """
                    SELECT app_tables.name FROM app_tables JOIN sqlite_master
                    ON sqlite_master.type = 'table' AND lower(sqlite_master.name) = app_tables.name
                    WHERE app_tables.declared = 1 AND (instr(sqlite_master.sql, ?) = 0 OR instr(sqlite_master.sql, ?) > 0)
                    """,
                arguments: [AppTableGuard.call, AppTableGuard.formerConstraint]
            )
        }
        guard try !pool.read(unguarded).isEmpty else { return }
        try pool.write { db in
            let catalog = try AppCatalog.load(db)
            for name in try unguarded(db) {
                try AppTableGuard.install(onTable: name, db)
                guard let table = catalog.table(named: name) else { continue }
                for statement in AppTriggers.statements(for: table) { try db.execute(sql: statement) }
            }
            for statement in AppTriggers.cascadeStatements(for: catalog.schema) { try db.execute(sql: statement) }
        }
    }

    static func pool(path: String, apps: AppTableAccess) throws(StoreError) -> DatabasePool {
        SQLiteProcessSettings.apply()
        let configuration = configuration(apps: apps)
        return try database {
            try retryingWhileBusy {
                let pool = try DatabasePool(path: path, configuration: configuration)
                // GRDB's WAL setup sets `synchronous = NORMAL` on the writer after
                // `prepareDatabase` has run, and NORMAL leaves a commit unflushed until the next
                // checkpoint: a power cut could take back a write already acknowledged.
                try pool.writeWithoutTransaction { db in try db.commitDurably() }
                try Schema.migrator.migrate(pool)
                try upgradeAppTables(pool)
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

    /// How a new replica's ID is chosen.
    package enum ReplicaChoice: Sendable {
        /// Derived from the device and a nonce (`ReplicaBinding`): a fresh random one when nil.
        case derived(nonce: [UInt8]?)
        /// This ID as it is, with no nonce: a legacy replica in a test, or a hostile member's claim
        /// of another device's ID in the group simulator.
        case exactly(ReplicaID)
    }

    /// Writes the metadata row with a new replica ID unless there is one. Returns whether it wrote.
    static func initialize(
        _ writer: any DatabaseWriter,
        device: DeviceID,
        choosing choice: ReplicaChoice = .derived(nonce: nil)
    ) throws(StoreError) -> Bool {
        try database {
            try writer.write { db in
                guard try Int.fetchOne(db, sql: "SELECT count(*) FROM meta") == 0 else { return false }
                let (replica, nonce): (ReplicaID, [UInt8]?)
                switch choice {
                case .derived(let chosen):
                    let drawn = chosen ?? randomBytes(ReplicaBinding.nonceLength)
                    (replica, nonce) = (ReplicaBinding.replicaID(device: device, nonce: drawn), drawn)
                case .exactly(let id):
                    (replica, nonce) = (id, nil)
                }
                try db.execute(
                    sql: """
                        INSERT INTO meta (singleton, replica_id, device_id, created_ms, hlc, digest, replica_nonce)
                        VALUES (1, ?, ?, ?, 0, ?, ?)
                        """,
                    arguments: [
                        Data(replica.bytes), Data(device.bytes), Int64(Date().timeIntervalSince1970 * 1000),
                        Data(StateDigest().bytes), nonce.map { Data($0) },
                    ]
                )
                try db.execute(
                    sql: "INSERT INTO replicas (replica_id, counter) VALUES (?, 0)",
                    arguments: [Data(replica.bytes)]
                )
                return true
            }
        }
    }
}
