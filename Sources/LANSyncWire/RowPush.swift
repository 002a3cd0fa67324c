package import LANSyncCore

/// One new app-table row change pushed live, in few bytes (protocol version 3, §5.2): a
/// one-column update of a row keyed by a UUID reaches a connected peer as about 40 bytes plus
/// the column's value.
///
/// Replicas, app tables and columns are interned per connection and direction. A reference is a
/// varint `slot × 2 + d`: with `d = 0` it names a slot defined earlier; with `d = 1` it defines
/// that slot — which must be the next one — with the bytes that follow (a replica's 16-byte ID, a
/// table's or column's name). Counters and clock readings travel as steps from the previous row
/// push in the same direction.
///
/// A push may carry a *digest check*: the first 8 bytes of the sender's state digest right after
/// this change. A receiver whose own digest, after merging the change, starts with them holds
/// exactly the sender's state, so it learns the sender's digest without a `state` message.
package struct RowPush: Equatable, Sendable {
    /// A reference to an interned value: a slot defined earlier, or the definition of a slot.
    package enum Reference<Value: Equatable & Sendable>: Equatable, Sendable {
        case slot(Int)
        case define(Int, Value)

        package var slot: Int {
            switch self {
            case .slot(let slot), .define(let slot, _): return slot
            }
        }
    }

    package struct ColumnValue: Equatable, Sendable {
        package var column: Reference<String>
        package var value: SQLValue
    }

    package struct ColumnTotal: Equatable, Sendable {
        package var column: Reference<String>
        package var total: Int64
    }

    package var replica: Reference<ReplicaID>
    package var table: Reference<String>
    /// The change's counter minus the previous row push's counter for the same replica (or the counter).
    package var counterStep: Int64
    /// The change's raw HLC reading minus the previous row push's in this direction (or minus 0).
    package var hlcStep: Int64
    package var kind: RowChange.Kind
    package var causalLength: UInt64
    package var primaryKey: [SQLValue]
    package var values: [ColumnValue]
    package var totals: [ColumnTotal]
    /// The first 8 bytes of the sender's digest after this change, big-endian.
    package var digestCheck: UInt64?
    /// The writer's signature of its chain's head at this change's counter (version 4, 64 bytes).
    package var signature: [UInt8]

    enum Flag {
        static let digestCheck: UInt8 = 1
    }

    func encode(into writer: inout ByteWriter) {
        writer.byte(digestCheck == nil ? 0 : Flag.digestCheck)
        Self.write(replica, into: &writer) { writer, replica in writer.raw(replica.bytes) }
        Self.write(table, into: &writer) { writer, name in writer.string(name) }
        writer.signed(counterStep)
        writer.signed(hlcStep)
        writer.byte(kind.rawValue)
        writer.varint(causalLength)
        writer.byte(UInt8(primaryKey.count))
        for value in primaryKey { DeltaCoding.write(value, into: &writer) }
        writer.varint(values.count)
        for item in values {
            Self.write(item.column, into: &writer) { writer, name in writer.string(name) }
            DeltaCoding.write(item.value, into: &writer)
        }
        writer.varint(totals.count)
        for item in totals {
            Self.write(item.column, into: &writer) { writer, name in writer.string(name) }
            writer.signed(item.total)
        }
        if let digestCheck { writer.fixed64(digestCheck) }
        writer.raw(signature)
    }

    static func decode(from reader: inout ByteReader) throws(WireError) -> RowPush {
        let flags = try reader.flags(known: Flag.digestCheck, "row push flags")
        let replica = try readReference(&reader, "replica") { (reader: inout ByteReader) throws(WireError) in
            ReplicaID(bytes: try reader.raw(16))!
        }
        let table = try readReference(&reader, "app table") { (reader: inout ByteReader) throws(WireError) in
            try reader.string(atMost: RowChange.maxNameLength, "app table name")
        }
        let counterStep = try reader.signed()
        let hlcStep = try reader.signed()
        let kindByte = try reader.byte()
        guard let kind = RowChange.Kind(rawValue: kindByte) else {
            throw WireError("unknown row change kind \(kindByte) (1-4)")
        }
        let causalLength = try reader.counter(atLeast: 1, "causal length")
        let keyCount = Int(try reader.byte())
        guard (1...SQLValue.maxKeyColumns).contains(keyCount) else {
            throw WireError("a key has 1-\(SQLValue.maxKeyColumns) values, not \(keyCount)")
        }
        var key = [SQLValue]()
        for _ in 0..<keyCount { key.append(try DeltaCoding.readValue(from: &reader)) }
        func column(_ reader: inout ByteReader) throws(WireError) -> Reference<String> {
            try readReference(&reader, "column") { (reader: inout ByteReader) throws(WireError) in
                try reader.string(atMost: RowChange.maxNameLength, "column name")
            }
        }
        var values = [ColumnValue]()
        for _ in 0..<(try reader.count(atMost: RowChange.maxColumns, "column count")) {
            let name = try column(&reader)
            values.append(ColumnValue(column: name, value: try DeltaCoding.readValue(from: &reader)))
        }
        var totals = [ColumnTotal]()
        for _ in 0..<(try reader.count(atMost: RowChange.maxColumns, "counter count")) {
            let name = try column(&reader)
            totals.append(ColumnTotal(column: name, total: try reader.signed()))
        }
        let check = flags & Flag.digestCheck != 0 ? try reader.fixed64() : nil
        let signature = try reader.raw(64)
        return RowPush(
            replica: replica,
            table: table,
            counterStep: counterStep,
            hlcStep: hlcStep,
            kind: kind,
            causalLength: causalLength,
            primaryKey: key,
            values: values,
            totals: totals,
            digestCheck: check,
            signature: signature
        )
    }

    private static func write<Value>(
        _ reference: Reference<Value>,
        into writer: inout ByteWriter,
        definition: (inout ByteWriter, Value) -> Void
    ) {
        switch reference {
        case .slot(let slot):
            writer.varint(UInt64(slot) << 1)
        case .define(let slot, let value):
            writer.varint(UInt64(slot) << 1 | 1)
            definition(&writer, value)
        }
    }

    /// Reads a reference; its slot must be below `WireProtocol.maxTableEntries`.
    private static func readReference<Value>(
        _ reader: inout ByteReader,
        _ what: String,
        definition: (inout ByteReader) throws(WireError) -> Value
    ) throws(WireError) -> Reference<Value> {
        let reference = try reader.varint()
        let slot = reference >> 1
        guard slot < UInt64(WireProtocol.maxTableEntries) else {
            throw WireError(
                "row push names \(what) slot \(slot), beyond the \(WireProtocol.maxTableEntries) a connection may define"
            )
        }
        return reference & 1 == 0 ? .slot(Int(slot)) : .define(Int(slot), try definition(&reader))
    }
}

