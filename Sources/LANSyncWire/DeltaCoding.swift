package import LANSyncCore

/// The compact encoding of a delta.
///
/// ```
/// replicas:    varint n, n × replica[16]          coverage and rows name replicas, devices and
/// devices:     varint n, n × device[16]           streams by their index in these tables
/// streams:     varint n, n × string
/// entries:     varint n, n × entry
///   flags u8 (bit 0: id is a lowercase UUID sent as 16 bytes; otherwise a string)
///   id, stream index, device index, replica index, counter (varint),
///   hlc (zigzag difference from the previous row's, the first from 0),
///   wall clock (zigzag difference from the hlc's milliseconds), payload (string)
/// preferences: varint n, n × preference
///   key (string), flags u8 (bit 0: tombstone), value (string, absent for a tombstone),
///   device index, replica index, counter, hlc (zigzag difference), wall clock (zigzag)
/// tables:      varint n, n × string                app-table and column names, by index
/// columns:     varint n, n × string
/// entries, preferences (as above)
/// coverage:    varint n, n × (replica index, from varint, through varint)
/// rows:        varint n, n × row change
///   table index, kind u8 (1 insert, 2 update, 3 delete, 4 append), causal length (varint),
///   replica index, counter, hlc (zigzag difference, same sequence),
///   key (u8 count 1…32, then values), values (varint n, n × (column index, value)),
///   totals (varint n, n × (column index, zigzag total))
///   value: u8 tag (0 NULL; 1 INTEGER zigzag varint; 2 REAL 8 bytes, its bits big-endian;
///          3 TEXT string; 4 BLOB varint length · bytes; 5 TEXT that is a lowercase UUID, 16 bytes)
/// ```
///
/// With `signed` (protocol version 4, not spoken yet; docs/signed-changes.md), a section follows
/// the rows:
///
/// ```
/// ranges:      for each coverage range, in order: signature[64] · flags u8 (bit 0: a genesis
///              follows; bit 1: the replica's record follows) · [genesis counter varint · genesis
///              signature[64]] · [record string (1…1,024 bytes)]
/// pref stubs:  varint n, n × (key string, replica index, counter, hlc (zigzag difference, same
///              sequence), element hash[32])
/// lost cells:  varint n, n × (row index varint, strictly increasing, < the row count;
///              varint m (1…2,000); m × (kind u8 (1 value, 2 total), column index,
///              stand-in length u8 (value: 0…32; total: 8), stand-in bytes))
/// ```
///
/// Differences keep the common case small: ids from `EntryIDs` take 16 bytes instead of 36, a
/// counter 1–3 bytes, clock readings a byte or two. Decoding checks every count and index, so a
/// hostile peer cannot make the receiver allocate beyond the message it actually sent.
package enum DeltaCoding {
    package static func encode(_ delta: Delta, into writer: inout ByteWriter, signed: Bool = false) {
        // One pass: rows are written to their own buffer while the tables fill, then the tables
        // and the rows go out in the order above.
        var replicas = Table<ReplicaID>()
        var coverage = ByteWriter(capacity: 1 + delta.coverage.count * 8)
        coverage.varint(delta.coverage.count)
        for range in delta.coverage {
            coverage.varint(replicas.index(of: range.replica))
            coverage.varint(range.from)
            coverage.varint(range.through)
        }
        var devices = Table<DeviceID>()
        var streams = Table<String>()
        var previousHLC: UInt64 = 0
        // Read in place through a buffer pointer: `for entry in delta.entries` copies each entry,
        // a retain and a release of each of its strings, on every row a catch-up sends.
        var rows = delta.entries.withUnsafeBufferPointer { entries in
            var capacity = 16
            for index in entries.indices { capacity += entries[index].payload.utf8.count + 48 }
            var rows = ByteWriter(capacity: capacity)
            rows.varint(entries.count)
            for index in entries.indices {
                if let uuid = UUIDText.halves(entries[index].id) {
                    rows.byte(1)
                    UUIDText.write(uuid, into: &rows)
                } else {
                    rows.byte(0)
                    rows.string(entries[index].id)
                }
                rows.varint(streams.index(of: entries[index].stream))
                rows.varint(devices.index(of: entries[index].originDevice))
                rows.varint(replicas.index(of: entries[index].dot.replica))
                rows.varint(entries[index].dot.counter)
                let hlc = entries[index].hlc
                rows.signed(Int64(bitPattern: hlc.rawValue &- previousHLC))
                previousHLC = hlc.rawValue
                rows.signed(entries[index].wallMilliseconds &- Int64(bitPattern: hlc.physicalMilliseconds))
                rows.string(entries[index].payload)
            }
            return rows
        }
        rows.varint(delta.preferences.count)
        for write in delta.preferences {
            rows.string(write.key)
            rows.byte(write.value == nil ? 1 : 0)
            if let value = write.value { rows.string(value) }
            rows.varint(devices.index(of: write.originDevice))
            rows.varint(replicas.index(of: write.dot.replica))
            rows.varint(write.dot.counter)
            rows.signed(Int64(bitPattern: write.hlc.rawValue &- previousHLC))
            previousHLC = write.hlc.rawValue
            rows.signed(write.wallMilliseconds &- Int64(bitPattern: write.hlc.physicalMilliseconds))
        }
        var tables = Table<String>()
        var columns = Table<String>()
        var changes = ByteWriter(capacity: delta.rows.isEmpty ? 1 : delta.rows.count * 64)
        changes.varint(delta.rows.count)
        for change in delta.rows {
            changes.varint(tables.index(of: change.key.table))
            changes.byte(change.kind.rawValue)
            changes.varint(change.causalLength)
            changes.varint(replicas.index(of: change.dot.replica))
            changes.varint(change.dot.counter)
            changes.signed(Int64(bitPattern: change.hlc.rawValue &- previousHLC))
            previousHLC = change.hlc.rawValue
            changes.byte(UInt8(change.key.primaryKey.count))
            for value in change.key.primaryKey { write(value, into: &changes) }
            changes.varint(change.values.count)
            for value in change.values {
                changes.varint(columns.index(of: value.column))
                write(value.value, into: &changes)
            }
            changes.varint(change.totals.count)
            for total in change.totals {
                changes.varint(columns.index(of: total.column))
                changes.signed(total.total)
            }
        }
        if signed {
            for range in delta.coverage {
                changes.raw(range.signature ?? [UInt8](repeating: 0, count: signatureLength))
                changes.byte((range.genesis == nil ? 0 : 1) | (range.record == nil ? 0 : 2))
                if let genesis = range.genesis {
                    changes.varint(genesis.counter)
                    changes.raw(genesis.signature)
                }
                if let record = range.record { changes.string(record) }
            }
            changes.varint(delta.preferenceStubs.count)
            for stub in delta.preferenceStubs {
                changes.string(stub.key)
                changes.varint(replicas.index(of: stub.dot.replica))
                changes.varint(stub.dot.counter)
                changes.signed(Int64(bitPattern: stub.hlc.rawValue &- previousHLC))
                previousHLC = stub.hlc.rawValue
                changes.raw(stub.elementHash)
            }
            let lost = delta.rows.indices.compactMap { index in
                delta.lostCells[delta.rows[index].dot].map { (index, $0) }
            }
            changes.varint(lost.count)
            for (index, cells) in lost {
                changes.varint(index)
                changes.varint(cells.count)
                for cell in cells {
                    changes.byte(cell.kind.rawValue)
                    changes.varint(columns.index(of: cell.column))
                    changes.byte(UInt8(cell.standIn.count))
                    changes.raw(cell.standIn)
                }
            }
        }
        writer.varint(replicas.items.count)
        for replica in replicas.items { writer.raw(replica.bytes) }
        writer.varint(devices.items.count)
        for device in devices.items { writer.raw(device.bytes) }
        writer.varint(streams.items.count)
        for stream in streams.items { writer.string(stream) }
        writer.varint(tables.items.count)
        for table in tables.items { writer.string(table) }
        writer.varint(columns.items.count)
        for column in columns.items { writer.string(column) }
        writer.raw(rows.bytes)
        writer.raw(coverage.bytes)
        writer.raw(changes.bytes)
    }

    static func write(_ value: SQLValue, into writer: inout ByteWriter) {
        switch value {
        case .null:
            writer.byte(0)
        case .integer(let number):
            writer.byte(1)
            writer.signed(number)
        case .realBits(let bits):
            writer.byte(2)
            writer.fixed64(bits)
        case .text(let text):
            if let uuid = UUIDText.halves(text) {
                writer.byte(5)
                UUIDText.write(uuid, into: &writer)
            } else {
                writer.byte(3)
                writer.string(text)
            }
        case .blob(let bytes):
            writer.byte(4)
            writer.varint(bytes.count)
            writer.raw(bytes)
        }
    }

    static func readValue(from reader: inout ByteReader) throws(WireError) -> SQLValue {
        switch try reader.byte() {
        case 0: return .null
        case 1: return .integer(try reader.signed())
        case 2: return .realBits(try reader.fixed64())
        case 3: return .text(try reader.string(atMost: RowChange.maxValueBytes, "TEXT value"))
        case 4:
            let count = try reader.count(atMost: RowChange.maxValueBytes, "BLOB length")
            return .blob(try reader.raw(count))
        case 5: return .text(try UUIDText.text(from: &reader))
        case let tag: throw WireError("unknown value tag \(tag) (0-5 are defined)")
        }
    }

    static let signatureLength = 64

    package static func decode(from reader: inout ByteReader, signed: Bool = false) throws(WireError) -> Delta {
        var delta = Delta()
        let replicas = try (0..<reader.count(atMost: WireProtocol.maxTableEntries, "replica table")).map {
            _ throws(WireError) in ReplicaID(bytes: try reader.raw(16))!
        }
        let devices = try (0..<reader.count(atMost: WireProtocol.maxTableEntries, "device table")).map {
            _ throws(WireError) in DeviceID(bytes: try reader.raw(16))!
        }
        let streams = try (0..<reader.count(atMost: WireProtocol.maxTableEntries, "stream table")).map {
            _ throws(WireError) in try reader.string(atMost: Names.maxStreamLength, "stream name")
        }
        let tables = try (0..<reader.count(atMost: WireProtocol.maxTableEntries, "app table names")).map {
            _ throws(WireError) in try reader.string(atMost: RowChange.maxNameLength, "app table name")
        }
        let columns = try (0..<reader.count(atMost: WireProtocol.maxTableEntries, "column names")).map {
            _ throws(WireError) in try reader.string(atMost: RowChange.maxNameLength, "column name")
        }
        func pick<T>(_ table: [T], _ what: String) throws(WireError) -> T {
            let index = try reader.varint()
            guard index < UInt64(table.count) else { throw WireError("\(what) index \(index) outside its table") }
            return table[Int(index)]
        }
        var previousHLC: UInt64 = 0
        func hlc() throws(WireError) -> HybridTimestamp {
            previousHLC = previousHLC &+ UInt64(bitPattern: try reader.signed())
            return HybridTimestamp(rawValue: previousHLC)
        }
        func wall(_ hlc: HybridTimestamp) throws(WireError) -> Int64 {
            try wallClock(hlc, offset: try reader.signed())
        }
        let entryCount = try reader.count(atMost: WireProtocol.maxRowsPerDelta, "entry count")
        delta.entries.reserveCapacity(min(entryCount, reader.remaining / 8))
        for _ in 0..<entryCount {
            let flags = try reader.flags(known: 1, "entry flags")
            let id =
                flags & 1 == 1
                ? try UUIDText.text(from: &reader) : try reader.string(atMost: Names.maxEntryIDLength, "entry id")
            let stream = try pick(streams, "stream")
            let device = try pick(devices, "device")
            let replica = try pick(replicas, "replica")
            let counter = try reader.counter(atLeast: 1, "entry counter")
            let reading = try hlc()
            let wallMilliseconds = try wall(reading)
            let payload = try reader.string(atMost: Delta.maxValueBytes, "payload")
            delta.entries.append(
                Entry(
                    id: id,
                    stream: stream,
                    originDevice: device,
                    dot: Dot(replica: replica, counter: counter),
                    hlc: reading,
                    wallMilliseconds: wallMilliseconds,
                    payload: payload
                )
            )
        }
        let preferenceCount = try reader.count(atMost: WireProtocol.maxRowsPerDelta, "preference count")
        for _ in 0..<preferenceCount {
            let key = try reader.string(atMost: Names.maxKeyLength, "preference key")
            let flags = try reader.flags(known: 1, "preference flags")
            let value = flags & 1 == 1 ? nil : try reader.string(atMost: Delta.maxValueBytes, "preference value")
            let device = try pick(devices, "device")
            let replica = try pick(replicas, "replica")
            let counter = try reader.counter(atLeast: 1, "preference counter")
            let reading = try hlc()
            delta.preferences.append(
                PreferenceWrite(
                    key: key,
                    value: value,
                    originDevice: device,
                    dot: Dot(replica: replica, counter: counter),
                    hlc: reading,
                    wallMilliseconds: try wall(reading)
                )
            )
        }
        let coverageCount = try reader.count(atMost: WireProtocol.maxTableEntries, "coverage count")
        for _ in 0..<coverageCount {
            let replica = try pick(replicas, "replica")
            let from = try reader.counter(atLeast: 0, "coverage start")
            let through = try reader.counter(atLeast: 1, "coverage end")
            guard from < through else {
                throw WireError("coverage of replica \(replica) is empty (\(from)...\(through))")
            }
            delta.coverage.append(.init(replica: replica, from: from, through: through))
        }
        let changeCount = try reader.count(
            atMost: WireProtocol.maxRowsPerDelta - delta.entries.count - delta.preferences.count,
            "row change count"
        )
        for _ in 0..<changeCount {
            let table = try pick(tables, "app table")
            let kindByte = try reader.byte()
            guard let kind = RowChange.Kind(rawValue: kindByte) else {
                throw WireError("unknown row change kind \(kindByte) (1-4)")
            }
            let causalLength = try reader.counter(atLeast: 1, "causal length")
            let replica = try pick(replicas, "replica")
            let counter = try reader.counter(atLeast: 1, "row change counter")
            let reading = try hlc()
            let keyCount = Int(try reader.byte())
            guard (1...SQLValue.maxKeyColumns).contains(keyCount) else {
                throw WireError("a key has 1-\(SQLValue.maxKeyColumns) values, not \(keyCount)")
            }
            var key = [SQLValue]()
            for _ in 0..<keyCount { key.append(try readValue(from: &reader)) }
            var values = [RowChange.Value]()
            for _ in 0..<(try reader.count(atMost: RowChange.maxColumns, "column count")) {
                values.append(.init(column: try pick(columns, "column"), value: try readValue(from: &reader)))
            }
            var totals = [RowChange.Total]()
            for _ in 0..<(try reader.count(atMost: RowChange.maxColumns, "counter count")) {
                totals.append(.init(column: try pick(columns, "column"), total: try reader.signed()))
            }
            delta.rows.append(
                RowChange(
                    key: RowKey(table: table, primaryKey: key),
                    kind: kind,
                    causalLength: causalLength,
                    hlc: reading,
                    dot: Dot(replica: replica, counter: counter),
                    values: values,
                    totals: totals
                )
            )
        }
        guard signed else { return delta }
        for index in delta.coverage.indices {
            delta.coverage[index].signature = try reader.raw(signatureLength)
            let flags = try reader.flags(known: 3, "range flags")
            if flags & 1 != 0 {
                let counter = try reader.counter(atLeast: 0, "genesis counter")
                delta.coverage[index].genesis = ProvenanceCheck.Genesis(
                    counter: counter,
                    signature: try reader.raw(signatureLength)
                )
            }
            if flags & 2 != 0 {
                let record = try reader.string(atMost: Delta.Coverage.maxRecordBytes, "replica record")
                guard !record.isEmpty else { throw WireError("a range's replica record is empty") }
                delta.coverage[index].record = record
            }
        }
        let stubCount = try reader.count(
            atMost: WireProtocol.maxRowsPerDelta - delta.entries.count - delta.preferences.count - delta.rows.count,
            "preference stub count"
        )
        for _ in 0..<stubCount {
            let key = try reader.string(atMost: Names.maxKeyLength, "preference stub key")
            let replica = try pick(replicas, "replica")
            let counter = try reader.counter(atLeast: 1, "preference stub counter")
            let reading = try hlc()
            delta.preferenceStubs.append(
                PreferenceStub(
                    key: key,
                    hlc: reading,
                    dot: Dot(replica: replica, counter: counter),
                    elementHash: try reader.raw(ChainHead.hashByteCount)
                )
            )
        }
        var previousIndex = -1
        for _ in 0..<(try reader.count(atMost: delta.rows.count, "lost cell list count")) {
            let index = try reader.count(atMost: delta.rows.count - 1, "row index")
            guard index > previousIndex else { throw WireError("lost cell lists out of row order") }
            previousIndex = index
            var cells = [RowChange.LostCell]()
            let cellCount = try reader.count(atMost: RowChange.maxColumns, "lost cell count")
            guard cellCount > 0 else { throw WireError("an empty lost cell list") }
            for _ in 0..<cellCount {
                let kindByte = try reader.byte()
                guard let kind = RowChange.CellKind(rawValue: kindByte) else {
                    throw WireError("unknown cell kind \(kindByte) (1-2)")
                }
                let column = try pick(columns, "column")
                let length = Int(try reader.byte())
                guard kind == .value ? length <= ChainHead.hashByteCount : length == 8 else {
                    throw WireError("a \(kind == .value ? "value" : "total")'s stand-in of \(length) bytes")
                }
                cells.append(RowChange.LostCell(kind: kind, column: column, standIn: try reader.raw(length)))
            }
            delta.lostCells[delta.rows[index].dot] = cells
        }
        return delta
    }

    /// A row's wall clock from its HLC reading and the zigzag offset sent: the sum wraps modulo
    /// 2^64 like every step on the wire, and must land in 0…2^48 − 1 (`maxPhysicalMilliseconds`).
    static func wallClock(_ hlc: HybridTimestamp, offset: Int64) throws(WireError) -> Int64 {
        let wall = Int64(bitPattern: hlc.physicalMilliseconds) &+ offset
        guard wall >= 0, UInt64(wall) <= HybridTimestamp.maxPhysicalMilliseconds else {
            throw WireError("wall clock \(wall) ms is outside 0...\(HybridTimestamp.maxPhysicalMilliseconds)")
        }
        return wall
    }

    /// Distinct values in first-seen order, with their indexes.
    struct Table<Value: Hashable> {
        var items: [Value] = []
        private var indexes: [Value: Int] = [:]
        /// The last value asked for: rows in a batch mostly repeat their neighbour's.
        private var last: (value: Value, index: Int)?

        /// The value's index, adding it on first sight.
        mutating func index(of value: Value) -> Int {
            if let last, last.value == value { return last.index }
            let index: Int
            if let known = indexes[value] {
                index = known
            } else {
                index = items.count
                indexes[value] = index
                items.append(value)
            }
            last = (value, index)
            return index
        }
    }
}

