import LANSyncCore

/// The bulk path of an app's INSERT into a table without counter columns: the capture hands over
/// the row's values as canonical bytes (`AppWriteCapture.Event.encoded`), and the row's key, its
/// stored state and the bytes the digest hashes are cut and copied from them, without a
/// `SQLValue`, a `String` or a `RowChange` for each value. It writes exactly what `insert`
/// writes for the same row (the tests compare the two); a row held already (deleted, say) goes
/// that general way, keeping the stamp this one took.
extension WriteContext {
    /// What every encoded insert into one table shares, made once per transaction.
    struct InsertLayout {
        /// field(table name): what the digest hashes before the key.
        let identity: [UInt8]
        let kind: RowChange.Kind
        /// Declaration indexes of the key columns, in key order.
        let keyColumns: [Int]
        /// Declaration indexes of the other columns, by name (as a change lists them), with what
        /// precedes each one's value in the canonical state (`RowState.appendFirstCell`) and its
        /// number in stored states.
        let plain: [(index: Int, cellPrefix: [UInt8], number: Int64)]
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
    /// declaration order (see the extension's comment).
    mutating func insertEncoded(_ bytes: ArraySlice<UInt8>, into table: AppCatalog.Table, now: UInt64) throws {
        let layout = try insertLayout(table)
        // Where each value starts, and the end.
        var starts = [Int]()
        starts.reserveCapacity(table.columns.count + 1)
        var position = bytes.startIndex
        while position < bytes.endIndex {
            starts.append(position)
            switch bytes[position] {
            case 0: position += 1
            case 1, 2: position += 9
            case 3, 4:
                guard bytes.endIndex - position >= 5 else { throw malformedCapture(table.declared!) }
                position += 5 + Int(bytes[position + 1 ..< position + 5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            default: throw malformedCapture(table.declared!)
            }
        }
        guard position == bytes.endIndex, starts.count == table.columns.count else { throw malformedCapture(table.declared!) }
        starts.append(position)
        func value(_ index: Int) -> ArraySlice<UInt8> { bytes[starts[index] ..< starts[index + 1]] }

        var key = [UInt8(layout.keyColumns.count)]
        for index in layout.keyColumns {
            if bytes[starts[index]] == 0 { throw nullKey(table) }
            key.append(contentsOf: value(index))
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
        var stored = [UInt8]()
        stored.reserveCapacity(24 + bytes.count)
        StoredRowState.appendFirstHeader(
            causalLength: 1, marker: layout.kind, stamp: (hlc, try number(of: dot.replica), dot.counter), cells: layout.plain.count,
            to: &stored)
        for column in layout.plain {
            stored.appendVarint(column.number)
            stored.append(0)
            StoredRowState.appendValue(canonical: value(column.index), to: &stored)
        }
        stored.appendVarint(UInt64(0))
        guard try rowStatements().insertNewState.run(table: table.number, key: key, state: stored[...]) == 1 else {
            return try insert(try SQLValue.values(from: Array(bytes)), into: table, now: now, stamp: (hlc, dot))
        }
        try indexNewRow(dot, table: table.number, key: key)

        // The canonical bytes of the row and its state (`RowState.appendFirst`), for the digest.
        var row = layout.identity
        row.reserveCapacity(layout.identity.count + key.count + 64 + bytes.count + layout.plain.count * 24)
        row.append(contentsOf: key)
        RowState.appendFirstHeader(
            causalLength: 1, marker: layout.kind, stamp: RowState.Stamp(hlc: hlc, dot: dot), cells: layout.plain.count, to: &row)
        for column in layout.plain {
            row.append(contentsOf: column.cellPrefix)
            row.append(contentsOf: value(column.index))
        }
        row.appendBigEndian(UInt32(0))  // no counters
        digest.insert(hash: hasher.hash(row))
        countRows(in: table.number, by: 1)
    }
}