/// The interned values of one direction of a connection, on either side.
private struct Slots<Value: Hashable & Sendable>: Sendable {
    var items: [Value] = []
    var indexes: [Value: Int] = [:]

    func contains(_ value: Value) -> Bool { indexes[value] != nil }

    /// Whether `value` has a slot or one can be defined for it.
    func hasRoom(for value: Value) -> Bool { contains(value) || items.count < WireProtocol.maxTableEntries }

    /// The reference for `value`: its slot, or the definition of the next one; nil when full.
    mutating func reference(for value: Value) -> RowPush.Reference<Value>? {
        if let slot = indexes[value] { return .slot(slot) }
        guard items.count < WireProtocol.maxTableEntries else { return nil }
        indexes[value] = items.count
        items.append(value)
        return .define(items.count - 1, value)
    }

    /// The value a reference stands for, recording a definition; it must define the next slot.
    mutating func value(of reference: RowPush.Reference<Value>, _ what: String) throws(WireError) -> Value {
        switch reference {
        case .slot(let slot):
            guard slot < items.count else { throw WireError("row push names an undefined \(what) slot \(slot)") }
            return items[slot]
        case .define(let slot, let value):
            guard slot == items.count else {
                throw WireError("row push defines \(what) slot \(slot) out of order (next: \(items.count))")
            }
            items.append(value)
            return value
        }
    }
}

/// What each side remembers of one direction of a connection: the interned values and the last
/// counter and clock reading, which the steps are taken from.
private struct RowPushTables: Sendable {
    var replicas = Slots<ReplicaID>()
    var tables = Slots<String>()
    var columns = Slots<String>()
    var lastCounter: [Int: UInt64] = [:]
    var lastHLC: UInt64 = 0
}

