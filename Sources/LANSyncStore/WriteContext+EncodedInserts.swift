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
    /// row uses it without copying its arrays). The per-column parts are flat byte arrays with
    /// where each column's part ends, so that a row copies them without retaining an array per
    /// column (the tuples of arrays this replaced cost a retain and a release per value).
    final class InsertLayout {
        let table: AppCatalog.Table
        /// field(table name): what the digest hashes before the key.
        let identity: [UInt8]
        let kind: RowChange.Kind
        /// Declaration indexes of the key columns, in key order.
        let keyColumns: [Int]
        /// Declaration indexes of the other columns, by name (as a change lists them).
        let plainColumns: [Int]
        /// What precedes each plain column's value in the canonical state
        /// (`RowState.appendFirstCell`), one after another; `cellPrefixEnds[i]` ends column i's.
        let cellPrefixes: [UInt8]
        let cellPrefixEnds: [Int]
        /// The same in the stored state: the column's number (varint) and stamp index 0.
        let storedPrefixes: [UInt8]
        let storedPrefixEnds: [Int]

        init(table: AppCatalog.Table, identity: [UInt8], kind: RowChange.Kind, plain: [(index: Int, cellPrefix: [UInt8], number: Int64)]) {
            self.table = table
            self.identity = identity
            self.kind = kind
            keyColumns = table.keyColumns
            plainColumns = plain.map(\.index)
            var (cells, cellEnds, stored, storedEnds) = ([UInt8](), [Int](), [UInt8](), [Int]())
            for column in plain {
                cells += column.cellPrefix
                cellEnds.append(cells.count)
                stored.appendVarint(column.number)
                stored.append(0)
                storedEnds.append(stored.count)
            }
            (cellPrefixes, cellPrefixEnds, storedPrefixes, storedPrefixEnds) = (cells, cellEnds, stored, storedEnds)
        }
    }

    mutating func insertLayout(_ table: AppCatalog.Table) throws -> InsertLayout {
        if let layout = encodedInsertBuffers.lastLayout, layout.table.number == table.number { return layout }
        if let layout = insertLayouts[table.number] {
            encodedInsertBuffers.lastLayout = layout
            return layout
        }
        _ = try columnNumbers()
        var plain = [(index: Int, cellPrefix: [UInt8], number: Int64)]()
        for index in table.plainColumns {
            var prefix = [UInt8]()
            RowState.appendFirstCell(named: table.columns[index], to: &prefix)
            plain.append((index, prefix, try columnNumbering!.number(table.columns[index], db)))
        }
        var identity = [UInt8]()
        identity.appendField(table.name)
        let layout = InsertLayout(table: table, identity: identity, kind: table.appendOnly ? .append : .insert, plain: plain)
        insertLayouts[table.number] = layout
        encodedInsertBuffers.lastLayout = layout
        return layout
    }

    /// Queues a row an app's statement wrote, given as the canonical bytes of its values in
    /// declaration order (`encoded[range]`, see the extension's comment): its state goes in with
    /// the next rows' (`storeQueuedStates`), and its digest hash is added with the write's
    /// (`hashEncodedInserts`). False, taking nothing, when its values are too large: the general
    /// way says why. Every row queued refers to the same `encoded`, the write's captured bytes.
    mutating func insertEncoded(_ encoded: [UInt8], range: Range<Int>, into table: AppCatalog.Table, now: UInt64) throws -> Bool {
        let layout = try insertLayout(table)
        if encodedInsertBuffers.ownNumber < 0 { encodedInsertBuffers.ownNumber = try number(of: replica) }
        // The buffers of the rows before, reused (taken out so that `self` stays free to use).
        var buffers = encodedInsertBuffers
        encodedInsertBuffers = EncodedInsertBuffers()
        defer { encodedInsertBuffers = buffers }
        let startsStart = buffers.starts.count
        guard Self.appendValueStarts(encoded[range], to: &buffers.starts),
            buffers.starts.count - startsStart == table.columns.count + 1
        else {
            buffers.starts.removeSubrange(startsStart...)
            throw malformedCapture(table.declared!)
        }
        let size = buffers.starts.withUnsafeBufferPointer { all in
            let starts = UnsafeBufferPointer(rebasing: all[startsStart...])
            var size = 0
            for index in layout.plainColumns {
                let start = starts[index]
                switch encoded[start] {
                case 0: size += 1
                case 1, 2: size += 8
                default: size += starts[index + 1] - start - 5
                }
            }
            return size
        }
        guard size <= RowChange.maxValueBytes else {
            buffers.starts.removeSubrange(startsStart...)
            return false
        }
        let keyStart = buffers.queuedKeys.count
        buffers.queuedKeys.append(UInt8(layout.keyColumns.count))
        var nullKey = false
        buffers.starts.withUnsafeBufferPointer { all in
            let starts = UnsafeBufferPointer(rebasing: all[startsStart...])
            for index in layout.keyColumns {
                if encoded[starts[index]] == 0 { nullKey = true }
                buffers.queuedKeys.appendBytes(encoded[starts[index] ..< starts[index + 1]])
            }
        }
        if nullKey {
            buffers.starts.removeSubrange(startsStart...)
            buffers.queuedKeys.removeSubrange(keyStart...)
            throw self.nullKey(table)
        }

        let (hlc, dot) = (tick(now: now), nextDot())
        let storedStart = buffers.queuedStates.count
        StoredRowState.appendFirstHeader(
            causalLength: 1, marker: layout.kind, stamp: (hlc, buffers.ownNumber, dot.counter), cells: layout.plainColumns.count,
            to: &buffers.queuedStates)
        buffers.starts.withUnsafeBufferPointer { all in
            let starts = UnsafeBufferPointer(rebasing: all[startsStart...])
            layout.storedPrefixes.withUnsafeBufferPointer { prefixes in
                var prefixStart = 0
                for (position, index) in layout.plainColumns.enumerated() {
                    let prefixEnd = layout.storedPrefixEnds[position]
                    buffers.queuedStates.append(contentsOf: UnsafeBufferPointer(rebasing: prefixes[prefixStart..<prefixEnd]))
                    prefixStart = prefixEnd
                    StoredRowState.appendValue(canonical: encoded[starts[index] ..< starts[index + 1]], to: &buffers.queuedStates)
                }
            }
        }
        buffers.queuedStates.appendVarint(UInt64(0))
        buffers.queued.append(
            QueuedRow(
                layout: layout, key: keyStart..<buffers.queuedKeys.count, state: storedStart..<buffers.queuedStates.count,
                starts: startsStart, stamp: RowState.Stamp(hlc: hlc, dot: dot), now: now))
        return true
    }

    /// A new row `insertEncoded` has yet to store: its state waits to go in with others. Its
    /// parts are ranges of `EncodedInsertBuffers`, so that queuing one allocates nothing.
    struct QueuedRow {
        let layout: InsertLayout
        /// Its key, in `EncodedInsertBuffers.queuedKeys`.
        let key: Range<Int>
        /// Its stored state, in `EncodedInsertBuffers.queuedStates`.
        let state: Range<Int>
        /// Where its values start in the write's captured bytes, and their end: the first of
        /// `columns + 1` positions in `EncodedInsertBuffers.starts`.
        let starts: Int
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
    /// reads or writes a row's state, and at the end of each of the app's writes. `encoded`: the
    /// write's captured bytes, which the queued rows' values are in.
    mutating func storeQueuedStates(_ encoded: [UInt8]) throws {
        var buffers = encodedInsertBuffers
        encodedInsertBuffers = EncodedInsertBuffers()
        defer { encodedInsertBuffers = buffers }
        guard !buffers.queued.isEmpty else { return }
        // Taken out whole and put back emptied, keeping their capacity (emptied in place while
        // still shared, each would have been allocated again).
        var (rows, states, keys, allStarts) = ([QueuedRow](), [UInt8](), [UInt8](), [Int]())
        swap(&rows, &buffers.queued)
        swap(&states, &buffers.queuedStates)
        swap(&keys, &buffers.queuedKeys)
        swap(&allStarts, &buffers.starts)
        defer {
            rows.removeAll(keepingCapacity: true)
            states.removeAll(keepingCapacity: true)
            keys.removeAll(keepingCapacity: true)
            allStarts.removeAll(keepingCapacity: true)
            (buffers.queued, buffers.queuedStates, buffers.queuedKeys, buffers.starts) = (rows, states, keys, allStarts)
        }
        let statements = try rowStatements()
        var first = 0
        while first < rows.count {
            let chunk = rows[first ..< min(first + Self.statesPerStatement, rows.count)]
            first = chunk.endIndex
            let insert = try statements.insertNewStates(chunk.count, db)
            let inserted = try keys.withUnsafeBytes { keys in
                try states.withUnsafeBytes { states in
                    var parameter: Int32 = 1
                    for row in chunk {
                        insert.bind(parameter, row.layout.table.number)
                        insert.bindStatic(parameter + 1, UnsafeRawBufferPointer(rebasing: keys[row.key]))
                        insert.bindStatic(parameter + 2, UnsafeRawBufferPointer(rebasing: states[row.state]))
                        parameter += 3
                    }
                    return try insert.runClearingBindings()
                }
            }
            for row in chunk {
                let layout = row.layout
                let key = keys[row.key]
                // When some were held already, each tells by whether its own state went in.
                let stored = try inserted == chunk.count || holds(table: layout.table.number, key: key, state: states[row.state])
                let values = allStarts[row.starts] ..< allStarts[row.starts + layout.table.columns.count]
                guard stored else {
                    try self.insert(
                        try SQLValue.values(from: Array(encoded[values])), into: layout.table, now: row.now,
                        stamp: (row.stamp.hlc, row.stamp.dot))
                    continue
                }
                // Its dot is this replica's (`dotKey` without looking the number up again).
                guard row.stamp.dot.counter <= UInt64(DotKey.counterMask) else { _ = try dotKey(row.stamp.dot); continue }
                try indexNewRow(
                    dotKey: DotKey.key(number: buffers.ownNumber, counter: row.stamp.dot.counter), table: layout.table.number, key: key)
                // The canonical bytes of the row and its state (`RowState.appendFirst`), for the
                // digest, built only for a row that went in. (Built when queued and copied here
                // instead, bulk inserts were 0.45x against 0.47x, 36 alternated figures each.)
                buffers.digestInput.append(contentsOf: layout.identity)
                buffers.digestInput.appendBytes(key)
                RowState.appendFirstHeader(
                    causalLength: 1, marker: layout.kind, stamp: row.stamp, cells: layout.plainColumns.count, to: &buffers.digestInput)
                allStarts.withUnsafeBufferPointer { all in
                    let starts = UnsafeBufferPointer(rebasing: all[row.starts...])
                    layout.cellPrefixes.withUnsafeBufferPointer { prefixes in
                        var prefixStart = 0
                        for (position, index) in layout.plainColumns.enumerated() {
                            let prefixEnd = layout.cellPrefixEnds[position]
                            buffers.digestInput.append(contentsOf: UnsafeBufferPointer(rebasing: prefixes[prefixStart..<prefixEnd]))
                            prefixStart = prefixEnd
                            buffers.digestInput.appendBytes(encoded[starts[index] ..< starts[index + 1]])
                        }
                    }
                }
                buffers.digestInput.appendBigEndian(UInt32(0))  // no counters
                buffers.digestInputEnds.append(buffers.digestInput.count)
                countRows(in: layout.table.number, by: 1)
            }
        }
    }

    /// Whether `app_rows` holds exactly `state` for the row (its own, just inserted).
    private mutating func holds(table: Int64, key: ArraySlice<UInt8>, state: ArraySlice<UInt8>) throws -> Bool {
        let select = try rowStatements().selectState
        select.bind(1, table)
        key.withUnsafeBytes { select.bind(2, $0) }
        var same = false
        try select.forEachRow { columns in same = columns.withBlob(0) { $0.elementsEqual(state) } }
        return same
    }

    /// Appends where each value of a row's canonical bytes starts, and the end; false when they
    /// do not read.
    static func appendValueStarts(_ bytes: ArraySlice<UInt8>, to starts: inout [Int]) -> Bool {
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
        guard !encodedInsertBuffers.digestInputEnds.isEmpty else { return }
        // Taken out and put back emptied, keeping their capacity (see `storeQueuedStates`).
        var (bytes, ends) = ([UInt8](), [Int]())
        swap(&bytes, &encodedInsertBuffers.digestInput)
        swap(&ends, &encodedInsertBuffers.digestInputEnds)
        defer {
            bytes.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            (encodedInsertBuffers.digestInput, encodedInsertBuffers.digestInputEnds) = (bytes, ends)
        }
        digest.add(Self.digest(of: bytes, ends: ends, hasher: hasher))
    }

    /// The digest of the rows whose hashed bytes are `bytes`, each ending at its `ends` position.
    private static func digest(of bytes: [UInt8], ends: [Int], hasher: ElementHasher) -> StateDigest {
        let count = ends.count
        @Sendable func hash(_ range: Range<Int>) -> StateDigest {
            var digest = StateDigest()
            for index in range {
                let start = index == 0 ? 0 : ends[index - 1]
                digest.insert(hash: hasher.hash(Array(bytes[start ..< ends[index]])))
            }
            return digest
        }
        if count < Self.rowsHashedOnTwoThreads { return hash(0..<count) }
        let halves = Mutex<[StateDigest]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { half in
            let part = hash(half == 0 ? 0..<count / 2 : count / 2..<count)
            halves.withLock { $0.append(part) }
        }
        var digest = StateDigest()
        for part in halves.withLock({ $0 }) { digest.add(part) }
        return digest
    }

    /// Fewer rows are hashed where they are: handing them to another thread would cost more.
    static let rowsHashedOnTwoThreads = 64
}

/// Buffers `insertEncoded` reuses from row to row, and the rows it queued.
struct EncodedInsertBuffers {
    /// The queued rows' value positions (`QueuedRow.starts`).
    var starts: [Int] = []
    var queued: [WriteContext.QueuedRow] = []
    /// The queued rows' keys, one after another.
    var queuedKeys: [UInt8] = []
    /// This replica's number (`replicas.num`), once looked up: every queued row's dot is its own.
    var ownNumber: Int64 = -1
    /// The layout of the table last inserted into (a bulk insert's rows are of one table).
    var lastLayout: WriteContext.InsertLayout?
    /// The queued rows' stored states, one after another.
    var queuedStates: [UInt8] = []
    /// The bytes each new row's digest hash is of, one after another, and where each ends.
    var digestInput: [UInt8] = []
    var digestInputEnds: [Int] = []
}
