/// The leaves of replicas' chains (`ChainHead`): one 32-byte hash per change, defined so that a
/// receiver can rebuild it even for a change that was superseded before it was sent, and can
/// check that what was left out really lost (docs/signed-changes.md, "Leaves").
///
/// A store prunes superseded changes (an overwritten preference, an app-table cell that lost), yet
/// their leaves must keep travelling so that ranges through them verify. A bare leaf would let a
/// relay pass a live change off as superseded, which is the suppression hole again. So a leaf
/// hashes in the clear what the "it lost" check needs — the key, the stamp, the column — and
/// only a hash of the rest.
package enum ChangeLeaf {
    /// An entry's leaf is its element hash, which the receiver computes for the digest anyway.
    /// Its canonical bytes start with `E`; the other leaves' inputs start with `lansync/`.
    package static func entry(_ entry: Entry, hasher: ElementHasher) -> [UInt8] { hasher.hash(entry) }

    /// A preference write's leaf: `H("lansync/v1/leaf/pref" ‖ field(key) ‖ stamp ‖ element hash)`.
    package static func preference(_ write: PreferenceWrite, hasher: ElementHasher) -> [UInt8] {
        preference(PreferenceStub(write, hasher: hasher), hasher: hasher)
    }

    /// The leaf of the preference write a stub stands for.
    package static func preference(_ stub: PreferenceStub, hasher: ElementHasher) -> [UInt8] {
        var input = preferenceTag
        input.reserveCapacity(input.count + 4 + stub.key.utf8.count + 32 + ChainHead.hashByteCount)
        input.appendField(stub.key)
        RowState.Stamp(hlc: stub.hlc, dot: stub.dot).append(to: &input)
        input.append(contentsOf: stub.elementHash)
        return hasher.hash(input)
    }

    /// The leaf of a counter of `replica` that holds no change (a version-3 peer claimed it
    /// without rows): `H("lansync/v1/leaf/none" ‖ replica (16) ‖ counter (8, big-endian))`. A
    /// receiver takes it for every counter of a range the delta carries no change of, so a relay
    /// that leaves a change out gets another hash than the replica signed.
    package static func none(replica: ReplicaID, counter: UInt64, hasher: ElementHasher) -> [UInt8] {
        var input = noneTag
        input.appendBigEndian(replica.high)
        input.appendBigEndian(replica.low)
        input.appendBigEndian(counter)
        return hasher.hash(input)
    }

    static let noneTag = Array("lansync/v1/leaf/none".utf8)
    static let preferenceTag = Array("lansync/v1/leaf/pref".utf8)
    static let rowTag = Array("lansync/v1/leaf/row".utf8)
}

/// What stays of a preference write another write superseded: enough to rebuild its leaf and to
/// check that it lost (the write the receiver holds for `key` must win over `(hlc, dot)`).
package struct PreferenceStub: Hashable, Sendable {
    package let key: String
    package let hlc: HybridTimestamp
    package let dot: Dot
    /// The write's element hash (of its canonical bytes).
    package let elementHash: [UInt8]

    package init(key: String, hlc: HybridTimestamp, dot: Dot, elementHash: [UInt8]) {
        self.key = key
        self.hlc = hlc
        self.dot = dot
        self.elementHash = elementHash
    }

    package init(_ write: PreferenceWrite, hasher: ElementHasher) {
        self.init(key: write.key, hlc: write.hlc, dot: write.dot, elementHash: hasher.hash(write))
    }

    /// Whether `held`, the write a replica holds for this key, shows that the stubbed write lost.
    /// The preference order compares the clock, then the dot; a stub never ties with a write
    /// under its own dot, which is the write itself and so did not lose.
    package func isSuperseded(by held: PreferenceWrite?) -> Bool {
        guard let held, held.key == key, held.dot != dot else { return false }
        if held.hlc != hlc { return hlc < held.hlc }
        return dot < held.dot
    }
}

extension RowChange {
    /// Which of a change's lists a cell belongs to.
    package enum CellKind: UInt8, Hashable, Sendable {
        case value = 1
        case total = 2
    }

