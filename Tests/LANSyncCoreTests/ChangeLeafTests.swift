import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

/// Leaves of superseded changes (docs/signed-changes.md, "Leaves"): what a store keeps of a change
/// after some of it lost must rebuild the change's leaf exactly, and a receiver must see as lost
/// every cell the sender left out — and no cell that still wins, so that a relay cannot pass a
/// live write off as superseded.
@Suite struct ChangeLeafTests {
    static let hasher = ElementHasher { BLAKE2b.hash($0) }
    typealias Simulation = AppTableMergeTests.Simulation

    /// One replica merging changes as the store does: the state of each row, and for each dot the
    /// cells of it that lost (`RowState.losses`), kept as a set since redeliveries report again.
    struct Store {
        var rows: [RowKey: RowState] = [:]
        var lost: [Dot: Set<RowChange.LostCell>] = [:]

        mutating func merge(_ change: RowChange) {
            let before = rows[change.key] ?? RowState()
            var after = before
            after.merge(change)
            for loss in after.losses(of: change, before: before, hasher: ChangeLeafTests.hasher) {
                lost[loss.dot, default: []].insert(loss.cell)
            }
            rows[change.key] = after
        }

        /// What the store would send of `change`: its header, the cells of it that still win in
        /// its row's current life, and the hashes of the ones that lost.
        func shipped(_ change: RowChange) -> (change: RowChange, lost: [RowChange.LostCell]) {
            let state = rows[change.key] ?? RowState()
            return (
                RowChangeStub(of: change).change(key: change.key, dot: change.dot, in: state),
                Array(lost[change.dot] ?? [])
            )
        }
    }

