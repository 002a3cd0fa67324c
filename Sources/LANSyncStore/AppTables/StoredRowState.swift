import Foundation
import GRDB
import LANSyncCore

/// How `app_rows.state` keeps a row's CRDT state: the canonical state (`RowState.append(to:)`,
/// what the digest hashes and what a replica of an older schema stored) with what repeats from
/// row to row numbered instead of spelled out.
///
/// A ten-column row's canonical state (each column's name, a 16-byte replica ID, fixed-width
/// lengths and integers: about 300 bytes) is larger than the app's own row: with it, a bulk insert
/// wrote 3.6 times the payload bytes of the same insert without sync. This form of it is about
/// 120 bytes, and the factor 2.4 (the benchmark's table, 20,000 rows, measured with `dbstat`).
///
///     stored:  0xC5 · causal length (varint) · marker kind (u8: 0 none, else `RowChange.Kind`)
///              · stamp count (varint) · stamps · [marker's stamp index (varint), with a marker]
///              · column count (varint) · (column number · stamp index (varint) · value)…
///              · counter count (varint) · (column number · cell count (varint)
///                · (stamp index (varint) · total (zigzag varint))…)…
///     stamp:   HLC (u64 BE) · replica number (varint, `replicas.num`) · counter (varint)
///     value:   tag u8 (0 NULL, 1 INTEGER, 2 REAL, 3 TEXT, 4 BLOB, 5 the app's row holds it)
///              · INTEGER: zigzag varint; REAL: its bits, u64 BE; TEXT and BLOB: varint length
///              · bytes; tag 5: nothing more
///
/// Most states are the one write that made their row, and the app's row holds every value of
/// it: an append-only row for good, any other row until it is first changed. Such a state (a
/// marker, one stamp that is the marker's and every cell's, every cell's value held by the row,
/// no counters) is kept in the held form, which leaves out what the form above repeats per cell:
///
///     held:    0xC6 · causal length (varint) · marker kind (u8, `RowChange.Kind`) · stamp
///              · column count (varint) · column numbers (varint)…
///
/// 28 bytes instead of 48 for the benchmark's ten-column row. Every encoder picks the held form
/// whenever a state qualifies, so that one state has one stored form (the bulk path's bytes are
/// compared with the general one's).
///
/// A cell's value is kept as tag 5 when the app's table shows the row and its column holds
/// exactly that value (type and bytes), so that the value is not stored twice: reading the state
/// then reads the row (`AppRowValues`). Whoever writes a state with such a cell keeps the row in
/// step with it in the same transaction; a row the table stops showing (deleted, or refused by a
/// rule) has its state written again with every value in it.
///
/// Columns and counters keep the canonical order (ascending by name, counter cells by replica),
/// so a state reads back as the `RowState` it was. Column numbers are `app_columns.num`: one
/// numbering of column names for every table, added to when a name is first stored.
/// A canonical state starts with the top byte of its causal length (below 2^40), 0, so a state
/// stored before this form still reads, and the two never mix.
enum StoredRowState {
    static let tag: UInt8 = 0xC5
    /// The tag of the held form: a row's first write, every value of it held by the row.
    static let heldTag: UInt8 = 0xC6
    /// The value tag of a cell whose value the app's row holds.
    static let rowValueTag: UInt8 = 5

