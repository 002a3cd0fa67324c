/// What happens to a simulated group, in order: what its users do and what its devices go
/// through. Drawn from a seed (`Schedule.random`), and shrunk by dropping actions from it: every
/// action carries what it needs, and one that no longer applies (its node is away, or was never
/// set up) is skipped, so any subset of a schedule is a schedule.
package struct Schedule: Sendable, CustomStringConvertible {
    package enum Action: Sendable, Equatable, CustomStringConvertible {
        /// Appends `count` entries in one transaction.
        case append(node: Int, count: Int)
        /// Sets (or, with nil, unsets) a preference from a small pool of keys.
        case setPreference(node: Int, key: Int, value: Int?)
        /// App-table writes on a small pool of rows. An insert whose value is a multiple of 4
        /// writes seed data (`LANSyncNode.write(seed:)`), which every real write beats.
        case insertRow(node: Int, row: Int, value: Int)
        case editRow(node: Int, row: Int, column: Int, value: Int)
        case deleteRow(node: Int, row: Int)
        /// An UPDATE of a row's key (`UPDATE OR IGNORE`: nothing when the new key is taken), so
        /// the row keeps its rowid under another key. Rows r2 to r6, which no stroke belongs to.
        case renameRow(node: Int, row: Int, to: Int)
        case addToCounter(node: Int, row: Int, amount: Int)
        /// Writes a value to the one-way columns `best` (`-- lansync: max`) and `low` (`min`),
        /// below or above what they show.
        case writeBest(node: Int, row: Int, value: Int)
        /// Appends `count` rows to the append-only table in one transaction.
        case appendRows(node: Int, count: Int)
        /// The app's next schema version (a new column) on this node.
        case upgradeSchema(node: Int)
        case connect(Int, Int)
        case disconnect(Int, Int)
        /// The nodes whose bit is set can reach only each other, the rest only each other.
        case partition(mask: Int)
        case heal
        /// kill -9: sessions end without a goodbye; the node reopens its replica from disk.
        case kill(node: Int)
        /// The device leaves the network (it keeps writing, offline) and comes back.
        case goAway(node: Int)
        case comeBack(node: Int)
        /// Wiped and set up again on the same machine (same device ID, new keys, new replica);
        /// `voucher` vouches for it (`group invite` there, `group join CODE` on it).
        case reinstall(node: Int, voucher: Int)
        /// A device that was not in the group joins with the join code.
        case join(node: Int)
        /// `by` removes `node` from the group (a new epoch).
        case remove(node: Int, by: Int)
        /// The device leaves the group (`lansync group leave`): its "left" record goes to a member,
        /// then it drops the secret and syncs with nobody, keeping its replica.
        case leave(node: Int)
        /// A device that left joins again with the join code (its replica kept) and says it is back.
        case rejoin(node: Int)
        /// The node's agent signs its chain over its latest writes.
        case extendChain(node: Int)

        /// The item a run of `count` strokes belongs to (`appendRows`): r0, r1, or none, drawn
        /// from the count so that a schedule says it and shrinking keeps it.
        package static func strokeItem(count: Int) -> String? { count % 3 == 2 ? nil : "r\(count % 3)" }

        package var description: String {
            switch self {
            case .append(let node, let count): "n\(node) appends \(count)"
            case .setPreference(let node, let key, let value):
                "n\(node) sets \((value ?? 1) % 2 == 0 ? "k" : "K")\(key) = \(value.map(String.init) ?? "unset")"
            case .insertRow(let node, let row, let value):
                "n\(node) inserts row r\(row) (\(value))\(value % 4 == 0 ? " as seed data" : "")"
            case .editRow(let node, let row, let column, let value): "n\(node) edits r\(row).c\(column) = \(value)"
            case .deleteRow(let node, let row): "n\(node) deletes r\(row) (and the strokes of it that it holds)"
            case .renameRow(let node, let row, let to): "n\(node) renames r\(row) to r\(to)"
            case .addToCounter(let node, let row, let amount):
                "n\(node) adds \(amount) to r\(row).total and \(Double(amount) / 8) to r\(row).km"
            case .writeBest(let node, let row, let value):
                "n\(node) writes \(value) to r\(row).best (max) and .low (min)"
            case .appendRows(let node, let count):
                "n\(node) appends \(count) strokes" + (Self.strokeItem(count: count).map { " to \($0)" } ?? "")
            case .upgradeSchema(let node): "n\(node) upgrades its schema"
            case .connect(let a, let b): "n\(a) connects to n\(b)"
            case .disconnect(let a, let b): "n\(a) and n\(b) disconnect"
            case .partition(let mask): "partition \(String(mask, radix: 2))"
            case .heal: "the network heals"
            case .kill(let node): "n\(node) is killed (kill -9) and restarts"
            case .goAway(let node): "n\(node) goes away"
            case .comeBack(let node): "n\(node) comes back"
            case .reinstall(let node, let voucher): "n\(node) is reinstalled; n\(voucher) vouches for it"
            case .join(let node): "n\(node) joins"
            case .remove(let node, let by): "n\(by) removes n\(node)"
            case .leave(let node): "n\(node) leaves the group"
            case .rejoin(let node): "n\(node) joins again"
            case .extendChain(let node): "n\(node) signs its chain"
            }
        }
    }

    /// Each action with the simulated millisecond it happens at.
    package var actions: [(at: Int64, action: Action)]
    package var nodes: Int
    /// Nodes that are not in the group at the start (they join later, if an action says so).
    package var lateJoiners: Set<Int>
    /// The member that runs hostile actions, in Byzantine mode.
    package var byzantine: Int?

    package init(actions: [(at: Int64, action: Action)], nodes: Int, lateJoiners: Set<Int> = [], byzantine: Int? = nil)
    {
        self.actions = actions
        self.nodes = nodes
        self.lateJoiners = lateJoiners
        self.byzantine = byzantine
    }

    package var description: String {
        var lines = [
            "\(nodes) nodes" + (lateJoiners.isEmpty ? "" : ", joining later: \(lateJoiners.sorted().map { "n\($0)" })")
                + (byzantine.map { ", hostile: n\($0)" } ?? "")
        ]
        for (at, action) in actions { lines.append("  \(at) ms: \(action)") }
        return lines.joined(separator: "\n")
    }

    /// A schedule drawn from `random`: 3–7 nodes, some joining later, and `length` actions of
    /// users and devices at random times (a few milliseconds to a second apart).
    package static func random(_ random: inout SeededRandom, length: Int, byzantine: Bool) -> Schedule {
        let nodes = Int.random(in: 3...7, using: &random)
        var late = Set<Int>()
        for node in 2..<nodes where random.chance(0.2) { late.insert(node) }
        var schedule = Schedule(
            actions: [],
            nodes: nodes,
            lateJoiners: late,
            byzantine: byzantine ? Int.random(in: 1..<nodes, using: &random) : nil
        )
        var now: Int64 = 0
        // Everyone that starts in the group meets someone first.
        for node in 1..<nodes where !late.contains(node) {
            schedule.actions.append((now, .connect(node, Int.random(in: 0..<node, using: &random))))
        }
        func node() -> Int { Int.random(in: 0..<nodes, using: &random) }
        func other(than one: Int) -> Int {
            let pick = Int.random(in: 0..<(nodes - 1), using: &random)
            return pick >= one ? pick + 1 : pick
        }
        for _ in 0..<length {
            now += Int64.random(in: 1...800, using: &random)
            let roll = Int.random(in: 0..<1000, using: &random)
            let action: Action
            switch roll {
            case 0..<165: action = .append(node: node(), count: 1)
            case 165..<200:
                action = .append(
                    node: node(),
                    count: random.chance(0.5)
                        ? Int.random(in: 1_900...2_600, using: &random) : Int.random(in: 2...300, using: &random)
                )
            case 200..<290:
                action = .setPreference(
                    node: node(),
                    key: Int.random(in: 0..<4, using: &random),
                    value: random.chance(0.15) ? nil : Int.random(in: 0..<1000, using: &random)
                )
            case 290..<340:
                action = .insertRow(
                    node: node(),
                    row: Int.random(in: 0..<5, using: &random),
                    value: Int.random(in: 0..<1000, using: &random)
                )
            case 390..<400:
                let row = Int.random(in: 2..<7, using: &random)
                action = .renameRow(
                    node: node(),
                    row: row,
                    to: 2 + (row - 2 + Int.random(in: 1..<5, using: &random)) % 5
                )
            case 340..<390:
                action = .editRow(
                    node: node(),
                    row: Int.random(in: 0..<5, using: &random),
                    column: Int.random(in: 0..<3, using: &random),
                    value: Int.random(in: 0..<1000, using: &random)
                )
            case 400..<420: action = .deleteRow(node: node(), row: Int.random(in: 0..<5, using: &random))
            case 420..<450:
                action = .addToCounter(
                    node: node(),
                    row: Int.random(in: 0..<5, using: &random),
                    amount: Int.random(in: -5...20, using: &random)
                )
            // Two rows only, so that devices write one row's one-way columns in the same life.
            case 450..<480:
                action = .writeBest(
                    node: node(),
                    row: Int.random(in: 0..<2, using: &random),
                    value: Int.random(in: -50...1000, using: &random)
                )
            case 480..<495:
                action = .appendRows(
                    node: node(),
                    count: random.chance(0.5)
                        ? Int.random(in: 1_900...2_600, using: &random) : Int.random(in: 1...200, using: &random)
                )
            case 495..<505: action = .upgradeSchema(node: node())
            case 505..<640:
                let a = node()
                action = .connect(a, other(than: a))
            case 640..<690:
                let a = node()
                action = .disconnect(a, other(than: a))
            case 690..<705: action = .partition(mask: Int.random(in: 1..<(1 << nodes) - 1, using: &random))
            case 705..<730: action = .heal
            case 730..<750: action = .kill(node: node())
            case 750..<775: action = .goAway(node: node())
            case 775..<820: action = .comeBack(node: node())
            case 820..<832:
                let a = node()
                action = .reinstall(node: a, voucher: other(than: a))
            case 832..<850: action = .join(node: node())
            case 850..<856:
                let a = node()
                action = .remove(node: a, by: other(than: a))
            case 856..<862: action = .leave(node: node())
            case 862..<872: action = .rejoin(node: node())
            default: action = .extendChain(node: node())
            }
            schedule.actions.append((now, action))
        }
        return schedule
    }
}