    /// Any schedule, any delivery order with duplicates: every change's leaf rebuilds from what the
    /// store keeps; the cells left out are exactly the ones the state shows lost.
    @Test func whatAStoreKeepsRebuildsEveryLeaf() async {
        await propertyCheck(input: Gen.int(in: 3...5), AppTableMergeTests.steps, AppTableMergeTests.order) {
            replicaCount,
            steps,
            order in
            var simulation = Simulation(replicaCount: replicaCount)
            for step in steps { simulation.step(step) }
            let all = Array(simulation.allChanges)
            var deliveries = all + all
            let keyed = deliveries.indices.map { ($0, order.isEmpty ? $0 : order[$0 % order.count] &+ $0 * 7919) }
            deliveries = keyed.sorted { $0.1 < $1.1 }.map { deliveries[$0.0] }
            var store = Store()
            for change in deliveries { store.merge(change) }
            for change in all {
                let (shipped, lost) = store.shipped(change)
                let state = store.rows[change.key]!
                #expect(shipped.leaf(lost: lost, hasher: Self.hasher) == change.leaf(hasher: Self.hasher), "\(change)")
                #expect(shipped == change.without(lost))
                for cell in lost {
                    #expect(
                        state.hasSuperseded(
                            cell,
                            ofChangeAt: change.stamp,
                            life: change.causalLength,
                            kind: change.kind
                        )
                    )
                }
                // A relay calling a cell lost that still wins is caught.
                for value in shipped.values {
                    #expect(
                        !state.hasSuperseded(
                            RowChange.lost(value, hasher: Self.hasher),
                            ofChangeAt: change.stamp,
                            life: change.causalLength,
                            kind: change.kind
                        )
                    )
                }
                for total in shipped.totals {
                    #expect(
                        !state.hasSuperseded(
                            RowChange.lost(total),
                            ofChangeAt: change.stamp,
                            life: change.causalLength,
                            kind: change.kind
                        )
                    )
                }
            }
            // What a receiver rebuilds from the shipped forms equals the state the sender holds.
            var receiver = Store()
            for change in all {
                let (shipped, _) = store.shipped(change)
                receiver.merge(shipped)
            }
            #expect(receiver.rows == store.rows)
        }
    }

    static let change = RowChange(
        key: RowKey(table: "athletes", primaryKey: [.text("a1")]),
        kind: .insert,
        causalLength: 1,
        hlc: HybridTimestamp(physicalMilliseconds: 5_000, logical: 0),
        dot: Dot(replica: ReplicaID(high: 1, low: 2), counter: 7),
        values: [.init(column: "name", value: .text("Ada")), .init(column: "weight", value: .real(61.5))],
        totals: [.init(column: "xp", total: 4)]
    )

    @Test func theRowLeafIsAsDocumented() {
        let c = Self.change
        func cell(_ name: String, _ standIn: [UInt8]) -> [UInt8] {
            [0, 0, 0, UInt8(name.utf8.count)] + Array(name.utf8) + [0, 0, 0, UInt8(standIn.count)] + standIn
        }
        var weight = [UInt8]()
        SQLValue.real(61.5).append(to: &weight)
        var name = [UInt8]()
        SQLValue.text("Ada").append(to: &name)
        #expect(weight.count < 32 && name.count < 32)
        var input = Array("lansync/v1/leaf/row".utf8) + c.key.canonicalBytes + [1] + [0, 0, 0, 0, 0, 0, 0, 1]
        input.appendBigEndian(HybridTimestamp(physicalMilliseconds: 5_000, logical: 0).rawValue)
        input += c.dot.replica.bytes + [0, 0, 0, 0, 0, 0, 0, 7]
        input += [0, 0, 0, 2] + cell("name", name) + cell("weight", weight)
        input += [0, 0, 0, 1] + cell("xp", [0, 0, 0, 0, 0, 0, 0, 4])
        #expect(c.leaf(hasher: Self.hasher) == BLAKE2b.hash(input))
    }

    /// Every field of a change is in its leaf, and lost cells must be well-formed.
    @Test func alteringAnythingChangesTheLeaf() {
        let c = Self.change
        let leaf = c.leaf(hasher: Self.hasher)
        func variant(
            kind: RowChange.Kind? = nil,
            life: UInt64? = nil,
            counter: UInt64? = nil,
            key: String = "a1",
            values: [RowChange.Value]? = nil,
            totals: [RowChange.Total]? = nil
        ) -> [UInt8]? {
            RowChange(
                key: RowKey(table: "athletes", primaryKey: [.text(key)]),
                kind: kind ?? c.kind,
                causalLength: life ?? c.causalLength,
                hlc: c.hlc,
                dot: Dot(replica: c.dot.replica, counter: counter ?? c.dot.counter),
                values: values ?? c.values,
                totals: totals ?? c.totals
            ).leaf(hasher: Self.hasher)
        }
        #expect(variant(kind: .update) != leaf)
        #expect(variant(life: 3) != leaf)
        #expect(variant(counter: 8) != leaf)
        #expect(variant(key: "a2") != leaf)
        #expect(variant(values: [.init(column: "name", value: .text("Ada"))]) != leaf)
        #expect(variant(values: [.init(column: "name", value: .text("Bob")), c.values[1]]) != leaf)
        #expect(variant(totals: [.init(column: "xp", total: 5)]) != leaf)
        #expect(variant(totals: []) != leaf)
        // A cell moved from the values to the totals, or renamed, is another leaf.
        let weight = RowChange.lost(c.values[1], hasher: Self.hasher)
        let stripped = c.without([weight])
        #expect(stripped.values.count == 1)
        #expect(stripped.leaf(lost: [weight], hasher: Self.hasher) == leaf)
        #expect(
            stripped.leaf(lost: [.init(kind: .value, column: "weigh", standIn: weight.standIn)], hasher: Self.hasher)
                != leaf
        )
        #expect(
            stripped.leaf(lost: [.init(kind: .value, column: "weight", standIn: [1, 2])], hasher: Self.hasher) != leaf
        )
        // Malformed: a lost cell the change also carries, one named twice, stand-ins too long.
        #expect(c.leaf(lost: [weight], hasher: Self.hasher) == nil)
        #expect(stripped.leaf(lost: [weight, weight], hasher: Self.hasher) == nil)
        #expect(
            stripped.leaf(
                lost: [.init(kind: .value, column: "weight", standIn: .init(repeating: 1, count: 33))],
                hasher: Self.hasher
            ) == nil
        )
        #expect(
            stripped.leaf(lost: [.init(kind: .total, column: "weight", standIn: weight.standIn)], hasher: Self.hasher)
                == nil
        )
        // A long value stands as its hash.
        let long = SQLValue.text(String(repeating: "x", count: 40))
        var longBytes = [UInt8]()
        long.append(to: &longBytes)
        #expect(RowChange.standIn(for: long, hasher: Self.hasher) == BLAKE2b.hash(longBytes))
    }

    /// A preference stub rebuilds its write's leaf, and counts as lost exactly when the write held
    /// for its key wins under the preference order.
    @Test func preferenceStubsRebuildTheLeafAndLoseOnlyToLaterWrites() async {
        let device = DeviceID(bytes: [UInt8](repeating: 3, count: 16))!
        func write(_ seed: Int, key: String = "theme") -> PreferenceWrite {
            PreferenceWrite(
                key: key,
                value: seed % 3 == 0 ? nil : "\"v\(seed)\"",
                originDevice: device,
                dot: Dot(replica: ReplicaID(high: UInt64(seed % 3 + 1), low: 1), counter: UInt64(seed % 5 + 1)),
                hlc: HybridTimestamp(physicalMilliseconds: UInt64(1_000 + seed % 4), logical: 0),
                wallMilliseconds: 7
            )
        }
        await propertyCheck(input: Gen.int(in: 0...10_000), Gen.int(in: 0...10_000)) { a, b in
            let stub = PreferenceStub(write(a), hasher: Self.hasher)
            #expect(
                ChangeLeaf.preference(stub, hasher: Self.hasher) == ChangeLeaf.preference(write(a), hasher: Self.hasher)
            )
            let held = write(b)
            let expected = held.dot != write(a).dot && PreferenceWrite.loses(write(a), to: held)
            #expect(stub.isSuperseded(by: held) == expected)
            #expect(!stub.isSuperseded(by: write(b, key: "volume")))
            #expect(!stub.isSuperseded(by: nil))
        }
        let one = ChangeLeaf.preference(write(1), hasher: Self.hasher)
        #expect(one != ChangeLeaf.preference(write(1, key: "themes"), hasher: Self.hasher))
        #expect(one != ChangeLeaf.preference(write(4), hasher: Self.hasher))
    }
}