    /// Encodes `state`, numbering the column names that have no number yet; every stamp's
    /// replica must have one. `rowHolds(cell)`: the app's row holds the cell's value exactly, so
    /// it is kept as tag 5.
    static func encode(
        _ state: RowState,
        columns: inout ColumnNumbering,
        replicas: [ReplicaID: Int64],
        _ db: Database,
        rowHolds: (RowState.Cell) -> Bool = { _ in false },
        to out: inout [UInt8]
    ) throws {
        let stamps = state.stamps
        if let marker = state.marker, stamps.count == 1, state.counters.isEmpty, state.columns.allSatisfy(rowHolds) {
            appendHeldHeader(
                causalLength: state.causalLength,
                marker: marker.kind,
                stamp: (marker.stamp.hlc, replicas[marker.stamp.dot.replica]!, marker.stamp.dot.counter),
                cells: state.columns.count,
                to: &out
            )
            for (position, cell) in state.columns.enumerated() {
                out.appendVarint(try columns.number(cell.name, position: position, db))
            }
            return
        }
        func index(_ stamp: RowState.Stamp) -> Int { stamps.firstIndex(of: stamp)! }
        out.append(tag)
        out.appendVarint(state.causalLength)
        out.append(state.marker?.kind.rawValue ?? 0)
        out.appendVarint(stamps.count)
        for stamp in stamps { append(stamp, replicas: replicas, to: &out) }
        if let marker = state.marker { out.appendVarint(index(marker.stamp)) }
        out.appendVarint(state.columns.count)
        for (position, cell) in state.columns.enumerated() {
            out.appendVarint(try columns.number(cell.name, position: position, db))
            out.appendVarint(index(cell.stamp))
            if rowHolds(cell) { out.append(rowValueTag) } else { append(cell.value, to: &out) }
        }
        out.appendVarint(state.counters.count)
        for counter in state.counters {
            out.appendVarint(try columns.number(counter.name, db))
            out.appendVarint(counter.cells.count)
            for cell in counter.cells {
                out.appendVarint(index(cell.stamp))
                out.appendVarint(zigzag(cell.total))
            }
        }
    }

    /// Encodes the state `change` makes of a row nothing is known of (see `RowState.appendFirst`),
    /// without building it. `rowHolds(position)`: the app's row holds the value of the change's
    /// cell at `position` exactly (tag 5).
    static func encodeFirst(
        _ change: RowChange,
        columns: inout ColumnNumbering,
        replicas: [ReplicaID: Int64],
        _ db: Database,
        rowHolds: (Int) -> Bool = { _ in false },
        to out: inout [UInt8]
    ) throws {
        _ = try encodeFirst(change, replica: replicas[change.dot.replica]!, rowHolds: rowHolds, to: &out) {
            name,
            position in
            try columns.number(name, position: position, db)
        }
    }

    /// The same with the numbers of a snapshot (`StoredNumbering`), off the writer: nil when it
    /// has no number for a column or the replica yet (the writer gives one then). `last`: the
    /// numbers of the cells' columns of the change encoded before, reused when this one lists
    /// the same columns (each lookup by name hashes the name).
    static func encodeFirst(
        _ change: RowChange,
        numbering: StoredNumbering,
        last: inout StoredNumbering.LastColumns
    ) -> [UInt8]? {
        guard let replica = numbering.replicas[change.dot.replica] else { return nil }
        if !last.lists(change.values) {
            var numbers = [Int64]()
            numbers.reserveCapacity(change.values.count)
            for value in change.values {
                guard let number = numbering.columns[value.column] else { return nil }
                numbers.append(number)
            }
            last = StoredNumbering.LastColumns(names: change.values.map(\.column), numbers: numbers)
        }
        let numbers = last.numbers
        var out = [UInt8]()
        out.reserveCapacity(64 + change.values.count * 24)
        let holding = RowHolding.first(change, table: numbering.declaredTables[change.key.table])
        let encoded = encodeFirst(
            change,
            replica: replica,
            rowHolds: { holding.holds(change.values[$0].column, change.values[$0].value) },
            to: &out,
            number: { name, position in position == Int.max ? numbering.columns[name] : numbers[position] }
        )
        return encoded ? out : nil
    }

