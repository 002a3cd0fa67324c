import Dispatch
import Synchronization
import LANSyncCore

/// The bulk path of an app's INSERT into a table without counter columns: the capture hands over
/// the row's values as canonical bytes (`AppWriteCapture.Event.encoded`), and the row's key, its
/// stored state and the bytes the digest hashes are cut and copied from them, without a
/// `SQLValue`, a `String` or a `RowChange` for each value. It writes exactly what `insert`
/// writes for the same row (the tests compare the two); a row held already (deleted, say) goes
/// that general way, keeping the stamp this one took.
extension WriteContext {
    /// What every encoded insert into one table shares, made once per transaction (a class: each
    /// row uses it without copying its arrays).
    final class InsertLayout {
        /// field(table name): what the digest hashes before the key.
        let identity: [UInt8]
        let kind: RowChange.Kind
        /// Declaration indexes of the key columns, in key order.
        let keyColumns: [Int]
        /// Declaration indexes of the other columns, by name (as a change lists them), with what
        /// precedes each one's value in the canonical state (`RowState.appendFirstCell`) and its
        /// number in stored states.
        let plain: [(index: Int, cellPrefix: [UInt8], number: Int64)]

        init(identity: [UInt8], kind: RowChange.Kind, keyColumns: [Int], plain: [(index: Int, cellPrefix: [UInt8], number: Int64)]) {
            self.identity = identity
            self.kind = kind
            self.keyColumns = keyColumns
            self.plain = plain
        }
    }

    mutating func insertLayout(_ table: AppCatalog.Table) throws -> InsertLayout {
        if let layout = insertLayouts[table.number] { return layout }
        _ = try columnNumbers()
        var plain = [(index: Int, cellPrefix: [UInt8], number: Int64)]()
        for index in table.plainColumns {
            var prefix = [UInt8]()
            RowState.appendFirstCell(named: table.columns[index], to: &prefix)
            plain.append((index, prefix, try columnNumbering!.number(table.columns[index], db)))
        }
        var identity = [UInt8]()
        identity.appendField(table.name)
        let layout = InsertLayout(identity: identity, kind: table.appendOnly ? .append : .insert, keyColumns: table.keyColumns, plain: plain)
        insertLayouts[table.number] = layout
        return layout
    }

    /// Queues a row an app's statement wrote, given as the canonical bytes of its values in
    /// declaration order (see the extension's comment): its state goes in with the next rows'
    /// (`storeQueuedStates`), and its digest hash is added with the write's (`hashEncodedInserts`).
    /// False, taking nothing, when its values are too large: the general way says why.
    mutating func insertEncoded(_ bytes: ArraySlice<UInt8>, into table: AppCatalog.Table, now: UInt64) throws -> Bool {
        let layout = try insertLayout(table)
        // The buffers of the rows before, reused (taken out so that `self` stays free to use).
        var buffers = encodedInsertBuffers
        encodedInsertBuffers = EncodedInsertBuffers()
        defer { encodedInsertBuffers = buffers }
        guard Self.valueStarts(bytes, into: &buffers.starts), buffers.starts.count == table.columns.count + 1 else {
            throw malformedCapture(table.declared!)
        }
        let starts = buffers.starts
        func value(_ index: Int) -> ArraySlice<UInt8> { bytes[starts[index] ..< starts[index + 1]] }

        var key = [UInt8(layout.keyColumns.count)]
        for index in layout.keyColumns {
            if bytes[starts[index]] == 0 { throw nullKey(table) }
            key.appendBytes(value(index))
        }
        var size = 0
        for column in layout.plain {
            let start = starts[column.index]
            switch bytes[start] {
            case 0: size += 1
            case 1, 2: size += 8
            default: size += starts[column.index + 1] - start - 5
            }
        }
        guard size <= RowChange.maxValueBytes else { return false }

        let (hlc, dot) = (tick(now: now), nextDot())
        let storedStart = buffers.queuedStates.count
        StoredRowState.appendFirstHeader(
            causalLength: 1, marker: layout.kind, stamp: (hlc, try number(of: dot.replica), dot.counter), cells: layout.plain.count,
            to: &buffers.queuedStates)
        for column in layout.plain {
            buffers.queuedStates.appendVarint(column.number)
            buffers.queuedStates.append(0)
            StoredRowState.appendValue(canonical: value(column.index), to: &buffers.queuedStates)
        }
        buffers.queuedStates.appendVarint(UInt64(0))
        buffers.queued.append(
            QueuedRow(
                table: table, layout: layout, key: key, state: storedStart..<buffers.queuedStates.count, values: bytes,
                stamp: RowState.Stamp(hlc: hlc, dot: dot), now: now))
        return true
    }

    /// A new row `insertEncoded` has yet to store: its state waits to go in with others.
    struct QueuedRow {
        let table: AppCatalog.Table
        let layout: InsertLayout
        let key: [UInt8]
        /// Its stored state, in `EncodedInsertBuffers.queuedStates`.
        let state: Range<Int>
        /// Its values' canonical bytes, as captured.
        let values: ArraySlice<UInt8>
        let stamp: RowState.Stamp
        let now: UInt64
    }

    /// New rows' states go in `statesPerStatement` at a time: one statement of many rows costs
    /// SQLite less per row than one statement each (in C, 1.5–1.8 µs a row against 1.9–2.9 for a
    /// 165-byte state, 100 rows a statement).
    static let statesPerStatement = 64