    /// A cell of a change that lost at the replica sending it: its column and its stand-in
    /// (`standIn(for:)`) instead of its value, so that the receiver can rebuild the change's leaf.
    package struct LostCell: Hashable, Sendable {
        package let kind: CellKind
        package let column: String
        package let standIn: [UInt8]

        package init(kind: CellKind, column: String, standIn: [UInt8]) {
            self.kind = kind
            self.column = column
            self.standIn = standIn
        }
    }

    /// What a value stands as in a leaf: its canonical bytes when shorter than 32, else their
    /// hash (32 bytes, so the two never share a length). Most cells are short (numbers, names),
    /// so a row's leaf costs one hash of its cells rather than one hash per cell.
    package static func standIn(for value: SQLValue, hasher: ElementHasher) -> [UInt8] {
        var field = [UInt8]()
        appendStandIn(for: value, to: &field, hasher: hasher)
        return Array(field.dropFirst(4))
    }

    /// A counter total stands as itself: 8 bytes, big-endian.
    package static func standIn(for total: Int64) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.appendBigEndian(UInt64(bitPattern: total))
        return bytes
    }

    /// The lost form of one of this change's cells.
    package static func lost(_ value: Value, hasher: ElementHasher) -> LostCell {
        LostCell(kind: .value, column: value.column, standIn: standIn(for: value.value, hasher: hasher))
    }

    package static func lost(_ total: Total) -> LostCell {
        LostCell(kind: .total, column: total.column, standIn: standIn(for: total.total))
    }

    /// This change's leaf, when `lost` are the cells the sender left out of it (none for a change
    /// as it was written):
    ///
    ///     H("lansync/v1/leaf/row" ‖ RowKey canonical bytes ‖ kind u8 ‖ causal length u64 ‖ stamp
    ///       ‖ u32 n ‖ n × (field(column) ‖ field(value's stand-in))
    ///       ‖ u32 m ‖ m × (field(column) ‖ field(total's stand-in)))
    ///
    /// each list in column order, the lost cells in their places. The column names are in the
    /// clear so that a relay cannot send a live cell's stand-in under the name of a column that
    /// did lose. Nil when `lost` names a column twice or one the change carries, or holds a
    /// stand-in no cell has: no change was written so, and the delta is refused.
    ///
    /// Every change made or received is hashed so, so the input is written in one pass into one
    /// buffer: the cells and the lost ones are walked in column order side by side.
    package func leaf(lost: [LostCell] = [], hasher: ElementHasher) -> [UInt8]? {
        var buffer = [UInt8]()
        return leaf(lost: lost, hasher: hasher, reusing: &buffer)
    }

    /// The same, with the input built in `buffer` (cleared first): a store hashing every change
    /// it writes reuses one buffer instead of allocating one per change. `keyBytes`: the key's
    /// bytes (`SQLValue.keyBytes`), when the caller has them already.
    package func leaf(
        lost: [LostCell],
        hasher: ElementHasher,
        reusing input: inout [UInt8],
        keyBytes: [UInt8]? = nil
    ) -> [UInt8]? {
        var lostValues: [LostCell] = []
        var lostTotals: [LostCell] = []
        if !lost.isEmpty {
            lostValues = lost.filter { $0.kind == .value }.sorted { $0.column < $1.column }
            lostTotals = lost.filter { $0.kind == .total }.sorted { $0.column < $1.column }
        }
        input.removeAll(keepingCapacity: true)
        input.append(contentsOf: ChangeLeaf.rowTag)
        input.reserveCapacity(input.count + 96 + (values.count + totals.count) * 40 + lost.count * 48)
        input.appendField(key.table)
        if let keyBytes {
            input.append(contentsOf: keyBytes)
        } else {
            input.append(contentsOf: SQLValue.keyBytes(key.primaryKey))
        }
        input.append(kind.rawValue)
        input.appendBigEndian(causalLength)
        stamp.append(to: &input)
        if lost.isEmpty {
            // The common case (a change as it was written), without the merge of lost cells:
            // the same bytes as `appendList` writes then.
            input.appendBigEndian(UInt32(values.count))
            for value in values {
                input.appendField(value.column)
                Self.appendStandIn(for: value.value, to: &input, hasher: hasher)
            }
            input.appendBigEndian(UInt32(totals.count))
            for total in totals {
                input.appendField(total.column)
                input.appendBigEndian(UInt32(8))
                input.appendBigEndian(UInt64(bitPattern: total.total))
            }
            return hasher.hash(input)
        }
        let complete =
            Self.appendList(values, named: \.column, lost: lostValues, maxStandIn: ChainHead.hashByteCount, to: &input)
        {
            Self.appendStandIn(for: $0.value, to: &$1, hasher: hasher)
        }
            && Self.appendList(totals, named: \.column, lost: lostTotals, maxStandIn: 8, to: &input) {
                $1.appendBigEndian(UInt32(8))
                $1.appendBigEndian(UInt64(bitPattern: $0.total))
            }
        guard complete else { return nil }
        return hasher.hash(input)
    }

    /// Appends one of a leaf's lists: its count, then `cells` and the `lost` ones (sorted by
    /// column) in column order, each as field(column) · field(stand-in). False when a lost cell
    /// repeats a column or is malformed.
    private static func appendList<Cell>(
        _ cells: [Cell],
        named column: (Cell) -> String,
        lost: [LostCell],
        maxStandIn: Int,
        to input: inout [UInt8],
        standIn: (Cell, inout [UInt8]) -> Void
    ) -> Bool {
        input.appendBigEndian(UInt32(cells.count + lost.count))
        var next = 0
        var previous: String?
        for cell in cells {
            let name = column(cell)
            while next < lost.count, lost[next].column <= name {
                guard lost[next].column != name,
                    append(lost[next], after: &previous, to: &input, maxStandIn: maxStandIn)
                else { return false }
                next += 1
            }
            previous = name
            input.appendField(name)
            standIn(cell, &input)
        }
        while next < lost.count {
            guard append(lost[next], after: &previous, to: &input, maxStandIn: maxStandIn) else { return false }
            next += 1
        }
        return true
    }

    /// Appends a lost cell to a leaf's input; false when it repeats the column before it, or its
    /// stand-in is longer than its kind's (32 bytes for a value; exactly 8 for a total).
    private static func append(
        _ cell: LostCell,
        after previous: inout String?,
        to input: inout [UInt8],
        maxStandIn: Int
    ) -> Bool {
        guard cell.column != previous, cell.standIn.count <= maxStandIn, cell.kind == .value || cell.standIn.count == 8
        else { return false }
        previous = cell.column
        input.appendField(cell.column)
        input.appendBigEndian(UInt32(cell.standIn.count))
        input.append(contentsOf: cell.standIn)
        return true
    }

    /// Appends `field(stand-in)` of a value (`standIn(for:)`) without building the stand-in apart:
    /// the value's canonical bytes are written in place and replaced by their hash when 32 bytes
    /// or longer.
    private static func appendStandIn(for value: SQLValue, to input: inout [UInt8], hasher: ElementHasher) {
        let lengthAt = input.count
        input.appendBigEndian(UInt32(0))
        value.append(to: &input)
        var length = input.count - lengthAt - 4
        if length >= ChainHead.hashByteCount {
            let hash = hasher.hash(Array(input[(lengthAt + 4)...]))
            input.removeSubrange((lengthAt + 4)...)
            input.append(contentsOf: hash)
            length = hash.count
        }
        withUnsafeBytes(of: UInt32(length).bigEndian) { bytes in
            for index in 0..<4 { input[lengthAt + index] = bytes[index] }
        }
    }

    /// This change without the cells named: what a sender ships of it once they lost.
    package func without(_ lost: [LostCell]) -> RowChange {
        guard !lost.isEmpty else { return self }
        let lostValues = Set(lost.filter { $0.kind == .value }.map(\.column))
        let lostTotals = Set(lost.filter { $0.kind == .total }.map(\.column))
        return RowChange(
            key: key,
            kind: kind,
            causalLength: causalLength,
            hlc: hlc,
            dot: dot,
            values: values.filter { !lostValues.contains($0.column) },
            totals: totals.filter { !lostTotals.contains($0.column) }
        )
    }
}