    /// `number(name, position)`: a column's number (`position`: where it is among the state's
    /// cells; `Int.max` for a counter), or nil, which stops the encoding: false.
    private static func encodeFirst(
        _ change: RowChange,
        replica: Int64,
        rowHolds: (Int) -> Bool = { _ in false },
        to out: inout [UInt8],
        number: (String, Int) throws -> Int64?
    ) rethrows -> Bool {
        let marked = change.kind != .update
        let totals = change.kind == .append ? [] : change.totals
        let stamped = marked || !change.values.isEmpty || !totals.isEmpty
        if marked, totals.isEmpty, change.values.indices.allSatisfy(rowHolds) {
            appendHeldHeader(
                causalLength: change.causalLength,
                marker: change.kind,
                stamp: (change.hlc, replica, change.dot.counter),
                cells: change.values.count,
                to: &out
            )
            for (position, value) in change.values.enumerated() {
                guard let column = try number(value.column, position) else { return false }
                out.appendVarint(column)
            }
            return true
        }
        appendFirstHeader(
            causalLength: change.causalLength,
            marker: marked ? change.kind : nil,
            stamp: stamped ? (change.hlc, replica, change.dot.counter) : nil,
            cells: change.values.count,
            to: &out
        )
        for (position, value) in change.values.enumerated() {
            guard let column = try number(value.column, position) else { return false }
            out.appendVarint(column)
            out.append(0)
            if rowHolds(position) { out.append(rowValueTag) } else { append(value.value, to: &out) }
        }
        out.appendVarint(totals.count)
        for total in totals {
            guard let column = try number(total.column, Int.max) else { return false }
            out.appendVarint(column)
            out.append(1)
            out.append(0)
            out.appendVarint(zigzag(total.total))
        }
        return true
    }

    /// What a first change's state starts with, before its cells: the tag, its life, its marker
    /// (nil for an update), its one stamp (nil for an update that sets nothing; the replica by
    /// its number) and the number of cells, for a state that does not take the held form.
    static func appendFirstHeader(
        causalLength: UInt64,
        marker: RowChange.Kind?,
        stamp: (hlc: HybridTimestamp, replica: Int64, counter: UInt64)?,
        cells: Int,
        to out: inout [UInt8]
    ) {
        out.append(tag)
        out.appendVarint(causalLength)
        out.append(marker?.rawValue ?? 0)
        out.appendVarint(stamp == nil ? 0 : 1)
        if let stamp {
            out.appendBigEndian(stamp.hlc.rawValue)
            out.appendVarint(stamp.replica)
            out.appendVarint(stamp.counter)
        }
        if marker != nil { out.append(0) }
        out.appendVarint(cells)
    }

    /// What a state in the held form starts with, before its column numbers: the tag, its life,
    /// its marker, its one stamp (the replica by its number) and the number of cells.
    /// `encode`, `encodeFirst` and the store's encoded inserts share it.
    static func appendHeldHeader(
        causalLength: UInt64,
        marker: RowChange.Kind,
        stamp: (hlc: HybridTimestamp, replica: Int64, counter: UInt64),
        cells: Int,
        to out: inout [UInt8]
    ) {
        out.append(heldTag)
        out.appendVarint(causalLength)
        out.append(marker.rawValue)
        out.appendBigEndian(stamp.hlc.rawValue)
        out.appendVarint(stamp.replica)
        out.appendVarint(stamp.counter)
        out.appendVarint(cells)
    }

