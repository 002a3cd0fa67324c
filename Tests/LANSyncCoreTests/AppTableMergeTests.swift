import LANSyncCore
import PropertyBased
import Testing

/// The merge rules of app-table rows (DESIGN.md, "App tables"), checked against a reference model:
/// replicas insert, edit random columns, delete, re-insert, increment a counter and sync with
/// each other (relaying what they heard), then every change is delivered in a random order with
/// duplicates. Every order must reach the state the rules define over the set of all changes.
@Suite struct AppTableMergeTests {
    static let keys = (0..<3).map { RowKey(table: "athletes", primaryKey: [.text("athlete-\($0)")]) }
    /// Rows of an append-only table: appended, and deleted only by a parent's cascade.
    static let appendedKeys = (0..<2).map { RowKey(table: "strokes", primaryKey: [.text("stroke-\($0)")]) }
    static let columns = ["name", "notes", "weight"]

    /// Replicas acting on their own view of the rows, as apps on several devices would.
    struct Simulation {
        struct Replica {
            let id: ReplicaID
            var counter: UInt64 = 0
            var rows: [RowKey: RowState] = [:]
            var heard: Set<RowChange> = []
        }

        var replicas: [Replica]
        var clock: UInt64 = 1_000

        init(replicaCount: Int) {
            replicas = (0..<replicaCount).map { Replica(id: ReplicaID(high: UInt64($0 + 1), low: 0xA5)) }
        }

        var allChanges: Set<RowChange> { replicas.reduce(into: Set()) { $0.formUnion($1.heard) } }

        /// One step, driven by a generated number: who acts, on which row, doing what.
        mutating func step(_ choice: Int) {
            let r = choice % replicas.count
            let all = AppTableMergeTests.keys + AppTableMergeTests.appendedKeys
            let key = all[(choice / 7) % all.count]
            // Clocks run a little apart, so concurrent writes land in either order.
            clock += UInt64(1 + (choice / 13) % 5)
            let row = replicas[r].rows[key] ?? RowState()
            if key.table == "strokes", (choice / 31) % 6 < 5 {
                // Two replicas may append one key before they hear of each other; a cascade
                // deletes what this replica holds.
                if row.causalLength == 0 {
                    let values = AppTableMergeTests.columns.enumerated().map {
                        RowChange.Value(column: $0.element, value: Self.value(choice + $0.offset))
                    }
                    emit(r, key, .append, life: 1, values: values)
                } else if row.exists, (choice / 31) % 6 == 3 {
                    emit(r, key, .delete, life: 2)
                }
                return
            }
            switch (choice / 31) % 6 {
            case 0:
                if row.exists { update(r, key, row, choice) } else { insert(r, key, row, choice) }
            case 1, 2:
                if row.exists { update(r, key, row, choice) }
            case 3:
                if row.exists { emit(r, key, .delete, life: row.causalLength + 1) }
            case 4:
                if row.exists {
                    let own = row.total(of: "xp", by: replicas[r].id)
                    emit(
                        r,
                        key,
                        .update,
                        life: row.causalLength,
                        totals: [.init(column: "xp", total: own + Int64(choice % 9) - 2)]
                    )
                }
            default:
                // Sync: replica r hears everything another replica holds (relays included), as
                // the store ships it: only the live part of each write.
                let other = (r + 1 + (choice / 211) % max(1, replicas.count - 1)) % replicas.count
                for (key, state) in replicas[other].rows {
                    for change in state.changes(key: key) { replicas[r].rows[key, default: RowState()].merge(change) }
                }
                for change in replicas[other].heard { replicas[r].heard.insert(change) }
            }
        }

        mutating func insert(_ r: Int, _ key: RowKey, _ row: RowState, _ choice: Int) {
            let values = AppTableMergeTests.columns.enumerated().filter { (choice >> $0.offset) & 1 == 1 }.map {
                RowChange.Value(column: $0.element, value: Self.value(choice + $0.offset))
            }
            emit(
                r,
                key,
                .insert,
                life: row.causalLength + 1,
                values: values,
                totals: [.init(column: "xp", total: Int64(choice % 4))]
            )
        }

        mutating func update(_ r: Int, _ key: RowKey, _ row: RowState, _ choice: Int) {
            let first = (choice / 3) % AppTableMergeTests.columns.count
            let count = 1 + (choice / 5) % 2
            let values = (0..<count).map { offset in
                RowChange.Value(
                    column: AppTableMergeTests.columns[(first + offset) % AppTableMergeTests.columns.count],
                    value: Self.value(choice + offset)
                )
            }
            emit(r, key, .update, life: row.causalLength, values: values)
        }

