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
        // A handful of stamps per row: an array, sorted, beats a set and a dictionary here.
        var stamps = [Stamp]()
        stamps.reserveCapacity(4)
        func note(_ stamp: Stamp) { if !stamps.contains(stamp) { stamps.append(stamp) } }
        if let marker { note(marker.stamp) }
        for cell in columns.values { note(cell.stamp) }
        for cells in counters.values { for cell in cells.values { note(cell.stamp) } }
        stamps.sort()
        func index(_ stamp: Stamp) -> UInt32 { UInt32(stamps.firstIndex(of: stamp)!) }
        out.appendBigEndian(causalLength)
        out.append(marker?.kind.rawValue ?? 0)
        out.appendBigEndian(UInt32(stamps.count))
        for stamp in stamps {
            out.appendBigEndian(stamp.hlc.rawValue)
            out.appendBigEndian(stamp.dot.replica.high)
            out.appendBigEndian(stamp.dot.replica.low)
            out.appendBigEndian(stamp.dot.counter)
        }
        if let marker { out.appendBigEndian(index(marker.stamp)) }
        out.appendBigEndian(UInt32(columns.count))
        for (name, cell) in columns.sorted(by: { $0.key < $1.key }) {
            out.appendField(name)
            out.appendBigEndian(index(cell.stamp))
            cell.value.append(to: &out)
        }
        out.appendBigEndian(UInt32(counters.count))
        for (name, cells) in counters.sorted(by: { $0.key < $1.key }) {
            out.appendField(name)
            out.appendBigEndian(UInt32(cells.count))
            for (_, cell) in cells.sorted(by: { $0.key < $1.key }) {
                out.appendBigEndian(index(cell.stamp))
                out.appendBigEndian(UInt64(bitPattern: cell.total))
            }
        }
    }

    /// Reads what `canonicalBytes` wrote; throws on anything else.
    package init(canonicalBytes bytes: [UInt8]) throws(SQLValueDecodingError) {
        var reader = CanonicalReader(bytes: bytes)
        let causalLength = try reader.uint64()
        let kindByte = try reader.byte()
        let kind: RowChange.Kind?
        if kindByte == 0 {
            kind = nil
        } else {
            guard let known = RowChange.Kind(rawValue: kindByte) else { throw SQLValueDecodingError("unknown marker kind \(kindByte)") }
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
        var columns: [String: Cell] = [:]
        for _ in 0..<Int(try reader.uint32()) {
            let name = try reader.text()
            let cellStamp = try stamp()
            guard columns.updateValue(Cell(stamp: cellStamp, value: try reader.value()), forKey: name) == nil else {
                throw SQLValueDecodingError("column \(name) twice")
            }
        }
        var counters: [String: [ReplicaID: CounterCell]] = [:]
        for _ in 0..<Int(try reader.uint32()) {
            let name = try reader.text()
            var cells: [ReplicaID: CounterCell] = [:]
            for _ in 0..<Int(try reader.uint32()) {
                let cellStamp = try stamp()
                let total = Int64(bitPattern: try reader.uint64())
                guard cells.updateValue(CounterCell(stamp: cellStamp, total: total), forKey: cellStamp.dot.replica) == nil else {
                    throw SQLValueDecodingError("counter \(name) has two totals of one replica")
                }
            }
            counters[name] = cells
        }
        guard reader.isAtEnd else { throw SQLValueDecodingError("bytes after the row state") }
        self.init(causalLength: causalLength, marker: marker, columns: columns, counters: counters)
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