extension RowState {
    /// The cells of `change` and of `held` (the state before merging it) that lost in `self`, the
    /// state after: each with the dot of the change it belongs to. What a store keeps so that it
    /// can still send those changes' leaves. Cells of an earlier life all lost once a later life
    /// began.
    package func losses(
        of change: RowChange,
        before held: RowState,
        hasher: ElementHasher
    ) -> [(dot: Dot, cell: RowChange.LostCell)] {
        var losses: [(dot: Dot, cell: RowChange.LostCell)] = []
        // The held cells this merge displaced.
        for cell in held.columns where !columns.contains(cell) {
            let lost = RowChange.LostCell(
                kind: .value,
                column: cell.name,
                standIn: RowChange.standIn(for: cell.value, hasher: hasher)
            )
            losses.append((cell.stamp.dot, lost))
        }
        for counter in held.counters {
            let kept = counters.first { $0.name == counter.name }?.cells ?? []
            for cell in counter.cells where !kept.contains(cell) {
                let lost = RowChange.LostCell(
                    kind: .total,
                    column: counter.name,
                    standIn: RowChange.standIn(for: cell.total)
                )
                losses.append((cell.stamp.dot, lost))
            }
        }
        // The change's own cells that did not win.
        let stamp = change.stamp
        for value in change.values where !columns.contains(Cell(name: value.column, stamp: stamp, value: value.value)) {
            losses.append((change.dot, RowChange.lost(value, hasher: hasher)))
        }
        if change.kind != .append {
            for total in change.totals {
                let cell = CounterCell(stamp: stamp, total: total.total)
                if counters.first(where: { $0.name == total.column })?.cells.contains(cell) != true {
                    losses.append((change.dot, RowChange.lost(total)))
                }
            }
        }
        return losses
    }

