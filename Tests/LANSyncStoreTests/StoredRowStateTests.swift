import Foundation
import GRDB
import LANSyncCore
import PropertyBased
import Testing

@testable import LANSyncStore

/// The compact form `app_rows` keeps states in (`StoredRowState`): every state reads back as it
/// was, a first change's fast encoding reads back as the state it makes, and damaged bytes throw
/// instead of trapping.
@Suite struct StoredRowStateTests {
    static let names = ["name", "weight", "notes", "xp", "a_column_with_a_long_name", "é"]
    static let replicas = (1...3).map { ReplicaID(high: UInt64($0), low: 0xABCD) }

    /// A database with the column numbering's table, as schema 5 makes it.
    static func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write {
            try $0.execute(sql: "CREATE TABLE app_columns (num INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        }
        return queue
    }

    static func value(_ seed: Int) -> SQLValue {
        switch seed % 6 {
        case 0: return .null
        case 1: return .integer((Int64(seed) &* (seed % 2 == 0 ? 1 : -1)) &<< Int64(seed % 50))
        case 2: return .real(Double(seed) / 7)
        case 3: return .text(String(repeating: "é𝄞x", count: seed % 5))
        case 4: return .blob((0..<(seed % 9)).map { UInt8(truncatingIfNeeded: $0 * seed) })
        default: return .integer(Int64.min + Int64(seed % 3))
        }
    }

    /// A change of one row chosen by `seed`: any kind, life, replica, columns and counters.
    static func change(_ seed: Int, counter: UInt64) -> RowChange {
        let kinds: [RowChange.Kind] = [.insert, .update, .delete, .append]
        let kind = kinds[seed % 4]
        let life: UInt64 =
            kind == .append ? 1 : kind == .delete ? UInt64(2 + 2 * (seed / 4 % 3)) : UInt64(1 + 2 * (seed / 4 % 3))
        var values = [String: SQLValue]()
        var totals = [String: Int64]()
        if kind != .delete {
            for (index, name) in names.enumerated() where (seed >> (index + 3)) & 1 == 1 {
                if kind != .append, index % 3 == 0 {
                    totals[name] = Int64(seed % 1_000) - 500
                } else {
                    values[name] = value(seed / (index + 1))
                }
            }
        }
        return RowChange(
            key: RowKey(table: "athletes", primaryKey: [.text("a")]),
            kind: kind,
            causalLength: life,
            hlc: HybridTimestamp(physicalMilliseconds: UInt64(1_000 + seed % 97), logical: 0),
            dot: Dot(replica: replicas[seed % 3], counter: counter),
            values: values.sorted { $0.key < $1.key }.map { .init(column: $0.key, value: $0.value) },
            totals: totals.sorted { $0.key < $1.key }.map { .init(column: $0.key, total: $0.value) }
        )
    }

    @Test func everyStateReadsBackAsItWas() async throws {
        let queue = try Self.database()
        let numbers = Dictionary(
            uniqueKeysWithValues: Self.replicas.enumerated().map { ($0.element, Int64($0.offset + 1)) }
        )
        let ids = Dictionary(uniqueKeysWithValues: numbers.map { ($0.value, $0.key) })
        await propertyCheck(count: 200, input: Gen.int(in: 0...1_000_000).array(of: 1...12)) { seeds in
            try! queue.write { db in
                var columns = try ColumnNumbering.load(db)
                var state = RowState()
                for (counter, seed) in seeds.enumerated() {
                    let change = Self.change(seed, counter: UInt64(counter + 1))
                    #expect(change.problem() == nil)
                    if counter == 0 {
                        // A row's first change, encoded without building its state.
                        var first = [UInt8]()
                        try StoredRowState.encodeFirst(change, columns: &columns, replicas: numbers, db, to: &first)
                        var made = RowState()
                        made.merge(change)
                        let read = try first.withUnsafeBytes {
                            try StoredRowState.decode($0, columns: columns.names, replicas: ids)
                        }
                        #expect(read == made, "\(change)")
                    }
                    state.merge(change)
                    var stored = [UInt8]()
                    try StoredRowState.encode(state, columns: &columns, replicas: numbers, db, to: &stored)
                    // Read without a row, only a state with no cell to hold takes the held form.
                    #expect(
                        stored.first == StoredRowState.tag
                            || (stored.first == StoredRowState.heldTag && state.columns.isEmpty
                                && state.counters.isEmpty)
                    )
                    let read = try stored.withUnsafeBytes {
                        try StoredRowState.decode($0, columns: columns.names, replicas: ids)
                    }
                    #expect(read == state && read.canonicalBytes == state.canonicalBytes)
                    // A state stored canonically (schema 4) reads too.
                    let canonical = state.canonicalBytes
                    #expect(
                        try canonical.withUnsafeBytes { try StoredRowState.decode($0, columns: [:], replicas: [:]) }
                            == state
                    )
                }
            }
        }
    }

    /// A first write whose every value the app's row holds takes the held form, from the fast
    /// encoding of the change and from its built state alike (one state, one stored form), and
    /// reads back with its row's values; a state that does not qualify keeps the general form.
    @Test func aFirstWriteTheRowHoldsTakesTheHeldFormAndReadsBack() async throws {
        let queue = try Self.database()
        let numbers = Dictionary(
            uniqueKeysWithValues: Self.replicas.enumerated().map { ($0.element, Int64($0.offset + 1)) }
        )
        let ids = Dictionary(uniqueKeysWithValues: numbers.map { ($0.value, $0.key) })
        await propertyCheck(count: 300, input: Gen.int(in: 0...1_000_000)) { seed in
            try! queue.write { db in
                var columns = try ColumnNumbering.load(db)
                let change = Self.change(seed, counter: UInt64(seed % 1_000 + 1))
                var made = RowState()
                made.merge(change)
                var first = [UInt8]()
                try StoredRowState.encodeFirst(
                    change,
                    columns: &columns,
                    replicas: numbers,
                    db,
                    rowHolds: { _ in true },
                    to: &first
                )
                var built = [UInt8]()
                try StoredRowState.encode(
                    made,
                    columns: &columns,
                    replicas: numbers,
                    db,
                    rowHolds: { _ in true },
                    to: &built
                )
                #expect(first == built, "\(change)")
                let qualifies = change.kind != .update && (change.kind == .append || change.totals.isEmpty)
                #expect(first.first == (qualifies ? StoredRowState.heldTag : StoredRowState.tag), "\(change)")
                let read = try first.withUnsafeBytes {
                    try StoredRowState.decode($0, columns: columns.names, replicas: ids) { name in
                        made.value(of: name)!
                    }
                }
                #expect(read == made && read.canonicalBytes == made.canonicalBytes, "\(change)")
                // One value the row does not hold: the general form, which keeps it.
                if qualifies, let kept = change.values.first {
                    var one = [UInt8]()
                    try StoredRowState.encodeFirst(
                        change,
                        columns: &columns,
                        replicas: numbers,
                        db,
                        rowHolds: { change.values[$0].column != kept.column },
                        to: &one
                    )
                    #expect(one.first == StoredRowState.tag)
                }
                // Without its row, a held state cannot read.
                if qualifies, !change.values.isEmpty {
                    #expect(throws: StoreError.self) {
                        try first.withUnsafeBytes {
                            try StoredRowState.decode($0, columns: columns.names, replicas: ids)
                        }
                    }
                }
            }
        }
    }

    /// Damaged bytes (cut short, or changed at random) throw `StoreError` saying so, or read as
    /// some state; they never trap.
    @Test func damagedBytesThrowInsteadOfTrapping() async throws {
        let queue = try Self.database()
        let numbers = Dictionary(
            uniqueKeysWithValues: Self.replicas.enumerated().map { ($0.element, Int64($0.offset + 1)) }
        )
        let ids = Dictionary(uniqueKeysWithValues: numbers.map { ($0.value, $0.key) })
        var built = RowState()
        // No deletes: the state keeps columns, so a numbering without them fails to read it.
        for counter in 1...6 where Self.change(counter * 7_919, counter: UInt64(counter)).kind != .delete {
            built.merge(Self.change(counter * 7_919, counter: UInt64(counter)))
        }
        let state = built
        #expect(!state.columns.isEmpty)
        let (stored, names) = try await queue.write { db in
            var columns = try ColumnNumbering.load(db)
            var stored = [UInt8]()
            try StoredRowState.encode(state, columns: &columns, replicas: numbers, db, to: &stored)
            return (stored, columns.names)
        }
        var thrown = 0
        for length in 1..<stored.count {
            do {
                _ = try Array(stored.prefix(length)).withUnsafeBytes {
                    try StoredRowState.decode($0, columns: names, replicas: ids)
                }
            } catch let error as StoreError {
                #expect(error.description.contains("the database is damaged"))
                thrown += 1
            }
        }
        #expect(thrown == stored.count - 1, "every cut-short state throws")
        // The held form the same way: its first write, every value held by the row.
        let first = Self.change(11, counter: 1)
        var made = RowState()
        made.merge(first)
        let held = made
        let heldBytes = try await queue.write { db in
            var columns = try ColumnNumbering.load(db)
            var bytes = [UInt8]()
            try StoredRowState.encode(
                held,
                columns: &columns,
                replicas: numbers,
                db,
                rowHolds: { _ in true },
                to: &bytes
            )
            return bytes
        }
        #expect(heldBytes.first == StoredRowState.heldTag)
        let heldNames = try await queue.read { try ColumnNumbering.load($0).names }
        for length in 1..<heldBytes.count {
            #expect(throws: StoreError.self) {
                try Array(heldBytes.prefix(length)).withUnsafeBytes {
                    try StoredRowState.decode($0, columns: heldNames, replicas: ids) { _ in .null }
                }
            }
        }
        await propertyCheck(count: 500, input: Gen.int(in: 0...Int.max).array(of: 1...8)) { edits in
            var bytes = heldBytes
            for edit in edits { bytes[1 + edit % (bytes.count - 1)] = UInt8(truncatingIfNeeded: edit >> 20) }
            _ = try? bytes.withUnsafeBytes {
                try StoredRowState.decode($0, columns: heldNames, replicas: ids) { _ in .null }
            }
        }
        await propertyCheck(count: 500, input: Gen.int(in: 0...Int.max).array(of: 1...8)) { edits in
            var bytes = stored
            for edit in edits { bytes[1 + edit % (bytes.count - 1)] = UInt8(truncatingIfNeeded: edit >> 20) }
            _ = try? bytes.withUnsafeBytes { try StoredRowState.decode($0, columns: names, replicas: ids) }
        }
        // A column or replica number the numbering does not hold.
        #expect(throws: StoreError.self) {
            try stored.withUnsafeBytes { try StoredRowState.decode($0, columns: [:], replicas: ids) }
        }
        #expect(throws: StoreError.self) {
            try stored.withUnsafeBytes { try StoredRowState.decode($0, columns: names, replicas: [:]) }
        }
    }
}