        static func value(_ seed: Int) -> SQLValue {
            switch seed % 5 {
            case 0: return .null
            case 1: return .integer(Int64(seed))
            case 2: return .real(seed % 2 == 0 ? -0.0 : Double(seed) / 3)
            // Some texts are one word spelled two ways ("é" as one code point or as "e" and a
            // combining accent): equal Swift strings, two values to SQLite and to the merge.
            case 3: return .text(seed % 4 == 3 ? (seed % 8 == 3 ? "caf\u{e9}" : "cafe\u{301}") : "v\(seed)")
            default: return .blob([UInt8(seed & 0xFF), 0])
            }
        }

        mutating func emit(
            _ r: Int,
            _ key: RowKey,
            _ kind: RowChange.Kind,
            life: UInt64,
            values: [RowChange.Value] = [],
            totals: [RowChange.Total] = []
        ) {
            replicas[r].counter += 1
            let change = RowChange(
                key: key,
                kind: kind,
                causalLength: life,
                hlc: HybridTimestamp(physicalMilliseconds: clock, logical: 0),
                dot: Dot(replica: replicas[r].id, counter: replicas[r].counter),
                values: values,
                totals: totals
            )
            #expect(change.problem() == nil)
            replicas[r].heard.insert(change)
            replicas[r].rows[key, default: RowState()].merge(change)
        }
    }

    /// The rules, stated over the set of all changes rather than applied one by one.
    struct ReferenceRow: Equatable {
        var exists = false
        var values: [String: SQLValue] = [:]
        var xp: Int64 = 0

        init(_ changes: [RowChange]) {
            let life = changes.map(\.causalLength).max() ?? 0
            exists = life % 2 == 1
            let current = changes.filter { $0.causalLength == life }
            // An append wins its life whole: the earliest append by (HLC, replica ID, counter).
            if let first = current.filter({ $0.kind == .append }).min(by: {
                ($0.hlc, $0.dot.replica, $0.dot.counter) < ($1.hlc, $1.dot.replica, $1.dot.counter)
            }) {
                for value in first.values { values[value.column] = value.value }
                return
            }
            for column in AppTableMergeTests.columns {
                let writes = current.flatMap { change in
                    change.values.filter { $0.column == column }.map { (change, $0.value) }
                }
                // The latest write by (HLC, replica ID, counter), then the greater value.
                if let winner = writes.max(by: { a, b in
                    (a.0.hlc, a.0.dot.replica, a.0.dot.counter) < (b.0.hlc, b.0.dot.replica, b.0.dot.counter)
                        || ((a.0.hlc, a.0.dot.replica, a.0.dot.counter) == (b.0.hlc, b.0.dot.replica, b.0.dot.counter)
                            && a.1 < b.1)
                }) {
                    values[column] = winner.1
                }
            }
            // Each replica's latest total (by its own counter), summed.
            var totals: [ReplicaID: (UInt64, Int64)] = [:]
            for change in current {
                for total in change.totals where total.column == "xp" {
                    if let held = totals[change.dot.replica], held.0 >= change.dot.counter { continue }
                    totals[change.dot.replica] = (change.dot.counter, total.total)
                }
            }
            xp = totals.values.reduce(0) { $0 &+ $1.1 }
        }

        init(_ state: RowState) {
            exists = state.exists
            for column in AppTableMergeTests.columns {
                if let value = state.value(of: column) { values[column] = value }
            }
            xp = state.counter("xp")
        }
    }

    static func reference(_ changes: Set<RowChange>) -> [RowKey: ReferenceRow] {
        Dictionary(grouping: changes, by: \.key).mapValues { ReferenceRow($0) }
    }

    static func merged(_ changes: [RowChange]) -> [RowKey: RowState] {
        var rows: [RowKey: RowState] = [:]
        for change in changes { rows[change.key, default: RowState()].merge(change) }
        return rows
    }

    static let steps = Gen.int(in: 0...1_000_000).array(of: 0...80)
    static let order = Gen.int(in: 0...1_000_000).array(of: 0...400)