    /// Whether this state shows that `cell` of a change with `stamp` in life `causalLength` (of
    /// kind `kind`) lost: the row is in a later life, or the column holds a later write (for a
    /// total: a later total of the same replica), or, for an append, another append holds the
    /// key or the row is in a later life (a cascade deleted it). A receiver checks every cell a
    /// sender left out, after merging the delta.
    package func hasSuperseded(
        _ cell: RowChange.LostCell,
        ofChangeAt stamp: Stamp,
        life: UInt64,
        kind: RowChange.Kind
    ) -> Bool {
        if kind == .append { return causalLength > 1 || (isAppended && marker?.stamp != stamp) }
        if causalLength != life { return causalLength > life }
        switch cell.kind {
        case .value:
            guard let held = columns.first(where: { $0.name == cell.column }) else { return false }
            return stamp < held.stamp
        case .total:
            guard
                let held = counters.first(where: { $0.name == cell.column })?.cells.first(where: {
                    $0.stamp.dot.replica == stamp.dot.replica
                })
            else { return false }
            return stamp.dot.counter < held.stamp.dot.counter
        }
    }
}

extension RowState {
    /// Whether this state shows `cell` of the change with `stamp` in life `causalLength` as live:
    /// the column (or the replica's total, or the append marker) holds that very change.
    package func shows(_ cell: RowChange.LostCell, ofChangeAt stamp: Stamp, life: UInt64, kind: RowChange.Kind) -> Bool
    {
        // An append shows a cell only with its value: a copy of the append that lost its cells
        // at the sender sets the marker without them.
        if kind == .append { guard isAppended, marker?.stamp == stamp else { return false } }
        guard causalLength == life else { return false }
        switch cell.kind {
        case .value: return columns.first(where: { $0.name == cell.column })?.stamp == stamp
        case .total:
            return counters.first(where: { $0.name == cell.column })?.cells.contains(where: { $0.stamp == stamp })
                ?? false
        }
    }
}

