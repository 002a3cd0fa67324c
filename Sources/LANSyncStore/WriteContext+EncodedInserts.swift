import Dispatch
import LANSyncCore
import Synchronization

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
    final class InsertLayout: Sendable {
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
        /// The same in the stored state, which takes the held form (`StoredRowState.heldTag`):
        /// the column's number (varint), and no value, which the app's row holds.
        let storedPrefixes: [UInt8]
        let storedPrefixEnds: [Int]
        /// Per plain column (as `plainColumns`), the canonical bytes of its default when an insert
        /// leaves the column out at it (`AppCatalog.Table.leftAtDefault`), else nil.
        let leftOutDefaults: [[UInt8]?]
        /// Whether any plain column has one.
        let leavesDefaultsOut: Bool

        init(
            table: AppCatalog.Table,
            identity: [UInt8],
            kind: RowChange.Kind,
            plain: [(index: Int, cellPrefix: [UInt8], number: Int64)]
        ) {
            self.table = table
            self.identity = identity
            self.kind = kind
            keyColumns = table.keyColumns
            plainColumns = plain.map(\.index)
            leftOutDefaults = plainColumns.map { index in
                table.leftAtDefault[index].map { value in
                    var bytes = [UInt8]()
                    value.append(to: &bytes)
                    return bytes
                }
            }
            leavesDefaultsOut = leftOutDefaults.contains { $0 != nil }
            var (cells, cellEnds, stored, storedEnds) = ([UInt8](), [Int](), [UInt8](), [Int]())
            for column in plain {
                cells += column.cellPrefix
                cellEnds.append(cells.count)
                stored.appendVarint(column.number)
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
        let layout = InsertLayout(
            table: table,
            identity: identity,
            kind: table.appendOnly ? .append : .insert,
            plain: plain
        )
        insertLayouts[table.number] = layout
        encodedInsertBuffers.lastLayout = layout
        return layout
    }

    /// Queues a row an app's statement wrote, given as the canonical bytes of its values in
    /// declaration order (`encoded[range]`, see the extension's comment), with its stamp: its
    /// key, state and digest hash are made with the next rows' (`storeQueuedStates`). False,
    /// taking nothing, when its values are too large: the general way says why. A column at its
    /// left-out default is left out of the row's state, as the general way leaves it out. Every row queued
    /// refers to the same `encoded`, the write's captured bytes.
    mutating func insertEncoded(
        _ encoded: [UInt8],
        range: Range<Int>,
        into table: AppCatalog.Table,
        now: UInt64,
        rowid: Int64
    ) throws -> Bool {
        let layout = try insertLayout(table)
        if encodedInsertBuffers.ownNumber < 0 { encodedInsertBuffers.ownNumber = try number(of: replica) }
        let startsStart = encodedInsertBuffers.starts.count
        guard Self.appendValueStarts(encoded[range], to: &encodedInsertBuffers.starts),
            encodedInsertBuffers.starts.count - startsStart == table.columns.count + 1
        else {
            encodedInsertBuffers.starts.removeSubrange(startsStart...)
            throw malformedCapture(table.declared!)
        }
        let (size, nullKey) = encodedInsertBuffers.starts.withUnsafeBufferPointer { all in
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
            return (size, layout.keyColumns.contains { encoded[starts[$0]] == 0 })
        }
        guard size <= RowChange.maxValueBytes, !nullKey else {
            encodedInsertBuffers.starts.removeSubrange(startsStart...)
            if nullKey { throw self.nullKey(table) }
            return false
        }
        let (hlc, dot) = (tick(now: now), nextDot())
        encodedInsertBuffers.queued.append(
            QueuedRow(
                layout: layout,
                starts: startsStart,
                stamp: RowState.Stamp(hlc: hlc, dot: dot),
                now: now,
                rowid: rowid
            )
        )
        return true
    }

    /// A new row `insertEncoded` has yet to store.
    struct QueuedRow: Sendable {
        let layout: InsertLayout
        /// Where its values start in the write's captured bytes, and their end: the first of
        /// `columns + 1` positions in `EncodedInsertBuffers.starts`.
        let starts: Int
        let stamp: RowState.Stamp
        let now: UInt64
        /// The rowid of the app's row (`AppWriteCapture.Event.rowid`).
        let rowid: Int64
    }

    /// New rows' states go in `statesPerStatement` at a time: one statement of many rows costs
    /// SQLite less per row than one statement each (measured in C, see
    /// docs/journal/2026-11-speed.md).
    static let statesPerStatement = 64

    /// Rows queued before they are stored: enough for both threads of `EncodedRows.make` to
    /// have work, few enough that the queue's buffers stay small.
    static let rowsQueued = 512

    /// Stores the rows `insertEncoded` queued: their keys, states and digest hashes are made
    /// first, on two threads when there are many (`EncodedRows.make`); then the states go in,
    /// `statesPerStatement` to a statement, and what follows from each: its dot, its digest
    /// hash, the row count. A row whose key was held already (deleted, say) goes the general way
    /// with the stamp it took. Called when `rowsQueued` are queued, before anything else reads or
    /// writes a row's state, and at the end of each of the app's writes. `encoded`: the write's
    /// captured bytes, which the queued rows' values are in.
    mutating func storeQueuedStates(_ encoded: [UInt8]) throws {
        guard !encodedInsertBuffers.queued.isEmpty else { return }
        // Taken out and put back emptied, keeping their capacity (emptied in place while still
        // shared, each would have been allocated again).
        var (rows, allStarts, parts) = ([QueuedRow](), [Int](), [EncodedRows]())
        swap(&rows, &encodedInsertBuffers.queued)
        swap(&allStarts, &encodedInsertBuffers.starts)
        swap(&parts, &encodedInsertBuffers.parts)
        defer {
            rows.removeAll(keepingCapacity: true)
            allStarts.removeAll(keepingCapacity: true)
            (encodedInsertBuffers.queued, encodedInsertBuffers.starts, encodedInsertBuffers.parts) = (
                rows, allStarts, parts
            )
        }
        parts = EncodedRows.make(
            rows,
            starts: allStarts,
            encoded: encoded,
            ownNumber: encodedInsertBuffers.ownNumber,
            hasher: hasher,
            reusing: parts
        )
        // Per table keeping states by rowid: whether `app_rows` holds any of its rows (deleted
        // ones, say), which each new row's key is then looked up in.
        var keyedStates: [Int64: Bool] = [:]
        var (byKey, byRowid, atRowid) = ([Int](), [Int](), [Bool]())
        var first = 0
        while first < rows.count {
            let chunk = first..<min(first + Self.statesPerStatement, rows.count)
            first = chunk.upperBound
            byKey.removeAll(keepingCapacity: true)
            byRowid.removeAll(keepingCapacity: true)
            atRowid.removeAll(keepingCapacity: true)
            for index in chunk {
                let table = rows[index].layout.table
                guard table.keepsStatesByRowid else {
                    byKey.append(index)
                    atRowid.append(false)
                    continue
                }
                let number = table.number
                if keyedStates[number] == nil { keyedStates[number] = try holdsStatesByKey(table: number) }
                let (part, position) = EncodedRows.locate(index, in: parts)
                if keyedStates[number]!, try holdsState(table: number, key: parts[part].key(position)) {
                    // Held already: the general way below says what becomes of it.
                    byKey.append(index)
                    atRowid.append(false)
                } else {
                    byRowid.append(index)
                    atRowid.append(true)
                }
            }
            let insertedByKey = try insertStates(byKey, rows: rows, parts: parts, byRowid: false)
            let insertedByRowid = try insertStates(byRowid, rows: rows, parts: parts, byRowid: true)
            guard insertedByRowid == byRowid.count else {
                throw StoreError(
                    .database,
                    "a new row's rowid already has a state in LANSync's tables; the database is damaged"
                )
            }
            for index in chunk {
                let (row, layout) = (rows[index], rows[index].layout)
                let (part, position) = EncodedRows.locate(index, in: parts)
                let key = parts[part].key(position)
                // When some were held already, each tells by whether its own state went in.
                let stored =
                    try atRowid[index - chunk.lowerBound] || insertedByKey == byKey.count
                    || holds(table: layout.table.number, key: key, state: parts[part].state(position))
                guard stored else {
                    let values = allStarts[row.starts]..<allStarts[row.starts + layout.table.columns.count]
                    try self.insert(
                        try SQLValue.values(from: Array(encoded[values])),
                        into: layout.table,
                        now: row.now,
                        stamp: (row.stamp.hlc, row.stamp.dot)
                    )
                    continue
                }
                let dot = try Self.dotKey(row.stamp.dot, number: encodedInsertBuffers.ownNumber)
                // The capture read the key from the row, so the row gives it back exactly.
                if atRowid[index - chunk.lowerBound] || layout.table.namesRowsByRowid {
                    try indexNewRow(dotKey: dot, table: layout.table.number, rowid: row.rowid)
                } else {
                    try indexNewRow(dotKey: dot, table: layout.table.number, key: key)
                }
                digest.insert(hash: parts[part].hashes[position])
                countRows(in: layout.table.number, by: 1)
            }
        }
    }

    /// Inserts the states of `rows` at `indexes` in one statement: by key, skipping rows held
    /// already, or by the rows' rowids (`AppCatalog.Table.keepsStatesByRowid`). Returns how
    /// many went in.
    private mutating func insertStates(
        _ indexes: [Int],
        rows: [QueuedRow],
        parts: [EncodedRows],
        byRowid: Bool
    ) throws -> Int {
        guard !indexes.isEmpty else { return 0 }
        let statements = try rowStatements()
        let insert =
            byRowid
            ? try statements.insertRowidStates(indexes.count, db)
            : try statements.insertStates(indexes.count, skippingHeld: true, db)
        return try EncodedRows.withBytes(of: parts) { bytes in
            var parameter: Int32 = 1
            for index in indexes {
                insert.bind(parameter, rows[index].layout.table.number)
                if byRowid {
                    insert.bind(parameter + 1, rows[index].rowid)
                } else {
                    insert.bindStatic(parameter + 1, bytes.key(index))
                }
                insert.bindStatic(parameter + 2, bytes.state(index))
                parameter += 3
            }
            return try insert.runClearingBindings()
        }
    }

    /// Whether `app_rows` holds exactly `state` for the row (its own, just inserted).
    private mutating func holds(table: Int64, key: ArraySlice<UInt8>, state: ArraySlice<UInt8>) throws -> Bool {
        try storedStates().withState(table: table, key: Array(key)) { bytes, place in
            place == .key && bytes.elementsEqual(state)
        } ?? false
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
                position += 5 + Int(bytes[position + 1..<position + 5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            default: return false
            }
        }
        guard position == bytes.endIndex else { return false }
        starts.append(position)
        return true
    }
}

/// Buffers `insertEncoded` reuses from row to row, and the rows it queued.
struct EncodedInsertBuffers {
    /// The queued rows' value positions (`QueuedRow.starts`).
    var starts: [Int] = []
    var queued: [WriteContext.QueuedRow] = []
    /// This replica's number (`replicas.num`), once looked up: every queued row's dot is its own.
    var ownNumber: Int64 = -1
    /// The layout of the table last inserted into (a bulk insert's rows are of one table).
    var lastLayout: WriteContext.InsertLayout?
    /// What the last rows stored were made into, kept for their capacity.
    var parts: [EncodedRows] = []
}

/// The keys, stored states and digest hashes of queued new rows, made from their captured bytes
/// and stamps alone, so that two threads can share the work: it is most of what a new row costs
/// LANSync's writer besides SQLite (under perf, before, 15 % of a bulk insert's process time
/// against 6 % for the states' INSERTs).
struct EncodedRows: Sendable {
    private(set) var keys: [UInt8] = []
    private(set) var keyEnds: [Int] = []
    private(set) var states: [UInt8] = []
    private(set) var stateEnds: [Int] = []
    /// Each row's digest hash: of its identity, key and canonical state (`RowState.appendFirst`).
    private(set) var hashes: [[UInt8]] = []
    private var digestInput: [UInt8] = []
    /// Where a row's cells are written before they are appended whole (see `ByteWriter`).
    private var scratch: [UInt8] = []

    /// Fewer rows are made on the writer: handing them to another thread would cost more.
    static let rowsMadeOnTwoThreads = 64

    /// The rows, made in one part (`reusing`'s first) or two (the first half, then the second).
    static func make(
        _ rows: [WriteContext.QueuedRow],
        starts: [Int],
        encoded: [UInt8],
        ownNumber: Int64,
        hasher: ElementHasher,
        reusing: [EncodedRows]
    ) -> [EncodedRows] {
        var parts = reusing
        if parts.isEmpty { parts.append(EncodedRows()) }
        guard rows.count >= rowsMadeOnTwoThreads else {
            parts.removeLast(parts.count - 1)
            parts[0].make(rows[...], starts: starts, encoded: encoded, ownNumber: ownNumber, hasher: hasher)
            return parts
        }
        if parts.count == 1 { parts.append(EncodedRows()) }
        let halves = [0..<rows.count / 2, rows.count / 2..<rows.count]
        let shared = Mutex(parts)
        DispatchQueue.concurrentPerform(iterations: 2) { part in
            // Taken out of the mutex while it is made, so that its buffers are not copied.
            var made = shared.withLock { parts in
                var taken = EncodedRows()
                swap(&taken, &parts[part])
                return taken
            }
            made.make(rows[halves[part]], starts: starts, encoded: encoded, ownNumber: ownNumber, hasher: hasher)
            shared.withLock { parts in swap(&made, &parts[part]) }
        }
        return shared.withLock { $0 }
    }

    /// Which part row `index` of the rows `make` made is in, and where in it.
    static func locate(_ index: Int, in parts: [EncodedRows]) -> (part: Int, position: Int) {
        index < parts[0].keyEnds.count ? (0, index) : (1, index - parts[0].keyEnds.count)
    }

    func key(_ position: Int) -> ArraySlice<UInt8> { keys[Self.range(position, ends: keyEnds)] }
    func state(_ position: Int) -> ArraySlice<UInt8> { states[Self.range(position, ends: stateEnds)] }

    /// Where the piece at `position` is in bytes laid one after another, each ending at its `ends` entry.
    private static func range(_ position: Int, ends: [Int]) -> Range<Int> {
        (position == 0 ? 0 : ends[position - 1])..<ends[position]
    }

    /// The rows' keys and states as raw bytes, valid during `body`: for binding without a copy.
    struct Bytes {
        fileprivate let parts: [EncodedRows]
        fileprivate let keys: [UnsafeRawBufferPointer]
        fileprivate let states: [UnsafeRawBufferPointer]

        func key(_ index: Int) -> UnsafeRawBufferPointer {
            let (part, position) = EncodedRows.locate(index, in: parts)
            return UnsafeRawBufferPointer(rebasing: keys[part][EncodedRows.range(position, ends: parts[part].keyEnds)])
        }

        func state(_ index: Int) -> UnsafeRawBufferPointer {
            let (part, position) = EncodedRows.locate(index, in: parts)
            return UnsafeRawBufferPointer(
                rebasing: states[part][EncodedRows.range(position, ends: parts[part].stateEnds)]
            )
        }
    }

    static func withBytes<T>(of parts: [EncodedRows], _ body: (Bytes) throws -> T) rethrows -> T {
        let last = parts[parts.count - 1]
        return try parts[0].keys.withUnsafeBytes { keys0 in
            try parts[0].states.withUnsafeBytes { states0 in
                try last.keys.withUnsafeBytes { keys1 in
                    try last.states.withUnsafeBytes { states1 in
                        try body(Bytes(parts: parts, keys: [keys0, keys1], states: [states0, states1]))
                    }
                }
            }
        }
    }

    /// Appends each plain column's prefix (`prefixes`, each ending at its `ends` position), then,
    /// for the canonical bytes, its value and the count of counters (none, four bytes); the
    /// stored state's held form keeps neither, since the app's row holds every value
    /// (`StoredRowState.heldTag`). Written through `scratch` and appended in one copy. A column
    /// `leftOut` names (by its position among the plain columns) is skipped.
    private static func appendCells(
        _ layout: WriteContext.InsertLayout,
        prefixes: [UInt8],
        ends: [Int],
        stored: Bool,
        value: (Int) -> UnsafeBufferPointer<UInt8>,
        leftOut: (Int) -> Bool,
        scratch: inout [UInt8],
        to destination: inout [UInt8]
    ) {
        scratch.withUnsafeMutableBufferPointer { scratch in
            prefixes.withUnsafeBufferPointer { prefixes in
                var out = ByteWriter(scratch.baseAddress!)
                var prefixStart = 0
                for (position, index) in layout.plainColumns.enumerated() {
                    defer { prefixStart = ends[position] }
                    if leftOut(position) { continue }
                    out.bytes(UnsafeBufferPointer(rebasing: prefixes[prefixStart..<ends[position]]))
                    // Stored, the app's statement wrote exactly this value in its row: the state names it.
                    if !stored { out.bytes(value(index)) }
                }
                if !stored { for _ in 0..<4 { out.byte(0) } }
                destination.append(
                    contentsOf: UnsafeBufferPointer(
                        start: scratch.baseAddress,
                        count: out.position - scratch.baseAddress!
                    )
                )
            }
        }
    }

    /// Makes `rows`, replacing what this part held.
    private mutating func make(
        _ rows: ArraySlice<WriteContext.QueuedRow>,
        starts allStarts: [Int],
        encoded: [UInt8],
        ownNumber: Int64,
        hasher: ElementHasher
    ) {
        keys.removeAll(keepingCapacity: true)
        keyEnds.removeAll(keepingCapacity: true)
        states.removeAll(keepingCapacity: true)
        stateEnds.removeAll(keepingCapacity: true)
        hashes.removeAll(keepingCapacity: true)
        for row in rows {
            let layout = row.layout
            let keyStart = keys.count
            allStarts.withUnsafeBufferPointer { all in
                let starts = UnsafeBufferPointer(rebasing: all[row.starts...])
                encoded.withUnsafeBufferPointer { encoded in
                    func value(_ index: Int) -> UnsafeBufferPointer<UInt8> {
                        UnsafeBufferPointer(rebasing: encoded[starts[index]..<starts[index + 1]])
                    }
                    /// Whether the plain column at `position` is at its left-out default.
                    func leftOut(_ position: Int) -> Bool {
                        guard let bytes = layout.leftOutDefaults[position] else { return false }
                        return value(layout.plainColumns[position]).elementsEqual(bytes)
                    }
                    let cells =
                        layout.leavesDefaultsOut
                        ? layout.plainColumns.indices.reduce(0) { $0 + (leftOut($1) ? 0 : 1) }
                        : layout.plainColumns.count
                    keys.append(UInt8(layout.keyColumns.count))
                    for index in layout.keyColumns { keys.append(contentsOf: value(index)) }
                    keyEnds.append(keys.count)

                    // Room in `scratch` for the cells of the stored state or of the hashed bytes
                    // (`appendCells`): a stored value is two bytes more than its canonical one at most.
                    let valueBytes = starts[layout.table.columns.count] - starts[0]
                    let needed =
                        valueBytes + 2 * layout.plainColumns.count
                        + max(layout.cellPrefixes.count, layout.storedPrefixes.count) + 8
                    if scratch.count < needed { scratch = [UInt8](repeating: 0, count: needed * 2) }

                    StoredRowState.appendHeldHeader(
                        causalLength: 1,
                        marker: layout.kind,
                        stamp: (row.stamp.hlc, ownNumber, row.stamp.dot.counter),
                        cells: cells,
                        to: &states
                    )
                    Self.appendCells(
                        layout,
                        prefixes: layout.storedPrefixes,
                        ends: layout.storedPrefixEnds,
                        stored: true,
                        value: value,
                        leftOut: layout.leavesDefaultsOut ? leftOut : { _ in false },
                        scratch: &scratch,
                        to: &states
                    )
                    stateEnds.append(states.count)

                    // The canonical bytes of the row and its state (`RowState.appendFirst`), hashed.
                    digestInput.removeAll(keepingCapacity: true)
                    digestInput.append(contentsOf: layout.identity)
                    digestInput.appendBytes(keys[keyStart...])
                    RowState.appendFirstHeader(
                        causalLength: 1,
                        marker: layout.kind,
                        stamp: row.stamp,
                        cells: cells,
                        to: &digestInput
                    )
                    Self.appendCells(
                        layout,
                        prefixes: layout.cellPrefixes,
                        ends: layout.cellPrefixEnds,
                        stored: false,
                        value: value,
                        leftOut: layout.leavesDefaultsOut ? leftOut : { _ in false },
                        scratch: &scratch,
                        to: &digestInput
                    )
                }
            }
            hashes.append(hasher.hash(digestInput))
        }
    }
}
