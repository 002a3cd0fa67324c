/// One write to one row of an app table, as it travels between replicas: the columns one SQL
/// statement set on that row, under one dot and one clock reading. It keeps its origin (the dot)
/// like entries and preference writes do, and its life of the row.
///
/// Every change belongs to one *life* of its row, numbered by the row's causal length (as in
/// cr-sqlite): 1 for the first insert, 2 once deleted, 3 once inserted again, and so on — odd
/// means the row exists, even that it is deleted. A replica only writes the life it holds, or
/// opens the next one (a delete of a live row, an insert of an absent or deleted one), so
/// "causally after" needs no vector clock: a later life always wins over an earlier one, and
/// within one life each column is a last-writer-wins register.
package struct RowChange: Hashable, Sendable {
    package enum Kind: UInt8, Hashable, Sendable {
        /// Opens an odd life: the row exists, with the columns it sets.
        case insert = 1
        /// Sets columns of the row in the life it is in.
        case update = 2
        /// Opens an even life: the row is deleted.
        case delete = 3
        /// A whole row of an append-only table, life 1: a set by key where the earliest write wins;
        /// only a delete (the cascade of a deleted parent) ends it, for good.
        case append = 4
    }

    /// A column this change sets. Names are lowercase (SQL names are case-insensitive).
    package struct Value: Hashable, Sendable {
        package let column: String
        package let value: SQLValue
        package init(column: String, value: SQLValue) {
            self.column = column
            self.value = value
        }
    }

    /// A counter column: the writing replica's own running total of increments in this life. The
    /// column's value is the sum of every replica's latest total.
    package struct Total: Hashable, Sendable {
        package let column: String
        package let total: Int64
        package init(column: String, total: Int64) {
            self.column = column
            self.total = total
        }
    }

    package let key: RowKey
    package let kind: Kind
    /// The row's life this change belongs to (see above); at least 1.
    package let causalLength: UInt64
    package let hlc: HybridTimestamp
    package let dot: Dot
    /// Columns set, sorted by name, each once.
    package let values: [Value]
    /// Counter totals, sorted by column, each once.
    package let totals: [Total]

    package init(
        key: RowKey,
        kind: Kind,
        causalLength: UInt64,
        hlc: HybridTimestamp,
        dot: Dot,
        values: [Value] = [],
        totals: [Total] = []
    ) {
        self.key = key
        self.kind = kind
        self.causalLength = causalLength
        self.hlc = hlc
        self.dot = dot
        // Most callers pass them sorted already (the store, the wire); checking is cheaper than sorting.
        self.values = Self.isSorted(values.lazy.map(\.column)) ? values : values.sorted { $0.column < $1.column }
        self.totals = Self.isSorted(totals.lazy.map(\.column)) ? totals : totals.sorted { $0.column < $1.column }
    }

    private static func isSorted(_ names: some Collection<String>) -> Bool {
        var previous: String?
        for name in names {
            if let previous, !(previous < name) { return false }
            previous = name
        }
        return true
    }

    package var stamp: RowState.Stamp { .init(hlc: hlc, dot: dot) }

    /// Why no replica may hold this change, or nil: a life that does not match the kind, column
    /// names twice or empty, a key out of range.
    package func problem() -> String? {
        guard causalLength >= 1 else { return "change \(dot) of \(key) has causal length 0" }
        switch kind {
        case .insert, .update:
            guard causalLength % 2 == 1 else {
                return "change \(dot) of \(key) writes a deleted life (\(causalLength))"
            }
        case .delete:
            guard causalLength % 2 == 0, values.isEmpty, totals.isEmpty else {
                return "delete \(dot) of \(key) must open an even life and set no columns"
            }
        case .append:
            guard causalLength == 1, totals.isEmpty else {
                return "append \(dot) of \(key) must be life 1 without counters"
            }
        }
        if let problem = key.problem() { return problem }
        guard values.count <= Self.maxColumns, totals.count <= Self.maxColumns else {
            return "change \(dot) of \(key) sets too many columns"
        }
        let size = values.reduce(0) { $0 + $1.value.byteCount }
        guard size <= Self.maxValueBytes else {
            return "change \(dot) of \(key) holds \(size) bytes of values (at most \(Self.maxValueBytes))"
        }
        for (index, value) in values.enumerated() {
            if let problem = Self.columnProblem(value.column) { return "change \(dot) of \(key): \(problem)" }
            if index > 0, values[index - 1].column >= value.column {
                return "change \(dot) of \(key) sets a column twice"
            }
        }
        for (index, total) in totals.enumerated() {
            if let problem = Self.columnProblem(total.column) { return "change \(dot) of \(key): \(problem)" }
            if index > 0, totals[index - 1].column >= total.column {
                return "change \(dot) of \(key) counts a column twice"
            }
        }
        return nil
    }

    /// The most bytes of values one change carries (TEXT and BLOB lengths, 8 per number), so
    /// that a change always fits in one wire message.
    package static let maxValueBytes = 1 << 20

    /// Whether `name` equals its lowercase form; checked for every column of every change a peer
    /// sends, so ASCII names (nearly all) are checked byte by byte instead of by building a string.
    static func isLowercase(_ name: String) -> Bool {
        var ascii = true
        for byte in name.utf8 {
            if byte >= 0x80 {
                ascii = false
                break
            }
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { return false }
        }
        return ascii || name == name.lowercased()
    }

    /// The longest table or column name a replica accepts.
    package static let maxNameLength = 128
    /// At most this many columns in one change.
    package static let maxColumns = 2000

    static func columnProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= maxNameLength, isLowercase(name) else {
            return "column name \"\(name)\" must be 1-\(maxNameLength) bytes, lowercase"
        }
        return nil
    }
}

