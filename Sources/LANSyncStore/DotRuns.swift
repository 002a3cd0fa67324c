import GRDB
import LANSyncCore

/// The dot index of rows that were new when written, kept one run at a time.
///
/// Deltas find app-table changes by their dots, so every change that wins somewhere in its row
/// is indexed by its dot. A change that updates a held row gets an `app_ops` row of its own. The
/// rows a bulk insert or a catch-up writes are new and come with consecutive dots, so they are
/// indexed as runs instead (`app_op_runs`): one row per run of consecutive dots of one replica
/// into one table, holding each dot's row key, in order. That is one B-tree row per run
/// instead of one per row, about a tenth of what storing a new row cost.
///
/// A run keeps each key as what it shares with the key before it (a count) and the rest: keys
/// written together often share their beginning (time-ordered IDs, a session's strokes by
/// number, integer keys), and such a key then takes a few bytes instead of its length. Runs
/// stored before (schema 10 and earlier) keep each key whole, as a varint length and its bytes;
/// a run of shared beginnings starts with a 0, the length no key has.
///
/// A run of rows that a table keeping states by rowid shows (`AppCatalog.Table.keepsStatesByRowid`)
/// names each row by its rowid instead (`rowidForm`, schema 13): the first rowid, then each
/// next one as a signed step from the one before, which is one byte for rows inserted one after
/// another, whatever their keys. A reader finds the key in the app's table at that rowid. Such
/// a row keeps its rowid until it leaves its table (an append-only row never moves); when it
/// leaves, every dot its state still shows gets an `app_ops` row with its key, in the same
/// transaction (`WriteContext.writeStateByKey`), and readers take that row for the dot. So a
/// rowid that shows no row is skipped, and one that SQLite gave another row since is skipped
/// by the rule below: that row's state does not show the dot.
///
/// A run says which row each of its dots wrote, not that the change still wins: a later change
/// may supersede it. Readers therefore look each run dot up in its row's state and skip one the
/// row no longer shows; its stub is in `row_stubs`, as for every superseded change. When a run
/// dot needs a stub while it still wins (a part of it lost), it gets an `app_ops` row with the
/// stub, and that row is what readers take for that dot.
struct DotRun {
    /// A reader steps over the keys of a run's dots before its range (`keys(_:count:wanted:)`),
    /// and a catch-up batch or a chain extension reads at most a few hundred: runs stay short
    /// enough that this costs little.
    static let maxDots: Int64 = 4_096
    /// What a run's keys may take, stored: a few runs then fill a database page, where a run
    /// larger than half of one left the rest of its page empty.
    static let maxKeyBytes = 2 * 1_024
    /// The first byte of a run that keeps its keys as shared beginnings and rests.
    static let sharedForm: UInt8 = 0
    /// The first byte of a run that names its rows by rowid. No run of whole keys starts with
    /// it: that byte is the first key's length, and a key takes at least 5 bytes.
    static let rowidForm: UInt8 = 1

    let table: Int64
    /// The first and last dot (`DotKey`s of one replica); every dot between is in the run.
    let first: Int64
    private(set) var last: Int64
    /// The form's byte, then each dot's row, in dot order. Shared beginnings: a varint count of
    /// the bytes a key shares with the key before it, a varint count of the bytes that follow,
    /// and those bytes. Rowids: the first as a zigzag varint, then each next one's step from the
    /// one before, as a zigzag varint.
    private(set) var keys: [UInt8]
    /// The last key added (shared beginnings).
    private var lastKey: [UInt8] = []
    /// The last rowid added (rowids).
    private var lastRowid: Int64 = 0

    init(table: Int64, dot: Int64, key: ArraySlice<UInt8>) {
        self.table = table
        first = dot
        last = dot
        keys = [Self.sharedForm]
        keys.reserveCapacity(Self.maxKeyBytes)
        add(key, sharing: 0)
    }

    /// A run of rowids, starting with `dot`, which wrote the row at `rowid`.
    init(table: Int64, dot: Int64, rowid: Int64) {
        self.table = table
        first = dot
        last = dot
        keys = [Self.rowidForm]
        keys.reserveCapacity(64)
        keys.appendVarint(Self.zigzag(rowid))
        lastRowid = rowid
    }

