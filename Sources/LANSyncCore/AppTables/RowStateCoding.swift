/// The canonical bytes of a row's state: how the store keeps it, and what the digest hashes (with
/// the row's table and key), so two replicas holding equal states hold equal bytes.
///
///     state:   causal length u64 · marker kind u8 (0: none; else `RowChange.Kind`)
///              · stamp count u32 · stamps, ascending and distinct
///              · [marker's stamp index u32, when there is a marker]
///              · column count u32 · (name · stamp index u32 · value)…, ascending by name
///              · counter count u32 · (name · cell count u32 · (stamp index u32 · total i64)…)…,
///                ascending by name, cells ascending by replica
///     stamp:   HLC u64 · replica ID (16 bytes) · counter u64
///     name:    u32 length · UTF-8
///
/// The stamps sit in one table because the columns of one write share one: a ten-column insert
/// stores its stamp once.
extension RowState {
    package var canonicalBytes: [UInt8] {
        var out = [UInt8]()
        append(to: &out)
        return out
    }

    package func append(to out: inout [UInt8]) {
        let stamps = stamps
        func index(_ stamp: Stamp) -> UInt32 { UInt32(stamps.firstIndex(of: stamp)!) }
        out.appendBigEndian(causalLength)
        out.append(marker?.kind.rawValue ?? 0)
        out.appendBigEndian(UInt32(stamps.count))
        for stamp in stamps { stamp.append(to: &out) }
        if let marker { out.appendBigEndian(index(marker.stamp)) }
        out.appendBigEndian(UInt32(columns.count))
        for cell in columns {
            out.appendField(cell.name)
            out.appendBigEndian(index(cell.stamp))
            cell.value.append(to: &out)
        }
        out.appendBigEndian(UInt32(counters.count))
        for counter in counters {
            out.appendField(counter.name)
            out.appendBigEndian(UInt32(counter.cells.count))
            for cell in counter.cells {
                out.appendBigEndian(index(cell.stamp))
                out.appendBigEndian(UInt64(bitPattern: cell.total))
            }
        }
    }

    /// Appends the canonical bytes of the state `change` makes of a row nothing is known of:
    /// what merging it into `RowState()` and calling `append(to:)` writes, without building the
    /// state. Most rows a bulk insert or a catch-up writes are such rows, and this is the store's
    /// path for them. `change` must be valid (`RowChange.problem()` is nil). Returns whether the
    /// state has a stamp: whether the change stays live (an update that sets nothing does not).
    @discardableResult
    package static func appendFirst(_ change: RowChange, to out: inout [UInt8]) -> Bool {
        let marked = change.kind != .update
        // An append keeps no counters (a valid one has none).
        let totals = change.kind == .append ? [] : change.totals
        let stamped = marked || !change.values.isEmpty || !totals.isEmpty
        appendFirstHeader(
            causalLength: change.causalLength,
            marker: marked ? change.kind : nil,
            stamp: stamped ? change.stamp : nil,
            cells: change.values.count,
            to: &out
        )
        for value in change.values {
            appendFirstCell(named: value.column, to: &out)
            value.value.append(to: &out)
        }
        out.appendBigEndian(UInt32(totals.count))
        for total in totals {
            out.appendField(total.column)
            out.appendBigEndian(UInt32(1))
            out.appendBigEndian(UInt32(0))
            out.appendBigEndian(UInt64(bitPattern: total.total))
        }
        return stamped
    }

    /// What a first change's canonical state starts with, before its cells: its life, its marker
    /// (nil for an update), its one stamp (nil for an update that sets nothing) and the number of
    /// cells. `appendFirst` and the store's encoded inserts share it.
    package static func appendFirstHeader(
        causalLength: UInt64,
        marker: RowChange.Kind?,
        stamp: Stamp?,
        cells: Int,
        to out: inout [UInt8]
    ) {
        out.appendBigEndian(causalLength)
        out.append(marker?.rawValue ?? 0)
        out.appendBigEndian(UInt32(stamp == nil ? 0 : 1))
        stamp?.append(to: &out)
        if marker != nil { out.appendBigEndian(UInt32(0)) }
        out.appendBigEndian(UInt32(cells))
    }

