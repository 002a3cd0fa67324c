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

    /// Inserts a row an app's statement wrote, given as the canonical bytes of its values in
    /// declaration order (see the extension's comment). The bytes the digest hashes are kept for
    /// `hashEncodedInserts`, which hashes a write's rows together.
    mutating func insertEncoded(_ bytes: ArraySlice<UInt8>, into table: AppCatalog.Table, now: UInt64) throws {
        let layout = try insertLayout(table)
        // The buffers of the rows before, reused (taken out so that `self` stays free to use).
        var buffers = encodedInsertBuffers
        encodedInsertBuffers = EncodedInsertBuffers()
        defer { encodedInsertBuffers = buffers }
        // Where each value starts, and the end.
        buffers.starts.removeAll(keepingCapacity: true)
        var position = bytes.startIndex
        while position < bytes.endIndex {
            buffers.starts.append(position)
            switch bytes[position] {
            case 0: position += 1
            case 1, 2: position += 9
            case 3, 4:
                guard bytes.endIndex - position >= 5 else { throw malformedCapture(table.declared!) }
                position += 5 + Int(bytes[position + 1 ..< position + 5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            default: throw malformedCapture(table.declared!)
            }
        }
        guard position == bytes.endIndex, buffers.starts.count == table.columns.count else { throw malformedCapture(table.declared!) }
        buffers.starts.append(position)
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
        guard size <= RowChange.maxValueBytes else {
            // The general way says why, in the words every write uses.
            return try insert(try SQLValue.values(from: Array(bytes)), into: table, now: now)
        }

        let (hlc, dot) = (tick(now: now), nextDot())
        buffers.stored.removeAll(keepingCapacity: true)
        StoredRowState.appendFirstHeader(
            causalLength: 1, marker: layout.kind, stamp: (hlc, try number(of: dot.replica), dot.counter), cells: layout.plain.count,
            to: &buffers.stored)
        for column in layout.plain {
            buffers.stored.appendVarint(column.number)
            buffers.stored.append(0)
            StoredRowState.appendValue(canonical: value(column.index), to: &buffers.stored)
        }
        buffers.stored.appendVarint(UInt64(0))
        guard try rowStatements().insertNewState.run(table: table.number, key: key, state: buffers.stored[...]) == 1 else {
            return try insert(try SQLValue.values(from: Array(bytes)), into: table, now: now, stamp: (hlc, dot))
        }
        try indexNewRow(dot, table: table.number, key: key)

        // The canonical bytes of the row and its state (`RowState.appendFirst`), for the digest.
        buffers.digestInput.append(contentsOf: layout.identity)
        buffers.digestInput.append(contentsOf: key)
        RowState.appendFirstHeader(
            causalLength: 1, marker: layout.kind, stamp: RowState.Stamp(hlc: hlc, dot: dot), cells: layout.plain.count,
            to: &buffers.digestInput)
        for column in layout.plain {
            buffers.digestInput.append(contentsOf: column.cellPrefix)
            buffers.digestInput.appendBytes(value(column.index))
        }
        buffers.digestInput.appendBigEndian(UInt32(0))  // no counters
        buffers.digestInputEnds.append(buffers.digestInput.count)
        countRows(in: table.number, by: 1)
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

/// Buffers `insertEncoded` reuses from row to row.
struct EncodedInsertBuffers {
    var starts: [Int] = []
    var stored: [UInt8] = []
    /// The bytes each new row's digest hash is of, one after another, and where each ends.
    var digestInput: [UInt8] = []
    var digestInputEnds: [Int] = []
}