    /// A change as a relay may send it when some of its cells lost there: without them (the
    /// receiver learns they lost, and gets the change whole from another member, or what
    /// superseded it). `choice` picks the cells dropped, every one of them for an append.
    static func copy(of change: RowChange, without choice: Int) -> RowChange {
        RowChange(
            key: change.key,
            kind: change.kind,
            causalLength: change.causalLength,
            hlc: change.hlc,
            dot: change.dot,
            values: change.kind == .append
                ? [] : change.values.enumerated().filter { (choice >> $0.offset) & 1 == 0 }.map(\.element),
            totals: choice % 3 == 0 ? [] : change.totals
        )
    }

    /// Any delivery order, with every change delivered twice and some also as copies without some
    /// of their cells, equals the reference model.
    @Test func anyOrderWithDuplicatesEqualsTheReference() async {
        await propertyCheck(input: Gen.int(in: 3...5), Self.steps, Self.order) { replicaCount, steps, order in
            var simulation = Simulation(replicaCount: replicaCount)
            for step in steps { simulation.step(step) }
            let all = simulation.allChanges
            let copies = Array(all).enumerated().compactMap { index, change in
                let choice = order.isEmpty ? index : order[index % order.count] &+ index
                return choice % 4 == 0 ? Self.copy(of: change, without: choice / 4) : nil
            }
            var deliveries = Array(all) + Array(all) + copies
            // A generated shuffle: each delivery is keyed by the next generated number.
            let keyed = deliveries.indices.map { ($0, order.isEmpty ? $0 : order[$0 % order.count] &+ $0 * 7919) }
            deliveries = keyed.sorted { $0.1 < $1.1 }.map { deliveries[$0.0] }
            let rows = Self.merged(deliveries)
            #expect(rows.mapValues { ReferenceRow($0) } == Self.reference(all))
            // One delivery order against another: not only equal by the rules, equal states.
            #expect(rows == Self.merged(Array(all)))
        }
    }

    /// Replicas that each merge what every other replica holds converge to the reference, and
    /// their states (what the digest hashes) are equal byte for byte.
    @Test func replicasThatHearEverythingConverge() async {
        await propertyCheck(input: Gen.int(in: 3...5), Self.steps) { replicaCount, steps in
            var simulation = Simulation(replicaCount: replicaCount)
            for step in steps { simulation.step(step) }
            let expected = Self.reference(simulation.allChanges)
            var states = [[RowKey: RowState]]()
            for replica in simulation.replicas {
                var rows = replica.rows
                for other in simulation.replicas {
                    for (key, state) in other.rows {
                        for change in state.changes(key: key) { rows[key, default: RowState()].merge(change) }
                    }
                }
                #expect(rows.mapValues { ReferenceRow($0) } == expected)
                states.append(rows)
            }
            for rows in states.dropFirst() {
                #expect(rows.mapValues(\.canonicalBytes) == states[0].mapValues(\.canonicalBytes))
            }
        }
    }

    /// A state's live changes rebuild it exactly, and its canonical bytes decode to it.
    @Test func liveChangesAndBytesRebuildTheState() async {
        await propertyCheck(input: Gen.int(in: 3...5), Self.steps) { replicaCount, steps in
            var simulation = Simulation(replicaCount: replicaCount)
            for step in steps { simulation.step(step) }
            for replica in simulation.replicas {
                for (key, state) in replica.rows {
                    var rebuilt = RowState()
                    for change in state.changes(key: key) {
                        rebuilt.merge(change)
                        #expect(state.change(key: key, dot: change.dot) == change)
                    }
                    #expect(rebuilt == state)
                    #expect(Set(state.changes(key: key).map(\.dot)) == state.liveDots)
                    #expect((try? RowState(canonicalBytes: state.canonicalBytes)) == state)
                }
            }
        }
    }

    /// The store writes a change to a row it never heard of with `appendFirst`, without building
    /// the state: its bytes must be those of the state the change makes, and it must say whether
    /// the change stays live, for every kind of change the replicas make (and the edge cases).
    @Test func firstChangeBytesEqualTheStateItMakes() async {
        func check(_ change: RowChange) {
            var state = RowState()
            state.merge(change)
            var bytes = [UInt8(7)]
            let live = RowState.appendFirst(change, to: &bytes)
            #expect(bytes == [7] + state.canonicalBytes, "\(change)")
            #expect(live == !state.liveDots.isEmpty, "\(change)")
        }
        await propertyCheck(input: Gen.int(in: 3...5), Self.steps) { replicaCount, steps in
            var simulation = Simulation(replicaCount: replicaCount)
            for step in steps { simulation.step(step) }
            for change in simulation.allChanges { check(change) }
        }
        check(Self.change(.append, life: 1, at: 5, by: 1, 1, ["name": .text("Ada"), "weight": .real(61.5)]))
        check(Self.change(.update, life: 3, at: 5, by: 1, 2))
        check(Self.change(.update, life: 1, at: 5, by: 1, 3, totals: ["xp": 4]))
        check(Self.change(.insert, life: 5, at: 5, by: 1, 4))
        check(Self.change(.delete, life: 2, at: 5, by: 1, 5))
    }