    /// Whether the run names its rows by rowid (`rowidForm`) rather than by key.
    var namesRowids: Bool { keys[0] == Self.rowidForm }

    /// Whether `dot` of `table` may follow the run's last dot.
    private func continues(table: Int64, dot: Int64) -> Bool {
        table == self.table && dot == last + 1 && DotKey.number(dot) == DotKey.number(first)
            && dot - first < Self.maxDots
    }

    /// Adds `dot` (of `table`, writing the row at `rowid`) when it continues a run of rowids;
    /// false when it does not.
    mutating func extend(table: Int64, dot: Int64, rowid: Int64) -> Bool {
        guard namesRowids, continues(table: table, dot: dot) else { return false }
        let (step, overflow) = rowid.subtractingReportingOverflow(lastRowid)
        // A step takes at most 10 bytes.
        guard !overflow, keys.count + 10 <= Self.maxKeyBytes else { return false }
        last = dot
        keys.appendVarint(Self.zigzag(step))
        lastRowid = rowid
        return true
    }

    /// Adds `dot` (of `table`, writing `key`) when it continues a run of keys; false when it does not.
    mutating func extend(table: Int64, dot: Int64, key: ArraySlice<UInt8>) -> Bool {
        guard !namesRowids, continues(table: table, dot: dot) else { return false }
        var shared = 0
        let limit = min(lastKey.count, key.count)
        while shared < limit, lastKey[shared] == key[key.startIndex + shared] { shared += 1 }
        // The two counts take at most 5 bytes each (a key's length is below 2^35).
        guard keys.count + 2 * 5 + key.count - shared <= Self.maxKeyBytes else { return false }
        last = dot
        add(key, sharing: shared)
        return true
    }

    private mutating func add(_ key: ArraySlice<UInt8>, sharing shared: Int) {
        keys.appendVarint(shared)
        keys.appendVarint(key.count - shared)
        keys.append(contentsOf: key.dropFirst(shared))
        lastKey.removeAll(keepingCapacity: true)
        lastKey.append(contentsOf: key)
    }

    func contains(_ dot: Int64) -> Bool { first <= dot && dot <= last }

    /// Stores the run, unless one of its dots is indexed already (then the dot is returned and
    /// nothing is written): a dot names one change, and two rows written by one dot are a delta
    /// that reuses it.
    func write(_ db: Database) throws -> Int64? {
        let op = try BoundStatement(db, sql: "SELECT dot FROM app_ops WHERE dot BETWEEN ? AND ? LIMIT 1")
        op.bind(1, first)
        op.bind(2, last)
        var taken: Int64?
        try op.forEachRow { taken = $0.int64(0) }
        if let taken { return taken }
        if let other = try Self.run(reaching: first, db), other.first <= last { return max(first, other.first) }
        let insert = try BoundStatement(db, sql: "INSERT INTO app_op_runs (last, first, tbl, keys) VALUES (?, ?, ?, ?)")
        insert.bind(1, last)
        insert.bind(2, first)
        insert.bind(3, table)
        insert.bind(4, keys)
        try insert.run()
        return nil
    }

    /// The stored run whose last dot is the first at or after `dot`: the only one that may hold it.
    static func run(reaching dot: Int64, _ db: Database) throws -> (first: Int64, last: Int64)? {
        let select = try BoundStatement(
            db,
            sql: "SELECT first, last FROM app_op_runs WHERE last >= ? ORDER BY last LIMIT 1"
        )
        select.bind(1, dot)
        var found: (first: Int64, last: Int64)?
        try select.forEachRow { found = ($0.int64(0), $0.int64(1)) }
        return found
    }

    /// Whether a stored run holds `dot`.
    static func holds(_ dot: Int64, _ db: Database) throws -> Bool {
        guard let run = try run(reaching: dot, db) else { return false }
        return run.first <= dot
    }