extension RowKey {
    /// Why no replica may hold a row under this key, or nil.
    package func problem() -> String? {
        guard !table.isEmpty, table.utf8.count <= RowChange.maxNameLength, RowChange.isLowercase(table) else {
            return "table name \"\(table)\" must be 1-\(RowChange.maxNameLength) bytes, lowercase"
        }
        guard (1...SQLValue.maxKeyColumns).contains(primaryKey.count) else {
            return "a key of \(table) has \(primaryKey.count) columns (1-\(SQLValue.maxKeyColumns))"
        }
        return nil
    }
}

/// What a replica holds of one row: the merge of every change it has seen, in any order, any
/// number of times (a join: commutative, associative, idempotent).
///
/// Only the latest life counts; an older life's writes are dropped when a newer life arrives (so
/// a delete beats concurrent edits, and a re-insert brings the row back with the columns it
/// wrote, the others at their defaults). Within a life each column keeps its latest write, each
/// counter column each replica's latest total, and the life's insert or delete its latest one.
///
/// Columns and counters are arrays sorted by name (and counter cells by replica), not
/// dictionaries: a row has a handful of columns, every write decodes, merges and re-encodes its
/// row, and the canonical bytes list them in this order anyway.
package struct RowState: Hashable, Sendable {
    /// When a write happened, in last-writer-wins order: the clock, then the replica ID, then the
    /// counter. Two writes of honest replicas never share a stamp.
    package struct Stamp: Hashable, Sendable, Comparable {
        package let hlc: HybridTimestamp
        package let dot: Dot

        package init(hlc: HybridTimestamp, dot: Dot) {
            self.hlc = hlc
            self.dot = dot
        }

        package static func < (a: Stamp, b: Stamp) -> Bool {
            if a.hlc != b.hlc { return a.hlc < b.hlc }
            if a.dot.replica != b.dot.replica { return a.dot.replica < b.dot.replica }
            return a.dot.counter < b.dot.counter
        }
    }

    /// A column's winning write.
    package struct Cell: Hashable, Sendable {
        package let name: String
        package let stamp: Stamp
        package let value: SQLValue

        package init(name: String, stamp: Stamp, value: SQLValue) {
            self.name = name
            self.stamp = stamp
            self.value = value
        }
    }

    /// One replica's latest total of a counter column.
    package struct CounterCell: Hashable, Sendable {
        package let stamp: Stamp
        package let total: Int64

        package init(stamp: Stamp, total: Int64) {
            self.stamp = stamp
            self.total = total
        }
    }

    /// A counter column: each replica's latest total, sorted by replica.
    package struct Counter: Hashable, Sendable {
        package let name: String
        package var cells: [CounterCell]

        package init(name: String, cells: [CounterCell]) {
            self.name = name
            self.cells = cells
        }

        /// The column's value: the sum of the totals. Sums wrap, as totals are bounded by what the
        /// store accepts (a total that would overflow is refused).
        package var sum: Int64 { cells.reduce(0) { $0 &+ $1.total } }

        /// The column's value when it merges by maximum (`-- lansync: max`): the greatest total,
        /// each replica's total being the greatest value it ever wrote there.
        package var maximum: Int64 { cells.map(\.total).max() ?? 0 }

        /// The column's value when it merges by minimum (`-- lansync: min`): the smallest total.
        package var minimum: Int64 { cells.map(\.total).min() ?? 0 }
    }

    /// The latest life seen; 0 when nothing is known of the row.
    package private(set) var causalLength: UInt64 = 0
    private var markerKind: RowChange.Kind?
    private var markerStamp: Stamp?
    /// The winning write of each column written in this life, sorted by name.
    package private(set) var columns: [Cell] = []
    /// Each counter column's totals in this life, sorted by name.
    package private(set) var counters: [Counter] = []

    package init() {}

    /// A state restored from its parts (the store's encoding): columns and counters sorted by
    /// name, each once, counter cells sorted by replica.
    package init(
        causalLength: UInt64,
        marker: (kind: RowChange.Kind, stamp: Stamp)?,
        columns: [Cell],
        counters: [Counter]
    ) {
        self.causalLength = causalLength
        markerKind = marker?.kind
        markerStamp = marker?.stamp
        self.columns = columns
        self.counters = counters
    }

    /// The latest insert or delete of this life (or the winning append), and its kind.
    package var marker: (kind: RowChange.Kind, stamp: Stamp)? { markerKind.map { ($0, markerStamp!) } }

    /// Whether the row exists (its latest life is odd).
    package var exists: Bool { causalLength % 2 == 1 }
    /// Whether the row is a row of an append-only table.
    package var isAppended: Bool { markerKind == .append }

    private func columnIndex(_ name: String) -> (found: Bool, index: Int) {
        Self.search(columns, for: name, by: \.name)
    }
    private func counterIndex(_ name: String) -> (found: Bool, index: Int) {
        Self.search(counters, for: name, by: \.name)
    }

    /// Where `name` is, or would go, in `items` sorted by name.
    private static func search<Item>(
        _ items: [Item],
        for name: String,
        by itemName: (Item) -> String
    ) -> (found: Bool, index: Int) {
        var low = 0
        var high = items.count
        while low < high {
            let middle = (low + high) / 2
            if itemName(items[middle]) < name { low = middle + 1 } else { high = middle }
        }
        return (low < items.count && itemName(items[low]) == name, low)
    }

    /// Merges one change (checked with `RowChange.problem()`); returns whether the state changed.
    @discardableResult
    package mutating func merge(_ change: RowChange) -> Bool {
        let stamp = change.stamp
        // A later life wins whatever it holds: a delete (a parent's cascade) ends an appended row too.
        if change.causalLength < causalLength { return false }
        if change.kind == .append {
            // An append is life 1, and wins it whole over any other kind: the earliest append
            // wins, so every replica keeps the same row under a key.
            if let held = markerStamp, markerKind == .append {
                if held < stamp { return false }
                // The same append again, maybe as a copy whose cells lost at its sender (a relay
                // that holds the row deleted sends it without them): it takes no cell away.
                if held == stamp { return mergeCells(change.values, stamp: stamp) }
            }
            causalLength = 1
            markerKind = .append
            markerStamp = stamp
            columns = change.values.map { Cell(name: $0.column, stamp: stamp, value: $0.value) }
            counters = []
            return true
        }
        if markerKind == .append, change.causalLength == causalLength { return false }
        var changed = false
        if change.causalLength > causalLength {
            causalLength = change.causalLength
            markerKind = nil
            markerStamp = nil
            columns.removeAll(keepingCapacity: true)
            counters.removeAll()
            changed = true
        }
        if change.kind == .insert || change.kind == .delete, markerStamp.map({ $0 < stamp }) ?? true {
            markerKind = change.kind
            markerStamp = stamp
            changed = true
        }
        if mergeCells(change.values, stamp: stamp) { changed = true }
        for total in change.totals {
            let cell = CounterCell(stamp: stamp, total: total.total)
            let (found, index) = counterIndex(total.column)
            guard found else {
                counters.insert(Counter(name: total.column, cells: [cell]), at: index)
                changed = true
                continue
            }
            let replica = change.dot.replica
            if let position = counters[index].cells.firstIndex(where: { $0.stamp.dot.replica == replica }) {
                let held = counters[index].cells[position]
                guard
                    held.stamp.dot.counter < change.dot.counter
                        || (held.stamp.dot.counter == change.dot.counter && held.total < total.total)
                else { continue }
                counters[index].cells[position] = cell
            } else {
                let position =
                    counters[index].cells.firstIndex { replica < $0.stamp.dot.replica } ?? counters[index].cells.count
                counters[index].cells.insert(cell, at: position)
            }
            changed = true
        }
        return changed
    }

    /// Merges the values of one change with `stamp` into the columns: each wins its column when
    /// its stamp is greater (an equal stamp: the greater value). Returns whether a column changed.
    private mutating func mergeCells(_ values: [RowChange.Value], stamp: Stamp) -> Bool {
        if columns.isEmpty {
            // A first write of this life: its values, already sorted by name, are the columns.
            columns.reserveCapacity(values.count)
            for value in values { columns.append(Cell(name: value.column, stamp: stamp, value: value.value)) }
            return !values.isEmpty
        }
        var changed = false
        for value in values {
            let (found, index) = columnIndex(value.column)
            if !found {
                columns.insert(Cell(name: value.column, stamp: stamp, value: value.value), at: index)
                changed = true
                continue
            }
            let held = columns[index]
            guard held.stamp < stamp || (held.stamp == stamp && held.value < value.value) else { continue }
            columns[index] = Cell(name: value.column, stamp: stamp, value: value.value)
            changed = true
        }
        return changed
    }

    /// The value of a column in the latest life; nil when no write of that life set it (the
    /// column then takes its default). A counter column's value is its sum.
    package func value(of column: String) -> SQLValue? {
        let counter = counterIndex(column)
        if counter.found { return .integer(counters[counter.index].sum) }
        let cell = columnIndex(column)
        return cell.found ? columns[cell.index].value : nil
    }

    /// A counter column's value: the sum of every replica's latest total in the latest life.
    package func counter(_ column: String) -> Int64 {
        let counter = counterIndex(column)
        return counter.found ? counters[counter.index].sum : 0
    }

    /// This replica's own total of a counter column in the latest life (what its next increment adds to).
    package func total(of column: String, by replica: ReplicaID) -> Int64 { ownTotal(of: column, by: replica) ?? 0 }

    /// This replica's own total of a totals column in the latest life; nil when it wrote none.
    package func ownTotal(of column: String, by replica: ReplicaID) -> Int64? {
        let counter = counterIndex(column)
        guard counter.found else { return nil }
        return counters[counter.index].cells.first { $0.stamp.dot.replica == replica }?.total
    }

    /// Whether this life has a value for `column` (written, or counted).
    package func hasValue(_ column: String) -> Bool { columnIndex(column).found || counterIndex(column).found }

    /// Every column with a value in this life (counters summed), by lowercase name.
    package var values: [String: SQLValue] {
        var values = [String: SQLValue](minimumCapacity: columns.count + counters.count)
        for cell in columns { values[cell.name] = cell.value }
        for counter in counters { values[counter.name] = .integer(counter.sum) }
        return values
    }

    /// Every stamp that wins somewhere in this state, each once, ascending.
    package var stamps: [Stamp] {
        var stamps = [Stamp]()
        stamps.reserveCapacity(4)
        if let markerStamp { stamps.append(markerStamp) }
        for cell in columns where !stamps.contains(cell.stamp) { stamps.append(cell.stamp) }
        for counter in counters {
            for cell in counter.cells where !stamps.contains(cell.stamp) { stamps.append(cell.stamp) }
        }
        stamps.sort()
        return stamps
    }

    /// `liveDots` as a small array, each dot once: what the store compares on every write.
    package var liveDotList: [Dot] { stamps.map(\.dot) }

    /// The dots this state still needs: every write that wins somewhere in it.
    package var liveDots: Set<Dot> { Set(liveDotList) }

    /// The changes that rebuild this state from nothing: one per live write, carrying only what
    /// still wins of it. What a replica ships for this row; a replica that merges them all holds
    /// an equal state.
    package func changes(key: RowKey) -> [RowChange] {
        stamps.map { change(key: key, stamp: $0) }.sorted { $0.dot < $1.dot }
    }

    /// The change this state holds under `dot`, as `changes(key:)` would ship it; nil when none.
    package func change(key: RowKey, dot: Dot) -> RowChange? {
        guard let stamp = stamps.first(where: { $0.dot == dot }) else { return nil }
        return change(key: key, stamp: stamp)
    }

    private func change(key: RowKey, stamp: Stamp) -> RowChange {
        let values = columns.filter { $0.stamp == stamp }.map { RowChange.Value(column: $0.name, value: $0.value) }
        var totals = [RowChange.Total]()
        for counter in counters {
            if let cell = counter.cells.first(where: { $0.stamp == stamp }) {
                totals.append(.init(column: counter.name, total: cell.total))
            }
        }
        let kind = stamp == markerStamp ? markerKind! : .update
        return RowChange(
            key: key,
            kind: kind,
            causalLength: causalLength,
            hlc: stamp.hlc,
            dot: stamp.dot,
            values: values,
            totals: totals
        )
    }
}