    /// What precedes a first change's cell value: its column's field and the index of the
    /// change's one stamp. The store's encoded inserts make it once per column and copy it.
    package static func appendFirstCell(named name: String, to out: inout [UInt8]) {
        out.appendField(name)
        out.appendBigEndian(UInt32(0))
    }

    /// Reads what `canonicalBytes` wrote; throws on anything else (including names out of order
    /// or repeated: one state has one encoding).
    package init(canonicalBytes bytes: [UInt8]) throws(SQLValueDecodingError) {
        var reader = CanonicalReader(bytes: bytes)
        let causalLength = try reader.uint64()
        let kindByte = try reader.byte()
        let kind: RowChange.Kind?
        if kindByte == 0 {
            kind = nil
        } else {
            guard let known = RowChange.Kind(rawValue: kindByte) else {
                throw SQLValueDecodingError("unknown marker kind \(kindByte)")
            }
            kind = known
        }
        let stampCount = Int(try reader.uint32())
        guard stampCount <= bytes.count / 32 else { throw SQLValueDecodingError("\(stampCount) stamps cannot fit") }
        var stamps = [Stamp]()
        stamps.reserveCapacity(stampCount)
        for _ in 0..<stampCount {
            let hlc = HybridTimestamp(rawValue: try reader.uint64())
            let replica = ReplicaID(bytes: try reader.take(16))!
            let stamp = Stamp(hlc: hlc, dot: Dot(replica: replica, counter: try reader.uint64()))
            if let last = stamps.last, !(last < stamp) { throw SQLValueDecodingError("stamps out of order") }
            stamps.append(stamp)
        }
        func stamp() throws(SQLValueDecodingError) -> Stamp {
            let index = Int(try reader.uint32())
            guard index < stamps.count else { throw SQLValueDecodingError("stamp index \(index) out of range") }
            return stamps[index]
        }
        let marker = try kind.map { kind throws(SQLValueDecodingError) in (kind, try stamp()) }
        let columnCount = Int(try reader.uint32())
        guard columnCount <= bytes.count / 9 else { throw SQLValueDecodingError("\(columnCount) columns cannot fit") }
        var columns = [Cell]()
        columns.reserveCapacity(columnCount)
        for _ in 0..<columnCount {
            let name = try reader.text()
            if let last = columns.last, !(last.name < name) { throw SQLValueDecodingError("columns out of order") }
            let cellStamp = try stamp()
            columns.append(Cell(name: name, stamp: cellStamp, value: try reader.value()))
        }
        var counters = [Counter]()
        for _ in 0..<Int(try reader.uint32()) {
            let name = try reader.text()
            if let last = counters.last, !(last.name < name) { throw SQLValueDecodingError("counters out of order") }
            var cells = [CounterCell]()
            for _ in 0..<Int(try reader.uint32()) {
                let cellStamp = try stamp()
                let total = Int64(bitPattern: try reader.uint64())
                if let last = cells.last, !(last.stamp.dot.replica < cellStamp.dot.replica) {
                    throw SQLValueDecodingError("counter \(name) has totals out of order or two of one replica")
                }
                cells.append(CounterCell(stamp: cellStamp, total: total))
            }
            counters.append(Counter(name: name, cells: cells))
        }
        guard reader.isAtEnd else { throw SQLValueDecodingError("bytes after the row state") }
        self.init(causalLength: causalLength, marker: marker, columns: columns, counters: counters)
    }
}

extension RowState.Stamp {
    /// HLC u64 · replica ID (16 bytes) · counter u64, as the state's stamp table lists it.
    func append(to out: inout [UInt8]) {
        out.appendBigEndian(hlc.rawValue)
        out.appendBigEndian(dot.replica.high)
        out.appendBigEndian(dot.replica.low)
        out.appendBigEndian(dot.counter)
    }
}

extension RowKey {
    /// The row's identity in canonical bytes: the table's name, then its key (`SQLValue.keyBytes`).
    /// The digest hashes these followed by the row's state.
    package var canonicalBytes: [UInt8] {
        var out = [UInt8]()
        out.appendField(table)
        out.append(contentsOf: SQLValue.keyBytes(primaryKey))
        return out
    }
}