    static func change(
        _ kind: RowChange.Kind,
        life: UInt64,
        at time: UInt64,
        by replica: UInt64,
        _ counter: UInt64,
        _ values: [String: SQLValue] = [:],
        totals: [String: Int64] = [:]
    ) -> RowChange {
        RowChange(
            key: keys[0],
            kind: kind,
            causalLength: life,
            hlc: HybridTimestamp(physicalMilliseconds: time, logical: 0),
            dot: Dot(replica: ReplicaID(high: replica, low: 0), counter: counter),
            values: values.map { .init(column: $0.key, value: $0.value) },
            totals: totals.map { .init(column: $0.key, total: $0.value) }
        )
    }

    /// Two devices edit different columns of one athlete offline: both edits survive.
    @Test func editsOfDifferentColumnsBothSurvive() {
        var row = RowState()
        row.merge(Self.change(.insert, life: 1, at: 10, by: 1, 1, ["name": .text("Ana"), "weight": .real(60)]))
        row.merge(Self.change(.update, life: 1, at: 20, by: 2, 1, ["weight": .real(61.5)]))
        row.merge(Self.change(.update, life: 1, at: 15, by: 1, 3, ["name": .text("Ana B.")]))
        #expect(row.value(of: "name") == .text("Ana B."))
        #expect(row.value(of: "weight") == .real(61.5))
        // The insert still wins its marker, so it is still live; nothing of it is shipped twice.
        #expect(row.liveDots.count == 3)
    }

    /// A delete beats an edit made concurrently (even a later one by the clock); an insert after
    /// the delete brings the row back with only the columns it wrote.
    @Test func deleteBeatsConcurrentEditsAndReinsertRevives() {
        var row = RowState()
        row.merge(Self.change(.insert, life: 1, at: 10, by: 1, 1, ["notes": .text("old")]))
        row.merge(Self.change(.delete, life: 2, at: 20, by: 2, 1))
        row.merge(Self.change(.update, life: 1, at: 99, by: 1, 3, ["notes": .text("concurrent")]))
        #expect(!row.exists)
        row.merge(Self.change(.insert, life: 3, at: 30, by: 2, 2, ["name": .text("back")]))
        #expect(row.exists)
        #expect(row.value(of: "name") == .text("back"))
        #expect(row.value(of: "notes") == nil)
    }

    /// XP added on three offline devices sums; each device's later total replaces its earlier one.
    @Test func countersSumEveryReplicasIncrements() {
        var row = RowState()
        row.merge(Self.change(.insert, life: 1, at: 1, by: 1, 1))
        row.merge(Self.change(.update, life: 1, at: 2, by: 1, 2, totals: ["xp": 5]))
        row.merge(Self.change(.update, life: 1, at: 2, by: 2, 1, totals: ["xp": 5]))
        row.merge(Self.change(.update, life: 1, at: 3, by: 3, 1, totals: ["xp": 8]))
        row.merge(Self.change(.update, life: 1, at: 4, by: 3, 2, totals: ["xp": 15]))
        row.merge(Self.change(.update, life: 1, at: 3, by: 3, 1, totals: ["xp": 8]))
        #expect(row.counter("xp") == 25)
        #expect(row.value(of: "xp") == .integer(25))
    }

    /// REAL values keep their bits: -0.0 and 0.0 are different values, and so are NaN payloads.
    @Test func realsRoundTripBitForBit() throws {
        #expect(SQLValue.real(-0.0) != SQLValue.real(0.0))
        let nan = Double(nan: 0x1234, signaling: false)
        #expect(SQLValue.real(nan) == .realBits(nan.bitPattern))
        var row = RowState()
        row.merge(Self.change(.insert, life: 1, at: 5, by: 1, 1, ["weight": .real(-0.0), "nan": .real(nan)]))
        let decoded = try RowState(canonicalBytes: row.canonicalBytes)
        #expect(decoded.value(of: "weight") == .realBits((-0.0).bitPattern))
        #expect(decoded.value(of: "nan") == .realBits(nan.bitPattern))
    }