/// The sending side's tables for one connection: builds row pushes, remembering what it defined.
package struct RowPushEncoder: Sendable {
    private var state = RowPushTables()

    package init() {}

    /// The push for `change` with the writer's `signature` of its head there, updating the
    /// tables; nil when a table would overflow (send a delta instead; the tables are then unchanged).
    package mutating func push(_ change: RowChange, signature: [UInt8], digestCheck: UInt64?) -> RowPush? {
        precondition(signature.count == 64, "an Ed25519 signature is 64 bytes")
        var newColumns = Set<String>()
        for item in change.values where !state.columns.contains(item.column) { newColumns.insert(item.column) }
        for item in change.totals where !state.columns.contains(item.column) { newColumns.insert(item.column) }
        guard state.replicas.hasRoom(for: change.dot.replica), state.tables.hasRoom(for: change.key.table),
            state.columns.items.count + newColumns.count <= WireProtocol.maxTableEntries,
            let replica = state.replicas.reference(for: change.dot.replica),
            let table = state.tables.reference(for: change.key.table)
        else { return nil }
        var values = [RowPush.ColumnValue]()
        values.reserveCapacity(change.values.count)
        for item in change.values {
            guard let column = state.columns.reference(for: item.column) else { return nil }
            values.append(.init(column: column, value: item.value))
        }
        var totals = [RowPush.ColumnTotal]()
        for item in change.totals {
            guard let column = state.columns.reference(for: item.column) else { return nil }
            totals.append(.init(column: column, total: item.total))
        }
        let counterStep = Int64(bitPattern: change.dot.counter &- (state.lastCounter[replica.slot] ?? 0))
        state.lastCounter[replica.slot] = change.dot.counter
        let hlcStep = Int64(bitPattern: change.hlc.rawValue &- state.lastHLC)
        state.lastHLC = change.hlc.rawValue
        return RowPush(
            replica: replica,
            table: table,
            counterStep: counterStep,
            hlcStep: hlcStep,
            kind: change.kind,
            causalLength: change.causalLength,
            primaryKey: change.key.primaryKey,
            values: values,
            totals: totals,
            digestCheck: digestCheck,
            signature: signature
        )
    }
}

/// The receiving side's tables for one connection: turns row pushes back into row changes.
package struct RowPushDecoder: Sendable {
    private var state = RowPushTables()

    package init() {}

    package mutating func change(from push: RowPush) throws(WireError) -> RowChange {
        let replica = try state.replicas.value(of: push.replica, "replica")
        let table = try state.tables.value(of: push.table, "app table")
        var values = [RowChange.Value]()
        values.reserveCapacity(push.values.count)
        for item in push.values {
            values.append(.init(column: try state.columns.value(of: item.column, "column"), value: item.value))
        }
        var totals = [RowChange.Total]()
        for item in push.totals {
            totals.append(.init(column: try state.columns.value(of: item.column, "column"), total: item.total))
        }
        // Steps wrap modulo 2^64; the counter they land on must be a valid one.
        let counter = (state.lastCounter[push.replica.slot] ?? 0) &+ UInt64(bitPattern: push.counterStep)
        guard counter > 0, counter <= Dot.maxCounter else {
            throw WireError("row push counter \(counter) is outside 1...\(Dot.maxCounter)")
        }
        state.lastCounter[push.replica.slot] = counter
        state.lastHLC = state.lastHLC &+ UInt64(bitPattern: push.hlcStep)
        return RowChange(
            key: RowKey(table: table, primaryKey: push.primaryKey),
            kind: push.kind,
            causalLength: push.causalLength,
            hlc: HybridTimestamp(rawValue: state.lastHLC),
            dot: Dot(replica: replica, counter: counter),
            values: values,
            totals: totals
        )
    }
}

extension RowPush {
    /// The delta a row push stands for: its one change (every cell of it still winning),
    /// completing its replica by one counter, with the writer's signature of its head there. Only
    /// a delta of exactly this shape may be sent as a row push.
    package static func delta(carrying change: RowChange, signature: [UInt8]) -> Delta {
        Delta(
            rows: [change],
            coverage: [
                .init(
                    replica: change.dot.replica,
                    from: change.dot.counter - 1,
                    through: change.dot.counter,
                    signature: signature
                )
            ]
        )
    }

    /// The digest check for `digest`: its first 8 bytes, big-endian.
    package static func check(of digest: StateDigest) -> UInt64 { digest.limbs[0] }
}
