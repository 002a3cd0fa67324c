import GRDB
import LANSyncCore

/// The replica's SQLite schema, created and upgraded by GRDB migrations.
///
/// - `meta`: one row about this replica: its replica ID, device ID, HLC, and the incrementally
///   maintained state digest with element counts.
/// - `replicas`: every replica ever heard of, with a small local number that rows use instead of
///   16-byte IDs, and the version vector entry (`counter`) for it.
/// - `entries`: the grow-only set, one row per entry id (the winning version).
/// - `preferences`: one row per key, the winning last-writer-wins write (value NULL = tombstone).
///
/// - `app_tables` (v2): every app table heard of, numbered, whether this replica's app declared
///   it, and its live row count. `app_schema`: the schema text the app last applied.
/// - `app_rows`: per app-table row, its CRDT state (`RowState`'s canonical bytes; from v5, the
///   compact form of `StoredRowState`); the app's own table holds the values it shows. `app_ops`: the live writes by dot, so a delta is a range scan
///   (from v6, writes that made new rows are indexed in runs instead, `app_op_runs`).
///
/// - v3, signed changes (docs/signed-changes.md): `chain_heads`, per replica the latest head of
///   its chain this replica holds (for its own, as far as it was last extended, and how many
///   bytes of changes follow its last point), signed by the replica's device (`signature` NULL
///   until this replica's own key has signed it); `chain_points`, the signed heads where
///   catch-ups may be cut (see `OwnChain`) and each replica's genesis (a head of 32 zero bytes:
///   the counters up to it were written unsigned; the migration stores one for a replica that
///   had made changes).
///   The stubs of superseded changes, so that their leaves can still be sent (`ChangeLeaf`):
///   `preference_stubs` (key, clock, element hash), `entry_stubs` (losing entries, whole),
///   `row_stubs` (app-table changes of which nothing wins any more) and `app_ops.stub` (a live
///   change of which a part lost, or whose kind its row no longer shows). A stub is
///   kind u8 · causal length u64 · HLC u64 · lost cell count u32 · (cell kind u8 · field(column)
///   · field(stand-in))….
/// - v4, protocol version 4: a replica that had made changes gets a new genesis at the counter it
///   had reached (see the migration); no table changes.
/// - v5: `app_columns` numbers column names, so that `app_rows.state` keeps a state in the
///   compact form `StoredRowState` describes (states stored before stay canonical and still read).
/// - v6: `app_op_runs` indexes the dots of new rows a run at a time: a run of consecutive dots of
///   one replica into one table (`first` to `last`, packed as `DotKey`s) and each dot's row key
///   in order, each as a varint length and its bytes (see `DotRun`). `app_ops` keeps the other
///   live writes and the stubs of live ones; readers take both.
/// - v7: `open_claims`, the changes a received range says lost at its sender that have not lost
///   here yet (the change that superseded them comes later, often further along the same
///   replica's chain): per change, its dot (`DotKey`), the app table (NULL for a preference), the
///   row's key bytes (or the preference key's UTF-8), and the stub (a preference's HLC, 8 bytes
///   big-endian; a row change's `RowChangeStub` with the cells still open). Each closes when a
///   change that supersedes it is merged (see `WriteContext.closeOpenClaims`).
/// - v8: `meta.replica_nonce`, the nonce the replica's ID is derived with from its device
///   (`ReplicaBinding`); NULL for a replica made before (its ID stays as it was).
/// - v9: a state in `app_rows` may name a value its app's row holds instead of keeping it
///   (`StoredRowState.rowValueTag`); no table changes. The version says so, so that an earlier
///   LANSync, which cannot read such a state, refuses the file as newer rather than damaged.
/// - v10: a state in `app_rows` may take the held form (`StoredRowState.heldTag`): a row's
///   first write, every value of it held by the row; no table changes, and states stored before
///   still read. The version bump is for earlier LANSyncs, as for v9.
/// - v11: a run of `app_op_runs` may keep each key as what it shares with the one before it and
///   the rest (`DotRun`): `keys` then starts with a 0 byte; runs stored before still read. The
///   version bump is for earlier LANSyncs, as for v9.
/// - v12: `app_rowid_states`, the states of rows an append-only table shows, keyed by the
///   app's row's rowid instead of by key (`AppCatalog.Table.keepsStatesByRowid`): the app's own
///   key index finds the rowid, so the key is not kept again. A state is in one of the two tables,
///   never in both; states stored before stay in `app_rows` and still read.
/// - v13: a run of `app_op_runs` of such a table may name its rows by rowid (`DotRun.rowidForm`):
///   `keys` then starts with a 1 byte; runs stored before still read. The version bump is for
///   earlier LANSyncs, as for v9.
/// - v14: runs of rowids for every declared table with a rowid, mutable ones too
///   (`AppCatalog.Table.namesRowsByRowid`); a row that leaves its rowid has each dot its state
///   still shows indexed by key. No table changes; the version bump is for earlier LANSyncs,
///   which read such a run of a mutable table as damaged.
///
/// Entries and preferences are keyed by their dot packed into the rowid (see `DotKey`): rows are
/// clustered by origin replica and counter, a delta is a rowid range scan, local appends go to
/// the end of their replica's range, and no separate dot index is kept up to date.
enum Schema {
    /// `PRAGMA application_id`: marks the file as a LANSync replica ("LNSY").
    static let applicationID: Int32 = 0x4C4E_5359
    /// `PRAGMA user_version`: the schema version; a file with a greater one was written by a newer LANSync.
    static let version: Int32 = 14
    /// The page size of a new replica. An app-table row keeps its CRDT state and dot beside the
    /// app's own row, more bytes than the row itself, and 16 KiB pages split less often under them
    /// than SQLite's default 4 KiB.
    static let pageSize = 16_384