/// Lowercase UUID text (8-4-4-4-12 hex digits) to and from its 16 bytes, so generated entry ids
/// travel in 16 bytes and come back as exactly the same text.
enum UUIDText {
    /// The 16 bytes of lowercase UUID text as two big-endian halves; nil for any other text. On
    /// every row a catch-up sends, so it reads the UTF-8 in place and allocates nothing.
    static func halves(_ text: String) -> (high: UInt64, low: UInt64)? {
        guard text.utf8.count == 36 else { return nil }
        var text = text
        return text.withUTF8 { utf8 -> (high: UInt64, low: UInt64)? in
            guard utf8[8] == UInt8(ascii: "-"), utf8[13] == UInt8(ascii: "-"), utf8[18] == UInt8(ascii: "-"),
                utf8[23] == UInt8(ascii: "-")
            else { return nil }
            /// The hex digits of `range`, most significant first; nil if any is not one.
            func hex(_ range: Range<Int>, into value: inout UInt64) -> Bool {
                for index in range {
                    let char = utf8[index]
                    let digit = char &- UInt8(ascii: "0")
                    let letter = char &- UInt8(ascii: "a")
                    let nibble: UInt8
                    if digit < 10 { nibble = digit } else if letter < 6 { nibble = letter &+ 10 } else { return false }
                    value = value << 4 | UInt64(nibble)
                }
                return true
            }
            var high: UInt64 = 0
            var low: UInt64 = 0
            guard hex(0..<8, into: &high), hex(9..<13, into: &high), hex(14..<18, into: &high),
                hex(19..<23, into: &low), hex(24..<36, into: &low)
            else { return nil }
            return (high, low)
        }
    }

    /// Writes the two halves as 16 bytes.
    static func write(_ halves: (high: UInt64, low: UInt64), into writer: inout ByteWriter) {
        writer.fixed64(halves.high)
        writer.fixed64(halves.low)
    }

    /// Reads 16 bytes as lowercase UUID text, built in place in the string's own storage.
    static func text(from reader: inout ByteReader) throws(WireError) -> String {
        try reader.withBytes(16) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = hexDigit(bytes[index] >> 4)
                    out[position + 1] = hexDigit(bytes[index] & 0xF)
                    position += 2
                }
                return position
            }
        }
    }

    @inline(__always) static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") &+ value : UInt8(ascii: "a") &+ value &- 10
    }
}