    /// Reads a stored state, in this form or the canonical one. `columns` and `replicas` number
    /// what it names; a number missing from them throws (the database is damaged).
    /// `rowValue(column)`: the value the app's row holds in a column, for the cells kept as tag 5;
    /// nil when the state is read without its row, which such a cell then fails.
    static func decode(
        _ bytes: UnsafeRawBufferPointer,
        columns: [Int64: String],
        replicas: [Int64: ReplicaID],
        rowValue: ((String) throws -> SQLValue)? = nil
    ) throws -> RowState {
        if bytes.first == heldTag {
            return try decodeHeld(bytes, columns: columns, replicas: replicas, rowValue: rowValue)
        }
        guard bytes.first == tag else {
            do {
                return try RowState(canonicalBytes: Array(bytes))
            } catch {
                throw StoreError(.database, "a stored app-table row does not read (\(error)); the database is damaged")
            }
        }
        var reader = Reader(bytes: bytes, position: 1)
        let causalLength = try reader.varint()
        let kindByte = try reader.byte()
        let kind = kindByte == 0 ? nil : RowChange.Kind(rawValue: kindByte)
        guard kindByte == 0 || kind != nil else { throw Reader.damaged }
        let stampCount = try reader.count()
        var stamps = [RowState.Stamp]()
        stamps.reserveCapacity(stampCount)
        for _ in 0..<stampCount {
            let hlc = HybridTimestamp(rawValue: try reader.fixed64())
            guard let replica = replicas[Int64(truncatingIfNeeded: try reader.varint())] else { throw Reader.damaged }
            stamps.append(RowState.Stamp(hlc: hlc, dot: Dot(replica: replica, counter: try reader.varint())))
        }
        func stamp() throws -> RowState.Stamp {
            let index = try reader.count()
            guard index < stamps.count else { throw Reader.damaged }
            return stamps[index]
        }
        func name() throws -> String {
            guard let name = columns[Int64(truncatingIfNeeded: try reader.varint())] else { throw Reader.damaged }
            return name
        }
        let marker = try kind.map { ($0, try stamp()) }
        let columnCount = try reader.count()
        var cells = [RowState.Cell]()
        cells.reserveCapacity(columnCount)
        for _ in 0..<columnCount {
            let name = try name()
            let cellStamp = try stamp()
            let value: SQLValue
            if reader.position < bytes.count, bytes[reader.position] == rowValueTag {
                reader.position += 1
                guard let rowValue else { throw rowValueMissing }
                value = try rowValue(name)
            } else {
                value = try reader.value()
            }
            cells.append(RowState.Cell(name: name, stamp: cellStamp, value: value))
        }
        let counterCount = try reader.count()
        var counters = [RowState.Counter]()
        for _ in 0..<counterCount {
            let name = try name()
            var counterCells = [RowState.CounterCell]()
            for _ in 0..<(try reader.count()) {
                let cellStamp = try stamp()
                counterCells.append(RowState.CounterCell(stamp: cellStamp, total: unzigzag(try reader.varint())))
            }
            counters.append(RowState.Counter(name: name, cells: counterCells))
        }
        guard reader.position == bytes.count else { throw Reader.damaged }
        return RowState(causalLength: causalLength, marker: marker, columns: cells, counters: counters)
    }

    /// Reads a state in the held form: every cell's value is read from the app's row.
    private static func decodeHeld(
        _ bytes: UnsafeRawBufferPointer,
        columns: [Int64: String],
        replicas: [Int64: ReplicaID],
        rowValue: ((String) throws -> SQLValue)?
    ) throws -> RowState {
        var reader = Reader(bytes: bytes, position: 1)
        let causalLength = try reader.varint()
        guard let kind = RowChange.Kind(rawValue: try reader.byte()) else { throw Reader.damaged }
        let hlc = HybridTimestamp(rawValue: try reader.fixed64())
        guard let replica = replicas[Int64(truncatingIfNeeded: try reader.varint())] else { throw Reader.damaged }
        let stamp = RowState.Stamp(hlc: hlc, dot: Dot(replica: replica, counter: try reader.varint()))
        let columnCount = try reader.count()
        var cells = [RowState.Cell]()
        cells.reserveCapacity(columnCount)
        for _ in 0..<columnCount {
            guard let name = columns[Int64(truncatingIfNeeded: try reader.varint())] else { throw Reader.damaged }
            guard let rowValue else { throw rowValueMissing }
            cells.append(RowState.Cell(name: name, stamp: stamp, value: try rowValue(name)))
        }
        guard reader.position == bytes.count else { throw Reader.damaged }
        return RowState(causalLength: causalLength, marker: (kind, stamp), columns: cells, counters: [])
    }