    /// A signed number as an unsigned one that is small when the number is near zero (0, −1, 1,
    /// −2, … become 0, 1, 2, 3, …), so a step back takes a byte as a step forward does.
    static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }

    static func unzigzag(_ value: UInt64) -> Int64 { Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1) }

    /// The rowids at `wanted` (positions in dot order) of a stored run of rowids of `count` dots.
    static func rowids(_ bytes: UnsafeRawBufferPointer, count: Int, wanted: ClosedRange<Int>) throws -> [Int64] {
        var reader = StoredRowState.Reader(bytes: bytes, position: 1)
        var rowids = [Int64]()
        rowids.reserveCapacity(wanted.count)
        var position = 0
        var rowid: Int64 = 0
        do {
            guard bytes.first == rowidForm else { throw StoredRowState.Reader.damaged }
            while reader.position < bytes.count {
                let step = unzigzag(try reader.varint())
                if position == 0 {
                    rowid = step
                } else {
                    let (next, overflow) = rowid.addingReportingOverflow(step)
                    guard !overflow else { throw StoredRowState.Reader.damaged }
                    rowid = next
                }
                if wanted.contains(position) { rowids.append(rowid) }
                position += 1
            }
        } catch {
            throw StoreError(.database, "a run of the dot index does not read; the database is damaged")
        }
        try checkCount(position, count)
        return rowids
    }

    private static func checkCount(_ found: Int, _ count: Int) throws {
        guard found == count else {
            throw StoreError(
                .database,
                "a run of the dot index holds \(found) rows for \(count) dots; the database is damaged"
            )
        }
    }

    /// The keys at `wanted` (positions in dot order) of a stored run of `count` dots, in either
    /// form of keys; the keys before them are stepped over (a delta may need a few of a run's).
    static func keys(_ bytes: UnsafeRawBufferPointer, count: Int, wanted: ClosedRange<Int>) throws -> [[UInt8]] {
        var reader = StoredRowState.Reader(bytes: bytes, position: 0)
        var keys = [[UInt8]]()
        keys.reserveCapacity(wanted.count)
        var position = 0
        do {
            guard bytes.first != rowidForm else { throw StoredRowState.Reader.damaged }
            if bytes.first == sharedForm {
                reader.position = 1
                var current = [UInt8]()
                while reader.position < bytes.count {
                    let shared = try reader.count()
                    let rest = try reader.take(try reader.count())
                    guard shared <= current.count, shared + rest.count > 0 else { throw StoredRowState.Reader.damaged }
                    current.removeSubrange(shared...)
                    current.append(contentsOf: rest)
                    if wanted.contains(position) { keys.append(current) }
                    position += 1
                }
            } else {
                while reader.position < bytes.count {
                    let key = try reader.take(try reader.count())
                    if wanted.contains(position) { keys.append(Array(key)) }
                    position += 1
                }
            }
        } catch {
            throw StoreError(.database, "a run of the dot index does not read; the database is damaged")
        }
        try checkCount(position, count)
        return keys
    }
}

/// The writes indexed in one dot range, in dot order, from both forms of the index (`app_ops`
/// and `app_op_runs`; see `DotRun`).
struct IndexedWrites {
    struct Write {
        let dot: Int64
        let table: Int64
        let key: [UInt8]
        /// The stub kept for a live change of which a part lost (`app_ops.stub`).
        let stub: [UInt8]?
        /// From a run: the change may have been superseded since; the row's state tells.
        let inRun: Bool
    }