    /// A replica with changes of its own gets a genesis at the counter it has reached (signed by
    /// its next extension): its chain starts after those changes, which were written unsigned.
    static let ownGenesis = """
        INSERT INTO chain_heads (replica, counter, hash, signature, bytes_since_point)
            SELECT r.num, r.counter, zeroblob(32), NULL, 0 FROM replicas r JOIN meta m ON m.replica_id = r.replica_id
            WHERE r.counter > 0;
        INSERT INTO chain_points (dot, hash, signature)
            SELECT (r.num << 40) | r.counter, zeroblob(32), NULL FROM replicas r JOIN meta m ON m.replica_id = r.replica_id
            WHERE r.counter > 0;
        """

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE meta (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                        replica_id BLOB NOT NULL CHECK (length(replica_id) = 16),
                        device_id BLOB NOT NULL CHECK (length(device_id) = 16),
                        created_ms INTEGER NOT NULL,
                        hlc INTEGER NOT NULL DEFAULT 0,
                        digest BLOB NOT NULL CHECK (length(digest) = 32),
                        entry_count INTEGER NOT NULL DEFAULT 0,
                        preference_count INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE replicas (
                        num INTEGER PRIMARY KEY,
                        replica_id BLOB NOT NULL UNIQUE CHECK (length(replica_id) = 16),
                        counter INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE entries (
                        dot INTEGER PRIMARY KEY,
                        id TEXT NOT NULL UNIQUE,
                        stream TEXT NOT NULL,
                        origin_device BLOB NOT NULL,
                        hlc INTEGER NOT NULL,
                        wall_ms INTEGER NOT NULL,
                        payload TEXT NOT NULL
                    );
                    CREATE INDEX entries_by_stream_time ON entries(stream, wall_ms);
                    CREATE TABLE preferences (
                        dot INTEGER PRIMARY KEY,
                        key TEXT NOT NULL UNIQUE,
                        value TEXT,
                        origin_device BLOB NOT NULL,
                        hlc INTEGER NOT NULL,
                        wall_ms INTEGER NOT NULL
                    );
                    PRAGMA application_id = \(applicationID);
                    PRAGMA user_version = 1;
                    """
            )
        }
        migrator.registerMigration("v2 app tables") { db in
            try db.execute(
                sql: """
                    ALTER TABLE meta ADD COLUMN row_count INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE app_schema (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                        source TEXT NOT NULL,
                        applied_ms INTEGER NOT NULL
                    );
                    CREATE TABLE app_tables (
                        num INTEGER PRIMARY KEY,
                        name TEXT NOT NULL UNIQUE,
                        declared INTEGER NOT NULL DEFAULT 0,
                        row_count INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE app_rows (
                        tbl INTEGER NOT NULL,
                        key BLOB NOT NULL,
                        state BLOB NOT NULL,
                        PRIMARY KEY (tbl, key)
                    ) WITHOUT ROWID;
                    CREATE TABLE app_ops (
                        dot INTEGER PRIMARY KEY,
                        tbl INTEGER NOT NULL,
                        key BLOB NOT NULL
                    );
                    PRAGMA user_version = 2;
                    """
            )
        }
        migrator.registerMigration("v3 signed changes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE chain_heads (
                        replica INTEGER PRIMARY KEY,
                        counter INTEGER NOT NULL,
                        hash BLOB NOT NULL CHECK (length(hash) = 32),
                        signature BLOB CHECK (signature IS NULL OR length(signature) = 64),
                        bytes_since_point INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE chain_points (
                        dot INTEGER PRIMARY KEY,
                        hash BLOB NOT NULL CHECK (length(hash) = 32),
                        signature BLOB CHECK (signature IS NULL OR length(signature) = 64)
                    );
                    CREATE INDEX chain_points_unsigned ON chain_points(dot) WHERE signature IS NULL;
                    CREATE TABLE preference_stubs (
                        dot INTEGER PRIMARY KEY,
                        key TEXT NOT NULL,
                        hlc INTEGER NOT NULL,
                        element_hash BLOB NOT NULL CHECK (length(element_hash) = 32)
                    );
                    CREATE TABLE entry_stubs (
                        dot INTEGER PRIMARY KEY,
                        id TEXT NOT NULL,
                        stream TEXT NOT NULL,
                        origin_device BLOB NOT NULL,
                        hlc INTEGER NOT NULL,
                        wall_ms INTEGER NOT NULL,
                        payload TEXT NOT NULL
                    );
                    CREATE TABLE row_stubs (
                        dot INTEGER PRIMARY KEY,
                        tbl INTEGER NOT NULL,
                        key BLOB NOT NULL,
                        stub BLOB NOT NULL
                    );
                    ALTER TABLE app_ops ADD COLUMN stub BLOB;
                    """ + ownGenesis + "PRAGMA user_version = 3;"
            )
        }
        migrator.registerMigration("v4 protocol 4 genesis") { db in
            // Until protocol version 4, changes travelled without their lost cells and stubs, so
            // peers hold this replica's earlier changes in a form whose leaves are not its own and
            // could never relay them verifiably. Its chain therefore starts again at the counter it
            // has reached now (a genesis, signed by its next extension): the changes up to it are
            // accepted as written unsigned, every later one must verify. Heads of other replicas
            // were never received over version 4: there are none to keep.
            try db.execute(
                sql: "DELETE FROM chain_points; DELETE FROM chain_heads;" + ownGenesis + "PRAGMA user_version = 4;"
            )
        }
        migrator.registerMigration("v5 stored row states") { db in
            try db.execute(
                sql: """
                    CREATE TABLE app_columns (
                        num INTEGER PRIMARY KEY,
                        name TEXT NOT NULL UNIQUE
                    );
                    PRAGMA user_version = 5;
                    """
            )
        }
        migrator.registerMigration("v6 dot runs") { db in
            try db.execute(
                sql: """
                    CREATE TABLE app_op_runs (
                        last INTEGER PRIMARY KEY,
                        first INTEGER NOT NULL,
                        tbl INTEGER NOT NULL,
                        keys BLOB NOT NULL
                    );
                    PRAGMA user_version = 6;
                    """
            )
        }
        migrator.registerMigration("v7 open claims") { db in
            try db.execute(
                sql: """
                    CREATE TABLE open_claims (
                        dot INTEGER PRIMARY KEY,
                        tbl TEXT,
                        key BLOB NOT NULL,
                        stub BLOB NOT NULL
                    );
                    PRAGMA user_version = 7;
                    """
            )
        }
        migrator.registerMigration("v8 replica nonce") { db in
            try db.execute(
                sql: """
                    ALTER TABLE meta ADD COLUMN replica_nonce BLOB;
                    PRAGMA user_version = 8;
                    """
            )
        }
        migrator.registerMigration("v9 states name their rows' values") { db in
            try db.execute(sql: "PRAGMA user_version = 9;")
        }
        migrator.registerMigration("v10 states in the held form") { db in
            try db.execute(sql: "PRAGMA user_version = 10;")
        }
        migrator.registerMigration("v11 runs keep shared beginnings") { db in
            try db.execute(sql: "PRAGMA user_version = 11;")
        }
        migrator.registerMigration("v12 states by rowid") { db in
            try db.execute(
                sql: """
                    CREATE TABLE app_rowid_states (
                        tbl INTEGER NOT NULL,
                        rid INTEGER NOT NULL,
                        state BLOB NOT NULL,
                        PRIMARY KEY (tbl, rid)
                    ) WITHOUT ROWID;
                    PRAGMA user_version = 12;
                    """
            )
        }
        migrator.registerMigration("v13 runs of rowids") { db in
            try db.execute(sql: "PRAGMA user_version = 13;")
        }
        migrator.registerMigration("v14 runs of rowids for mutable tables") { db in
            try db.execute(sql: "PRAGMA user_version = 14;")
        }
        return migrator
    }
}

/// A dot packed into a 64-bit rowid: the replica's local number in the high bits, its counter in
/// the low 40 (a trillion operations per replica; eight million replicas per database).
enum DotKey {
    static let counterBits: Int64 = 40
    /// Every counter the protocol allows (`Dot.maxCounter`, 2^40 − 1) fits.
    static let counterMask: Int64 = Int64(Dot.maxCounter)
    static let maxReplicaNumber: Int64 = (1 << (63 - counterBits)) - 1

    static func key(number: Int64, counter: UInt64) -> Int64 { number << counterBits | Int64(counter) }
    static func number(_ key: Int64) -> Int64 { key >> counterBits }
    static func counter(_ key: Int64) -> UInt64 { UInt64(key & counterMask) }
}