/// What a store keeps of an app-table change that its row's state no longer shows whole (some of
/// its cells lost, or its kind is no longer its row's marker): the header the leaf needs and the
/// cells that lost. The change's key and dot are kept beside it.
package struct RowChangeStub: Hashable, Sendable {
    package let kind: RowChange.Kind
    package let causalLength: UInt64
    package let hlc: HybridTimestamp
    /// Sorted by kind, then column; each once.
    package private(set) var lost: [RowChange.LostCell]

    package init(kind: RowChange.Kind, causalLength: UInt64, hlc: HybridTimestamp, lost: [RowChange.LostCell] = []) {
        self.kind = kind
        self.causalLength = causalLength
        self.hlc = hlc
        self.lost = []
        add(lost)
    }

    /// The stub of `change` as written, before anything of it lost.
    package init(of change: RowChange, lost: [RowChange.LostCell] = []) {
        self.init(kind: change.kind, causalLength: change.causalLength, hlc: change.hlc, lost: lost)
    }

    /// The stub of `change`, with every cell of it lost when `allLost` (a change superseded on
    /// arrival).
    package init(of change: RowChange, allLost: Bool, hasher: ElementHasher) {
        self.init(of: change)
        guard allLost else { return }
        add(change.values.map { RowChange.lost($0, hasher: hasher) })
        if change.kind != .append { add(change.totals.map { RowChange.lost($0) }) }
    }

    /// Forgets the lost cells that `shown`, the change as its row now shows it, carries.
    package mutating func remove(_ shown: RowChange) {
        lost.removeAll { cell in
            switch cell.kind {
            case .value: shown.values.contains { $0.column == cell.column }
            case .total: shown.totals.contains { $0.column == cell.column }
            }
        }
    }

    /// Adds cells that lost; a cell known already is kept once. Returns whether any was new.
    @discardableResult
    package mutating func add(_ cells: some Sequence<RowChange.LostCell>) -> Bool {
        var added = false
        for cell in cells where !lost.contains(where: { $0.kind == cell.kind && $0.column == cell.column }) {
            lost.append(cell)
            added = true
        }
        if added { lost.sort { ($0.kind.rawValue, $0.column) < ($1.kind.rawValue, $1.column) } }
        return added
    }

    /// The change as a sender ships it: this header, the cells of it that still win in `state`
    /// (its row's state), and the lost ones beside it.
    package func change(key: RowKey, dot: Dot, in state: RowState) -> RowChange {
        let live = state.causalLength == causalLength ? state.change(key: key, dot: dot) : nil
        return RowChange(
            key: key,
            kind: kind,
            causalLength: causalLength,
            hlc: hlc,
            dot: dot,
            values: live?.values ?? [],
            totals: kind == .append ? [] : live?.totals ?? []
        )
    }

    /// kind u8 · causal length u64 · HLC u64 · lost cell count u32 · (cell kind u8 · field(column)
    /// · field(stand-in))…
    package var canonicalBytes: [UInt8] {
        var out = [UInt8]()
        out.append(kind.rawValue)
        out.appendBigEndian(causalLength)
        out.appendBigEndian(hlc.rawValue)
        out.appendBigEndian(UInt32(lost.count))
        for cell in lost {
            out.append(cell.kind.rawValue)
            out.appendField(cell.column)
            out.appendBigEndian(UInt32(cell.standIn.count))
            out.append(contentsOf: cell.standIn)
        }
        return out
    }

    /// Reads what `canonicalBytes` wrote; throws on anything else.
    package init(canonicalBytes bytes: [UInt8]) throws(SQLValueDecodingError) {
        var reader = CanonicalReader(bytes: bytes)
        guard let kind = RowChange.Kind(rawValue: try reader.byte()) else {
            throw SQLValueDecodingError("unknown change kind")
        }
        let causalLength = try reader.uint64()
        let hlc = HybridTimestamp(rawValue: try reader.uint64())
        let count = Int(try reader.uint32())
        guard count <= bytes.count / 10 else { throw SQLValueDecodingError("\(count) lost cells cannot fit") }
        var lost = [RowChange.LostCell]()
        for _ in 0..<count {
            guard let cellKind = RowChange.CellKind(rawValue: try reader.byte()) else {
                throw SQLValueDecodingError("unknown cell kind")
            }
            let column = try reader.text()
            let length = Int(try reader.uint32())
            guard length <= ChainHead.hashByteCount else {
                throw SQLValueDecodingError("a stand-in of \(length) bytes")
            }
            lost.append(RowChange.LostCell(kind: cellKind, column: column, standIn: Array(try reader.take(length))))
        }
        guard reader.isAtEnd else { throw SQLValueDecodingError("bytes after the stub") }
        self.init(kind: kind, causalLength: causalLength, hlc: hlc, lost: lost)
        guard self.lost.count == count else { throw SQLValueDecodingError("a lost cell named twice") }
    }
}