    /// Calls `body` with each write indexed in `(lower, upper]`, in dot order, until it returns
    /// false. `limit`: at most this many are read from `app_ops` (which holds only live writes),
    /// for a caller that stops after that many live writes. `rows` finds the keys a run of
    /// rowids names; a run dot whose rowid shows no row is skipped (see `DotRun`).
    static func forEach(
        _ db: Database,
        lower: Int64,
        upper: Int64,
        limit: Int? = nil,
        rows: StoredStates,
        _ body: (Write) throws -> Bool
    ) throws {
        let ops = try BoundStatement(
            db,
            sql: "SELECT dot, tbl, key, stub FROM app_ops WHERE dot > ? AND dot <= ? ORDER BY dot LIMIT ?"
        )
        ops.bind(1, lower)
        ops.bind(2, upper)
        ops.bind(3, Int64(limit ?? -1))
        var listed = [Write]()
        try ops.forEachRow { columns in
            listed.append(
                Write(
                    dot: columns.int64(0),
                    table: columns.int64(1),
                    key: columns.withBlob(2) { Array($0) },
                    stub: columns.isNull(3) ? nil : columns.withBlob(3) { Array($0) },
                    inRun: false
                )
            )
        }
        // Runs overlapping the range, one at a time: a run ends at most `maxDots` past `upper`.
        let runs = try BoundStatement(
            db,
            sql:
                "SELECT last, first, tbl, keys FROM app_op_runs WHERE last > ? AND last <= ? AND first <= ? ORDER BY last LIMIT 1"
        )
        /// The run being read: its dots inside the range, its table, and their keys (nil: the
        /// rowid a run names shows no row).
        var run: (dots: ClosedRange<Int64>, table: Int64, keys: [[UInt8]?])?
        /// The next dot of `run` to read.
        var runDot: Int64 = 0
        func nextRun(after dot: Int64) throws {
            run = nil
            runs.bind(1, dot)
            runs.bind(2, upper &+ DotRun.maxDots)
            runs.bind(3, upper)
            try runs.forEachRow { columns in
                let (last, first) = (columns.int64(0), columns.int64(1))
                guard first <= last, last - first < DotRun.maxDots else {
                    throw StoreError(
                        .database,
                        "a run of the dot index spans dots \(first) to \(last); the database is damaged"
                    )
                }
                // Only the dots inside the range are read: the keys of the others are stepped over.
                let dots = max(first, lower + 1)...min(last, upper)
                let (count, wanted) = (
                    Int(last - first + 1), Int(dots.lowerBound - first)...Int(dots.upperBound - first)
                )
                let table = columns.int64(2)
                let keys: [[UInt8]?] = try columns.withBlob(3) { bytes in
                    if bytes.first == DotRun.rowidForm {
                        return try rows.keys(of: table, atRowids: DotRun.rowids(bytes, count: count, wanted: wanted))
                    }
                    return try DotRun.keys(bytes, count: count, wanted: wanted)
                }
                run = (dots, table, keys)
            }
            if let run { runDot = run.dots.lowerBound }
        }
        try nextRun(after: lower)
        var index = 0
        while true {
            if let current = run, runDot > current.dots.upperBound {
                // This run is read: the next one, unless this one reached the range's end.
                if current.dots.upperBound >= upper { run = nil } else { try nextRun(after: current.dots.upperBound) }
                continue
            }
            var fromRun: Write?
            if let current = run {
                guard let key = current.keys[Int(runDot - current.dots.lowerBound)] else {
                    // The row left its rowid; a dot its state still shows has an `app_ops` row.
                    runDot += 1
                    continue
                }
                fromRun = Write(dot: runDot, table: current.table, key: key, stub: nil, inRun: true)
            }
            let fromOps = index < listed.count ? listed[index] : nil
            let write: Write
            switch (fromOps, fromRun) {
            case (nil, nil): return
            case (let op?, nil):
                write = op
                index += 1
            case (nil, let inRun?):
                write = inRun
                runDot += 1
            case (let op?, let inRun?):
                if op.dot <= inRun.dot {
                    write = op
                    index += 1
                    // A run dot with an `app_ops` row of its own is read from there.
                    if op.dot == inRun.dot { runDot += 1 }
                } else {
                    write = inRun
                    runDot += 1
                }
            }
            guard try body(write) else { return }
        }
    }

    /// The same, with each write's row state (`app_rows` or `app_rowid_states`), read once for consecutive writes of
    /// one row (an insert, then its updates); `rows` reads the values it names of the app's row.
    static func forEachWithState(
        _ db: Database,
        lower: Int64,
        upper: Int64,
        limit: Int? = nil,
        columns: [Int64: String],
        replicas: [Int64: ReplicaID],
        rows: AppRowValues,
        _ body: (Write, RowState) throws -> Bool
    ) throws {
        var last: (table: Int64, key: [UInt8], state: RowState)?
        try forEach(db, lower: lower, upper: upper, limit: limit, rows: try rows.states()) { write in
            if last == nil || last!.table != write.table || last!.key != write.key {
                let state = try rows.state(table: write.table, key: write.key, columns: columns, replicas: replicas)
                guard let state else {
                    let dot = try RowDecoding.dot(write.dot, replicas: replicas)
                    throw StoreError(.database, "change \(dot) is indexed, but its row is not; the database is damaged")
                }
                last = (write.table, write.key, state)
            }
            return try body(write, last!.state)
        }
    }
}