    /// A parent's cascade deletes an appended row for good: whichever order the append, the
    /// delete and a late concurrent append of the same key arrive in, the row stays deleted.
    @Test func aCascadeDeleteEndsAnAppendedRowInAnyOrder() {
        let append = Self.change(.append, life: 1, at: 10, by: 1, 1, ["bpm": .integer(120)])
        let delete = Self.change(.delete, life: 2, at: 12, by: 2, 1)
        let earlierAppend = Self.change(.append, life: 1, at: 9, by: 3, 1, ["bpm": .integer(90)])
        for order in [
            [append, delete, earlierAppend], [delete, append, earlierAppend], [earlierAppend, delete, append],
            [delete, earlierAppend, append],
        ] {
            let state = Self.merged(order)[append.key]!
            #expect(
                !state.exists && state.causalLength == 2 && state.columns.isEmpty,
                "order \(order.map(\.dot.counter))"
            )
        }
        var appended = RowState()
        appended.merge(append)
        let edited = appended.merge(Self.change(.update, life: 1, at: 20, by: 2, 2, ["bpm": .integer(1)]))
        #expect(!edited, "an appended row takes no edit")
        #expect(appended.value(of: "bpm") == .integer(120))
    }

    /// A relay that holds an appended row deleted (its parent's cascade) sends the append without
    /// its cells. A replica that holds the append whole keeps it whole, and one that got the copy
    /// first takes the cells when the append comes whole; until then its state does not show the
    /// cells the copy left out, so the claim that they lost stays open and is asked about.
    @Test func anAppendsCopyWithoutItsCellsTakesNothingAway() {
        let append = Self.change(.append, life: 1, at: 10, by: 1, 1, ["bpm": .integer(120), "watts": .integer(310)])
        let copy = Self.copy(of: append, without: 0)
        #expect(copy.values.isEmpty && copy.dot == append.dot)
        var whole = RowState()
        whole.merge(append)
        var held = whole
        let changedByCopy = held.merge(copy)
        #expect(!changedByCopy, "the copy changes nothing of a row held whole")
        #expect(held == whole)
        var copiedFirst = RowState()
        copiedFirst.merge(copy)
        let lost = RowChange.LostCell(kind: .value, column: "bpm", standIn: [])
        #expect(!copiedFirst.shows(lost, ofChangeAt: append.stamp, life: 1, kind: .append))
        #expect(!copiedFirst.hasSuperseded(lost, ofChangeAt: append.stamp, life: 1, kind: .append))
        let changedByWhole = copiedFirst.merge(append)
        #expect(changedByWhole)
        #expect(copiedFirst == whole)
        #expect(copiedFirst.shows(lost, ofChangeAt: append.stamp, life: 1, kind: .append))
        #expect(copiedFirst.value(of: "watts") == .integer(310))
    }

    /// Two different rows appended under one key: every replica keeps the same one, the earliest.
    @Test func appendOnlyRowsKeepTheEarliestUnderAKey() {
        let early = Self.change(.append, life: 1, at: 10, by: 2, 1, ["bpm": .integer(120)])
        let late = Self.change(.append, life: 1, at: 11, by: 1, 1, ["bpm": .integer(90)])
        var a = RowState()
        a.merge(early)
        a.merge(late)
        var b = RowState()
        b.merge(late)
        b.merge(early)
        #expect(a.value(of: "bpm") == .integer(120))
        #expect(a == b)
        #expect(a.changes(key: Self.keys[0]) == [early])
    }

    /// Changes no replica may hold are named, not merged.
    @Test func malformedChangesAreRefused() {
        #expect(Self.change(.insert, life: 2, at: 1, by: 1, 1).problem()?.contains("deleted life") == true)
        #expect(Self.change(.delete, life: 3, at: 1, by: 1, 1).problem()?.contains("even life") == true)
        #expect(Self.change(.append, life: 1, at: 1, by: 1, 1, totals: ["xp": 1]).problem() != nil)
        #expect(
            Self.change(.update, life: 1, at: 1, by: 1, 1, ["Name": .null]).problem()?.contains("lowercase") == true
        )
        #expect(Self.change(.update, life: 1, at: 1, by: 1, 1, ["name": .null]).problem() == nil)
    }

    /// Bytes that are not a row state are refused with a reason.
    @Test func malformedStateBytesAreRefused() {
        var row = RowState()
        row.merge(Self.change(.insert, life: 1, at: 5, by: 1, 1, ["name": .text("x")]))
        let bytes = row.canonicalBytes
        #expect(throws: SQLValueDecodingError.self) { try RowState(canonicalBytes: bytes + [0]) }
        #expect(throws: SQLValueDecodingError.self) { try RowState(canonicalBytes: Array(bytes.dropLast())) }
        var badKind = bytes
        badKind[8] = 9
        #expect(throws: SQLValueDecodingError.self) { try RowState(canonicalBytes: badKind) }
    }
}