    static func decode(
        _ data: Data,
        columns: [Int64: String],
        replicas: [Int64: ReplicaID],
        rowValue: ((String) throws -> SQLValue)? = nil
    ) throws -> RowState {
        try data.withUnsafeBytes { try decode($0, columns: columns, replicas: replicas, rowValue: rowValue) }
    }

    /// A state names a value of the app's row, and was read without the row.
    static let rowValueMissing = StoreError(
        .database,
        "a stored app-table row names a value of its table's row, which is missing; the database is damaged"
    )

    private static func append(_ stamp: RowState.Stamp, replicas: [ReplicaID: Int64], to out: inout [UInt8]) {
        out.appendBigEndian(stamp.hlc.rawValue)
        out.appendVarint(replicas[stamp.dot.replica]!)
        out.appendVarint(stamp.dot.counter)
    }

    private static func append(_ value: SQLValue, to out: inout [UInt8]) {
        switch value {
        case .null:
            out.append(0)
        case .integer(let integer):
            out.append(1)
            out.appendVarint(zigzag(integer))
        case .realBits(let bits):
            out.append(2)
            out.appendBigEndian(bits)
        case .text(let text):
            out.append(3)
            out.appendVarint(text.utf8.count)
            out.append(contentsOf: text.utf8)
        case .blob(let bytes):
            out.append(4)
            out.appendVarint(bytes.count)
            out.append(contentsOf: bytes)
        }
    }

    private static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }
    private static func unzigzag(_ value: UInt64) -> Int64 {
        Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
    }

    /// Reads the bytes of one stored state (and the keys of a `DotRun`); any inconsistency means
    /// the database is damaged.
    struct Reader {
        static let damaged = StoreError(.database, "a stored app-table row does not read; the database is damaged")

        let bytes: UnsafeRawBufferPointer
        var position: Int

        mutating func byte() throws -> UInt8 {
            guard position < bytes.count else { throw Self.damaged }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = try byte()
                guard shift < 64 else { throw Self.damaged }
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }

        /// A count or an index, which can never exceed the bytes left.
        mutating func count() throws -> Int {
            let value = try varint()
            guard value <= UInt64(bytes.count) else { throw Self.damaged }
            return Int(value)
        }

        mutating func fixed64() throws -> UInt64 {
            guard bytes.count - position >= 8 else { throw Self.damaged }
            var value: UInt64 = 0
            for offset in 0..<8 { value = value << 8 | UInt64(bytes[position + offset]) }
            position += 8
            return value
        }

        mutating func take(_ count: Int) throws -> UnsafeRawBufferPointer {
            guard count <= bytes.count - position else { throw Self.damaged }
            defer { position += count }
            return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
        }

        mutating func value() throws -> SQLValue {
            switch try byte() {
            case 0: return .null
            case 1: return .integer(unzigzag(try varint()))
            case 2: return .realBits(try fixed64())
            case 3:
                // Stored from a value that was valid UTF-8 (a `String`).
                return .text(String(decoding: try take(try count()), as: UTF8.self))
            case 4: return .blob(Array(try take(try count())))
            default: throw Self.damaged
            }
        }
    }
}

extension Array where Element == UInt8 {
    /// An unsigned LEB128 varint.
    mutating func appendVarint(_ value: UInt64) { forEachVarintByte(value) { append($0) } }

    mutating func appendVarint(_ value: Int) { appendVarint(UInt64(value)) }
    mutating func appendVarint(_ value: Int64) { appendVarint(UInt64(value)) }
}

