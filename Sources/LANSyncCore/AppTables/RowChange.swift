/// One change to one row of an app table, as it travels between replicas: it keeps its origin
/// (the dot of the write that made it) and its clock, like entries and preference writes do.
///
/// Every change belongs to one *life* of its row, numbered by the row's causal length (as in
/// cr-sqlite): 1 for the first insert, 2 once deleted, 3 once inserted again, and so on — odd
/// means the row exists, even that it is deleted. A replica only makes a change for the life it
/// holds, or opens the next life (a delete of a live row, an insert of an absent or deleted one),
/// so "causally after" needs no vector clock: a later life always wins over an earlier one, and
/// within one life each column is a last-writer-wins register.
package struct RowChange: Hashable, Sendable {
    package enum Kind: Hashable, Sendable {
        /// The row exists in this life (written by every insert, so a row without other columns
        /// exists too).
        case insert
        /// The row is deleted: the life this change opens is even.
        case delete
        /// A column's value in this life, last writer wins.
        case set(column: String, value: SQLValue)
        /// A counter column: the writing replica's own running total of increments in this life.
        /// The column's value is the sum of every replica's latest total.
        case counter(column: String, total: Int64)
        /// A whole row of an append-only table (column → value): a grow-only set by key.
        case append([String: SQLValue])
    }

    package let key: RowKey
    package let kind: Kind
    /// The row's life this change belongs to (see above); at least 1.
    package let causalLength: UInt64
    package let hlc: HybridTimestamp
    package let dot: Dot

    package init(key: RowKey, kind: Kind, causalLength: UInt64, hlc: HybridTimestamp, dot: Dot) {
        self.key = key
        self.kind = kind
        self.causalLength = causalLength
        self.hlc = hlc
        self.dot = dot
    }

    /// Last-writer-wins order inside one life: the later clock wins, then the greater replica ID,
    /// then the greater counter; `tieBreak` settles the impossible rest (two writes with one dot).
    package static func isNewer(_ a: RowChange, than b: RowChange, tieBreak: (RowChange, RowChange) -> Bool) -> Bool {
        if a.hlc != b.hlc { return a.hlc > b.hlc }
        if a.dot.replica != b.dot.replica { return a.dot.replica > b.dot.replica }
        if a.dot.counter != b.dot.counter { return a.dot.counter > b.dot.counter }
        return tieBreak(a, b)
    }
}

/// What a replica holds of one row: the merge of every change it has seen, in any order, any
/// number of times (a join: commutative, associative, idempotent).
///
/// Only the changes of the latest life count; an older life's writes are dropped when a newer
/// life arrives (so a delete beats concurrent edits, and a re-insert brings the row back with
/// the columns it wrote, the others at their defaults).
package struct RowState: Hashable, Sendable {
    /// The latest life seen; 0 when nothing is known of the row.
    package private(set) var causalLength: UInt64 = 0
    /// Per column, the winning `.set` change of the latest life.
    package private(set) var columns: [String: RowChange] = [:]
    /// Per counter column and replica, that replica's latest `.counter` change of the latest life.
    package private(set) var counters: [String: [ReplicaID: RowChange]] = [:]
    /// For an append-only row: the winning `.append` change (the earliest write, as for entries).
    package private(set) var appended: RowChange?

    package init() {}

    /// Whether the row exists (its latest life is odd).
    package var exists: Bool { causalLength % 2 == 1 }

    /// Merges one change; returns whether the state changed.
    @discardableResult
    package mutating func merge(_ change: RowChange) -> Bool {
        if change.causalLength < causalLength { return false }
        var changed = false
        if change.causalLength > causalLength {
            causalLength = change.causalLength
            columns.removeAll()
            counters.removeAll()
            changed = true
        }
        switch change.kind {
        case .insert, .delete:
            break
        case .set(let column, _):
            if let held = columns[column], !RowChange.isNewer(change, than: held, tieBreak: Self.byValue) { break }
            columns[column] = change
            changed = true
        case .counter(let column, _):
            if let held = counters[column]?[change.dot.replica],
                !(change.dot.counter > held.dot.counter || (change.dot.counter == held.dot.counter && Self.byValue(change, held)))
            {
                break
            }
            counters[column, default: [:]][change.dot.replica] = change
            changed = true
        case .append:
            // The earliest write wins, whatever life it claims (append-only rows have one life).
            if let held = appended, !RowChange.isNewer(held, than: change, tieBreak: Self.byValue) { break }
            appended = change
            changed = true
        }
        return changed
    }

    /// The value of a column in the latest life; nil when no change of that life wrote it (the
    /// column then takes its default).
    package func value(of column: String) -> SQLValue? {
        guard case .set(_, let value)? = columns[column]?.kind else { return nil }
        return value
    }

    /// A counter column's value: the sum of every replica's latest total in the latest life
    /// (wrapping, as SQLite's integers do not: the store refuses a total that would overflow).
    package func counter(_ column: String) -> Int64 {
        (counters[column] ?? [:]).values.reduce(0) { sum, change in
            guard case .counter(_, let total) = change.kind else { return sum }
            return sum &+ total
        }
    }

    /// Breaks a tie between two changes with one clock and one dot by their values.
    private static func byValue(_ a: RowChange, _ b: RowChange) -> Bool {
        switch (a.kind, b.kind) {
        case (.set(_, let x), .set(_, let y)): return y < x
        case (.counter(_, let x), .counter(_, let y)): return x > y
        case (.append(let x), .append(let y)):
            return x.sorted { $0.key < $1.key }.map(\.value).lexicographicallyPrecedes(y.sorted { $0.key < $1.key }.map(\.value))
        default: return false
        }
    }
}