/// The canonical bytes of primary keys: every key round-trips exactly, one key has one encoding,
/// and bytes that are not an encoding are refused with a reason.
@Suite struct SQLValueCodingTests {
    static func value(_ seed: Int) -> SQLValue {
        switch seed % 6 {
        case 0: return .null
        case 1: return .integer(Int64(truncatingIfNeeded: seed &* 2_654_435_761))
        case 2: return .realBits(UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15)
        case 3:
            // "é" as one code point or as "e" and a combining accent, or other text.
            switch seed % 5 {
            case 0: return .text(String(repeating: "e\u{301}", count: seed / 6 % 3))
            case 1: return .text(String(repeating: "\u{e9}", count: seed / 6 % 3))
            default: return .text(String(repeating: "é𝄞a", count: seed % 4))
            }
        case 4: return .blob((0..<(seed % 7)).map { UInt8(truncatingIfNeeded: $0 &* seed) })
        default: return .real(-0.0)
        }
    }

    @Test func keysRoundTripExactly() async {
        await propertyCheck(input: Gen.int(in: 0...1_000_000).array(of: 1...SQLValue.maxKeyColumns)) { seeds in
            let key = seeds.map(Self.value)
            let bytes = SQLValue.keyBytes(key)
            let decoded = try? SQLValue.key(from: bytes)
            #expect(decoded == key)
            // One encoding per key: encoding what was decoded gives the same bytes.
            #expect(decoded.map(SQLValue.keyBytes) == bytes)
        }
    }

    /// Two values are equal exactly when their keys' bytes are: TEXT compares its UTF-8 (as SQLite
    /// does), not its characters, so the order, equality and hashing agree for every pair.
    @Test func valuesAreEqualExactlyWhenTheirBytesAre() async {
        func check(_ a: SQLValue, _ b: SQLValue) {
            let sameBytes = SQLValue.keyBytes([a]) == SQLValue.keyBytes([b])
            #expect((a == b) == sameBytes, "\(a) and \(b)")
            #expect([a < b, a == b, b < a].filter { $0 }.count == 1, "\(a) and \(b): exactly one order")
            if a == b { #expect(a.hashValue == b.hashValue) }
        }
        // Every pair of the first 60 seeds: both spellings of "é", once and twice, among them.
        for first in 0..<60 {
            for second in 0..<60 { check(Self.value(first), Self.value(second)) }
        }
        await propertyCheck(input: Gen.int(in: 0...1_000_000), Gen.int(in: 0...1_000_000)) { first, second in
            check(Self.value(first), Self.value(second))
        }
        let (composed, decomposed) = (SQLValue.text("caf\u{e9}"), SQLValue.text("cafe\u{301}"))
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed, .text("caf\u{e9}")]).count == 2)
        #expect(RowKey(table: "words", primaryKey: [composed]) != RowKey(table: "words", primaryKey: [decomposed]))
    }

    @Test(arguments: [
        ([UInt8](), "end inside"),
        ([0], "1 to 32 columns"),
        ([33], "1 to 32 columns"),
        ([1, 9], "unknown value tag 9"),
        ([1, 1, 0, 0], "end inside"),
        ([1, 3, 0, 0, 0, 5, 0x61], "end inside"),
        ([1, 3, 0, 0, 0, 1, 0xFF], "not UTF-8"),
        ([1, 4, 0xFF, 0xFF, 0xFF, 0xFF], "over the limit"),
        ([1, 0, 0], "after the key's last value"),
    ])
    func malformedKeysAreRefused(bytes: [UInt8], reason: String) {
        do {
            let values = try SQLValue.key(from: bytes)
            Issue.record("decoded \(values)")
        } catch {
            #expect(error.description.contains(reason), "\(error)")
        }
    }
}