/// The numbers stored states give column names and replicas, as committed when read: numbers
/// are only ever added, so a snapshot agrees with the writer on every number it holds. A check
/// off the writer encodes new rows' states with it (`FirstRow`).
package struct StoredNumbering: Sendable {
    var columns: [String: Int64] = [:]
    var replicas: [ReplicaID: Int64] = [:]
    /// The tables this replica's app declares, by name: a new row's state names the values its
    /// table will hold (`RowHolding`), as the writer's own encoding does.
    var declaredTables: [String: AppCatalog.Table] = [:]

    /// The numbers of one change's cells' columns, in its order.
    struct LastColumns {
        var names: [String] = []
        var numbers: [Int64] = []

        /// Whether `values` are cells of these columns, in this order.
        func lists(_ values: [RowChange.Value]) -> Bool {
            guard values.count == names.count else { return false }
            for (value, name) in zip(values, names) where value.column != name { return false }
            return true
        }
    }

    static func load(_ db: Database, catalog: AppCatalogCache) throws -> StoredNumbering {
        var numbering = StoredNumbering()
        for table in try catalog.catalog(db).tables.values where table.declared != nil {
            numbering.declaredTables[table.name] = table
        }
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT num, name FROM app_columns")) {
            numbering.columns[row[1]] = row[0]
        }
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT num, replica_id FROM replicas")) {
            if let replica = ReplicaID(bytes: [UInt8](row[1] as Data)) { numbering.replicas[replica] = row[0] }
        }
        return numbering
    }
}

/// The numbers stored states give column names (`app_columns`), both ways.
struct ColumnNumbering {
    private(set) var numbers: [String: Int64] = [:]
    private(set) var names: [Int64: String] = [:]

    static func load(_ db: Database) throws -> ColumnNumbering {
        var numbering = ColumnNumbering()
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT num, name FROM app_columns")) {
            numbering.numbers[row[1]] = row[0]
            numbering.names[row[0]] = row[1]
        }
        return numbering
    }

    /// The names last numbered by their position in a state's columns: the rows of a bulk write
    /// or a catch-up name the same columns in the same order, and comparing a name with the one
    /// at its position (the same string, usually) costs less than hashing it.
    private var recent: [(name: String, number: Int64)] = []

    /// The number of column `name`, given one first if it has none. `position`: where it is in
    /// the state's columns.
    mutating func number(_ name: String, position: Int, _ db: Database) throws -> Int64 {
        if position < recent.count, recent[position].name == name { return recent[position].number }
        let number = try number(name, db)
        if position < recent.count {
            recent[position] = (name, number)
        } else if position == recent.count {
            recent.append((name, number))
        }
        return number
    }

    mutating func number(_ name: String, _ db: Database) throws -> Int64 {
        if let number = numbers[name] { return number }
        try db.execute(sql: "INSERT INTO app_columns (name) VALUES (?)", arguments: [name])
        let number = db.lastInsertedRowID
        numbers[name] = number
        names[number] = name
        return number
    }
}

/// Writes bytes through a pointer into memory the caller sized for them: for the bulk path's
/// many small pieces per row, which appended to an array one by one cost a uniqueness and a
/// capacity check each.
struct ByteWriter {
    private(set) var position: UnsafeMutablePointer<UInt8>

    init(_ start: UnsafeMutablePointer<UInt8>) { position = start }

    mutating func byte(_ value: UInt8) {
        position.pointee = value
        position += 1
    }

    mutating func bytes(_ source: UnsafeBufferPointer<UInt8>) {
        guard let base = source.baseAddress, source.count > 0 else { return }
        position.update(from: base, count: source.count)
        position += source.count
    }

    mutating func varint(_ value: UInt64) { forEachVarintByte(value) { byte($0) } }
}

/// The bytes of `value` as an unsigned LEB128 varint (seven bits a byte, low bits first, the
/// high bit set on every byte but the last), for `Array.appendVarint` and `ByteWriter.varint`.
@inline(__always) private func forEachVarintByte(_ value: UInt64, _ emit: (UInt8) -> Void) {
    var rest = value
    while rest >= 0x80 {
        emit(UInt8(truncatingIfNeeded: rest) | 0x80)
        rest >>= 7
    }
    emit(UInt8(rest))
}