    /// Stores the states `insertEncoded` queued, and what follows from each: its dot, its digest
    /// input, the row count. A row whose key was held already (deleted, say) goes the general way
    /// with the stamp it took. Called when a statement's worth is queued, before anything else
    /// reads or writes a row's state, and at the end of each of the app's writes.
    mutating func storeQueuedStates() throws {
        var buffers = encodedInsertBuffers
        encodedInsertBuffers = EncodedInsertBuffers()
        defer { encodedInsertBuffers = buffers }
        let rows = buffers.queued
        guard !rows.isEmpty else { return }
        buffers.queued.removeAll(keepingCapacity: true)
        let states = buffers.queuedStates
        buffers.queuedStates.removeAll(keepingCapacity: true)
        let statements = try rowStatements()
        var first = 0
        while first < rows.count {
            let chunk = rows[first ..< min(first + Self.statesPerStatement, rows.count)]
            first = chunk.endIndex
            let insert = try statements.insertNewStates(chunk.count, db)
            var parameter: Int32 = 1
            for row in chunk {
                insert.bind(parameter, row.table.number)
                insert.bind(parameter + 1, row.key)
                states[row.state].withUnsafeBytes { insert.bind(parameter + 2, $0) }
                parameter += 3
            }
            let inserted = try insert.run()
            for row in chunk {
                // When some were held already, each tells by whether its own state went in.
                let stored = try inserted == chunk.count || holds(row, state: states[row.state])
                guard stored else {
                    try self.insert(
                        try SQLValue.values(from: Array(row.values)), into: row.table, now: row.now, stamp: (row.stamp.hlc, row.stamp.dot))
                    continue
                }
                try indexNewRow(row.stamp.dot, table: row.table.number, key: row.key)
                // The canonical bytes of the row and its state (`RowState.appendFirst`), for the
                // digest, built only for a row that went in. (Built when queued and copied here
                // instead, bulk inserts were 0.45x against 0.47x, 36 alternated figures each.)
                guard Self.valueStarts(row.values, into: &buffers.starts) else { throw malformedCapture(row.table.declared!) }
                let layout = row.layout
                buffers.digestInput.append(contentsOf: layout.identity)
                buffers.digestInput.append(contentsOf: row.key)
                RowState.appendFirstHeader(causalLength: 1, marker: layout.kind, stamp: row.stamp, cells: layout.plain.count, to: &buffers.digestInput)
                for column in layout.plain {
                    buffers.digestInput.append(contentsOf: column.cellPrefix)
                    buffers.digestInput.appendBytes(row.values[buffers.starts[column.index] ..< buffers.starts[column.index + 1]])
                }
                buffers.digestInput.appendBigEndian(UInt32(0))  // no counters
                buffers.digestInputEnds.append(buffers.digestInput.count)
                countRows(in: row.table.number, by: 1)
            }
        }
    }

    /// Whether `app_rows` holds exactly `state` for the row (its own, just inserted).
    private mutating func holds(_ row: QueuedRow, state: ArraySlice<UInt8>) throws -> Bool {
        let select = try rowStatements().selectState
        select.bind(1, row.table.number)
        select.bind(2, row.key)
        var same = false
        try select.forEachRow { columns in same = columns.withBlob(0) { $0.elementsEqual(state) } }
        return same
    }

    /// Where each value of a row's canonical bytes starts, and the end; false when they do not read.
    static func valueStarts(_ bytes: ArraySlice<UInt8>, into starts: inout [Int]) -> Bool {
        starts.removeAll(keepingCapacity: true)
        var position = bytes.startIndex
        while position < bytes.endIndex {
            starts.append(position)
            switch bytes[position] {
            case 0: position += 1
            case 1, 2: position += 9
            case 3, 4:
                guard bytes.endIndex - position >= 5 else { return false }
                position += 5 + Int(bytes[position + 1 ..< position + 5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            default: return false
            }
        }
        guard position == bytes.endIndex else { return false }
        starts.append(position)
        return true
    }

    /// Adds the digest hashes of the rows `insertEncoded` wrote since the last call. A write of
    /// many rows hashes them on two threads: hashing is a sixth of what storing a new row costs
    /// the writer, and the app's write is waiting.
    mutating func hashEncodedInserts() {
        let (bytes, ends) = (encodedInsertBuffers.digestInput, encodedInsertBuffers.digestInputEnds)
        guard !ends.isEmpty else { return }
        encodedInsertBuffers.digestInput.removeAll(keepingCapacity: true)
        encodedInsertBuffers.digestInputEnds.removeAll(keepingCapacity: true)
        let hasher = hasher
        let count = ends.count
        @Sendable func hash(_ range: Range<Int>) -> StateDigest {
            var digest = StateDigest()
            for index in range {
                let start = index == 0 ? 0 : ends[index - 1]
                digest.insert(hash: hasher.hash(Array(bytes[start ..< ends[index]])))
            }
            return digest
        }
        if count < Self.rowsHashedOnTwoThreads {
            digest.add(hash(0..<count))
        } else {
            let halves = Mutex<[StateDigest]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { half in
                let part = hash(half == 0 ? 0..<count / 2 : count / 2..<count)
                halves.withLock { $0.append(part) }
            }
            for part in halves.withLock({ $0 }) { digest.add(part) }
        }
    }

    /// Fewer rows are hashed where they are: handing them to another thread would cost more.
    static let rowsHashedOnTwoThreads = 64
}

/// Buffers `insertEncoded` reuses from row to row, and the rows it queued.
struct EncodedInsertBuffers {
    var starts: [Int] = []
    var queued: [WriteContext.QueuedRow] = []
    /// The queued rows' stored states, one after another.
    var queuedStates: [UInt8] = []
    /// The bytes each new row's digest hash is of, one after another, and where each ends.
    var digestInput: [UInt8] = []
    var digestInputEnds: [Int] = []
}
