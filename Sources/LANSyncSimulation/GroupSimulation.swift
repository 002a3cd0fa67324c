import Foundation
import GRDB
import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncIdentity
import LANSyncSession
import LANSyncStore
import LANSyncWire
import Synchronization

/// A deterministic simulation of a whole group (in the way FoundationDB and TigerBeetle test
/// theirs): real nodes — each a `LANSyncNode` with its SQLite replica in a temporary directory,
/// real signing and checking — talking through the real `SyncProtocol` machine and the real
/// wire encoding, over a simulated network (delays, connection losses, partitions, links that
/// come and go) on a simulated clock. One seed fixes the schedule of what users do and devices go
/// through (`Schedule`) and every choice of the network, so a seed replays exactly.
///
/// At the end the network heals, every device comes back and connects to every other, and the
/// checker asserts (`GroupChecker`): the group converges within a bound of simulated time; every
/// acknowledged write of a device still in the group (or of one that left, up to its leave) is on
/// every device exactly once; every device lists who left and who is back as they did; the app
/// table equals a reference model of the merge rules over every change its writers made; no
/// session asked for the same range again without progress more than a bounded number of times;
/// no loss claim stays open. In Byzantine mode one member sends hostile changes as well (altered
/// changes below what the receiver verified, live changes passed off as lost, batches withheld,
/// records outside a hand-over, another device's replica claimed as its own), and the honest
/// devices must still converge on the honest data. Sessions keep the machine's time: its timer
/// (pings, held-back states) runs as events.
///
/// What it does not model: the handshake's cryptography (admission follows its rules, reading
/// each side's records), epochs at admission (a removal's records reach members in sessions;
/// no member is refused for holding an older epoch, so there is no hand-over), the relay grace,
/// and a kill in the middle of a merge (kills fall between events).
package final class GroupSimulation {
    /// What a run found.
    package struct Outcome: Sendable {
        package var failure: String?
        /// Simulated events handled (actions, deliveries, sends).
        package var events = 0
        package var messages = 0
        package var simulatedMilliseconds: Int64 = 0
        package var claimsOpened = 0
        package var refusedDeltas = 0
        /// Hostile sends in a Byzantine run (altered, forged, claimed, withheld or unsolicited).
        package var hostileSends = 0
        /// Strokes that went with their deleted item (the cascade into an append-only table).
        package var cascadedStrokes = 0
    }

    let schedule: Schedule
    var network: SeededRandom
    let root: String
    let clock = SimulatedClock()
    var nodes: [SimulatedNode] = []
    var connections: [Int: Connection] = [:]
    var nextConnection = 0
    var queue = EventQueue<Event>()
    var now: Int64 = 0
    var partition: Int?
    var outcome = Outcome()
    var joinCode = ""
    /// Every acknowledged write the group must keep: entry ids and stroke ids, by writer.
    var acknowledged: [Int: (entries: Set<String>, strokes: Set<String>)] = [:]
    /// Strokes that went with their deleted item (`ON DELETE CASCADE`) on the device that deleted
    /// it: no device expects to keep them.
    var cascaded = Set<String>()
    /// The same, by the device whose delete took them, in its current install, each with the
    /// delete's dot: gone from every device that holds that delete once the group converged,
    /// unless that device was removed or wiped since (its deletes may not have reached anyone)
    /// or is the hostile member.
    var cascadedBy: [Int: [Cascade]] = [:]

    /// The strokes one delete of an item took on the device that made it, and that delete.
    struct Cascade {
        let strokes: Set<String>
        let delete: Dot
    }
    var written = 0
    /// Every change of the `items` table as its writer made it (`GroupChecker.referenceItems`).
    var itemChanges = Set<RowChange>()
    /// The hostile member's nodes that claim another device's replica ID as its own, by that ID.
    var claims: [ReplicaID: LANSyncNode] = [:]
    /// `LANSYNC_SIMULATE_TRACE=1`: print every merge (its ranges, and those not taken), batch
    /// sent, reply (resends), look at open claims and refused connection, to follow a failing seed.
    static let tracing = ProcessInfo.processInfo.environment["LANSYNC_SIMULATE_TRACE"] != nil

    /// A replica as the trace names it: six hex digits past its common prefix.
    static func traced(_ replica: ReplicaID) -> Substring { replica.description.dropFirst(8).prefix(6) }

    /// Ranges as the trace shows them: `replica(from,through]`.
    static func traced(_ coverage: [Delta.Coverage]) -> [String] {
        coverage.map { "\(traced($0.replica))(\($0.from),\($0.through)]" }
    }

    /// Places by replica (ranges not taken, open claims) as the trace shows them: `replica@counter`.
    static func traced(_ places: [ReplicaID: UInt64]) -> [String] {
        places.map { "\(traced($0.key))@\($0.value)" }
    }
    /// Sessions ping after this much silence, and end after three times it (the agent's default
    /// is shorter; a longer one keeps a seed's events for what it tests).
    static let keepalive: Duration = .seconds(30)
    /// Sessions quiet for this long ping this often (the agent's idle keepalive), so that
    /// schedules also run sessions across the switch between the two intervals.
    package static let idleKeepalive: Duration = .seconds(90)
    /// The idle keepalive of schedules found before sessions had one: `keepalive` itself. Each
    /// ping draws on the network's random delays, so a schedule replays its run only with the
    /// timing it was found with.
    package static let idleKeepaliveBefore = keepalive
    /// This run's idle keepalive.
    let idleKeepalive: Duration

    /// How long `lansync group leave` waits for a member to take the news (its `--timeout`).
    static let leaveTimeout: Int64 = 15_000
    /// The resend bound: how often a session may ask for one place of one replica again.
    static let resendsWithoutProgress = 8
    /// How long the healed network has to converge, in simulated milliseconds.
    static let convergenceBound: Int64 = 120_000

    enum Event {
        case action(Int)
        case deliver(connection: Int, toward: Int)
        case pump(connection: Int, side: Int)
        /// A session's timer (`SyncProtocol.nextDeadline`): pings, held-back states, silence.
        case timer(connection: Int, side: Int)
        case extendChain(node: Int)
        case reconnectAll
    }

    package init(
        schedule: Schedule,
        networkSeed: UInt64,
        root: String,
        idleKeepalive: Duration = GroupSimulation.idleKeepalive
    ) {
        self.idleKeepalive = idleKeepalive
        self.schedule = schedule
        network = SeededRandom(seed: networkSeed)
        self.root = root
    }

    /// Runs the schedule, heals the network and checks the group.
    package func run() async -> Outcome {
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            defer {
                try? FileManager.default.removeItem(atPath: root)
                // The runs' shared parent goes with the last of them (rmdir removes only an empty one).
                rmdir((root as NSString).deletingLastPathComponent)
            }
            try await setUp()
            for (index, item) in schedule.actions.enumerated() { queue.schedule(.action(index), at: item.at) }
            let end = (schedule.actions.last?.at ?? 0) + 1
            queue.schedule(.reconnectAll, at: end)
            var healedAt: Int64?
            events: while let (at, event) = queue.next() {
                now = max(now, at)
                clock.set(now)
                outcome.events += 1
                switch event {
                case .action(let index): try await perform(schedule.actions[index].action)
                case .deliver(let connection, let toward): try await deliver(connection, toward: toward)
                case .pump(let connection, let side): try await pump(connection, side: side)
                case .timer(let connection, let side): timerFired(connection, side: side)
                case .extendChain(let node): try await extendChain(node)
                case .reconnectAll:
                    if healedAt == nil { healedAt = now }
                    try await healEverything()
                    // Checked as it stands: the hostile member may still deliver its own writes to
                    // some devices and not to others, and sessions' timers would run on for good.
                    if try await GroupChecker(simulation: self).converged() { break events }
                    if now - healedAt! > Self.convergenceBound {
                        outcome.failure = try await GroupChecker(simulation: self).divergence(
                            "the group did not converge within \(Self.convergenceBound / 1000) simulated seconds of the network healing"
                        )
                        break
                    }
                    queue.schedule(.reconnectAll, at: now + 1_000)
                }
                if outcome.failure != nil { break }
            }
            if outcome.failure == nil { outcome.failure = try await GroupChecker(simulation: self).check() }
        } catch {
            outcome.failure = "the simulation failed: \(error)"
        }
        outcome.simulatedMilliseconds = now
        outcome.cascadedStrokes = cascaded.count
        nodes.removeAll()
        return outcome
    }

    // MARK: Nodes

    func setUp() async throws {
        var identities = SeededRandom(seed: network.next())
        for index in 0..<schedule.nodes {
            nodes.append(
                SimulatedNode(index: index, deviceID: DeviceID(bytes: identities.bytes(16))!, keys: identities.split())
            )
        }
        let first = try await install(0)
        joinCode = try first.createGroup().joinCode
        try await first.recordCreator()
        try await first.observeSelf()
        for index in 1..<schedule.nodes where !schedule.lateJoiners.contains(index) { _ = try await install(index) }
    }

    /// Sets the node up in a fresh directory (its next generation: a first install or a reinstall).
    @discardableResult
    func install(_ index: Int) async throws -> LANSyncNode {
        let simulated = nodes[index]
        simulated.generation += 1
        let directory = DataDirectory(path: root + "/n\(index)-g\(simulated.generation)")
        let secret = SecureBytes(copying: simulated.keys.bytes(32))
        let identity = DeviceIdentity(
            deviceID: simulated.deviceID,
            source: .machineID,
            name: "n\(index)",
            keyPair: try KeyPair(secretKey: secret)
        )
        let replica = ReplicaStore.ReplicaChoice.derived(nonce: simulated.keys.bytes(16))
        let clock = clock
        let skew = Int64(index) * 700 - 1_000
        let node = try LANSyncNode.create(
            at: directory,
            identity: identity,
            replica: replica,
            clock: NodeClock(reading: { UInt64(Int64(clock.milliseconds) + skew) })
        )
        node.store.extendChainInCommits(true)
        // The creator's first install made the group; every other install joins it.
        if index != 0 || simulated.generation > 1 { _ = try node.joinGroup(code: joinCode) }
        try await node.observeSelf()
        _ = try node.applySchema(simulated.schemaVersion >= 2 ? AppSchema.second : AppSchema.first)
        simulated.schemaVersion = max(simulated.schemaVersion, 1)
        simulated.node = node
        simulated.online = true
        acknowledged[index] = ([], [])
        return node
    }

    /// Nodes that take part: set up, online, not removed and not gone of their own accord.
    func active(_ index: Int) -> LANSyncNode? {
        let node = nodes[index]
        guard node.online, !node.removed, !node.hasLeft else { return nil }
        return node.node
    }

    /// Completes the leaves whose handover another honest device took whole (its "left"
    /// record, all the device wrote, all it held of the others' writes), as `lansync group leave`
    /// does once a member took them, and those waiting past the command's timeout, as it does
    /// when no member answers: the device drops the secret and its sessions. Not as soon as a
    /// member holds the record alone: a change before it may travel as superseded by a later
    /// write of the device's own, which then never arrives (seed 102337: a best score that no
    /// device showed). Nor once a member holds only what the device wrote: another device's
    /// writes relayed to it alone would go with it, and with them the write that settles a
    /// claim every member keeps open (seed 151167: two devices leaving, one after taking the
    /// other's writes).
    func completeLeaves() async throws {
        for simulated in nodes {
            guard simulated.isLeaving, let node = simulated.node, let handover = simulated.handover else { continue }
            let members = try nodes.compactMap { other -> (device: String?, vector: VersionVector)? in
                guard other.index != simulated.index, other.index != schedule.byzantine, !other.removed,
                    !other.hasLeft, let otherNode = other.node
                else { return nil }
                return (other.deviceID.description, try otherNode.store.versionVector())
            }
            let timedOut = now - (simulated.leavingSince ?? now) >= Self.leaveTimeout
            guard try timedOut || node.leaveTaken(handover, by: members).contains(.everything) else { continue }
            try node.leaveGroup()
            // What only it holds leaves with it: all of it when the leave timed out, else what
            // reached it after it said it leaves (a member that stays holds everything before).
            let kept = try forgetWritesHeldOnlyBy(simulated.index)
            let written = acknowledged[simulated.index] ?? ([], [])
            simulated.leavingSince = nil
            simulated.handover = nil
            simulated.hasLeft = true
            simulated.heldWhenLeft = (
                written.entries.intersection(kept.entries), written.strokes.intersection(kept.strokes)
            )
            try await dropConnections(of: simulated.index)
        }
    }

    // MARK: Actions

    func perform(_ action: Schedule.Action) async throws {
        switch action {
        case .append(let index, let count):
            guard let node = nodes[index].node else { return }
            let ids = (0..<count).map { _ in nextID("e", index) }
            _ = try await node.append(ids.map { AppendRequest(id: $0, stream: "taps", payload: "{\"n\":\(written)}") })
            acknowledged[index]!.entries.formUnion(ids)
            await wrote(index)
        case .setPreference(let index, let key, let value):
            guard let node = nodes[index].node else { return }
            // Apps may spell a key with capitals: the same key, folded to lowercase.
            let spelled = (value ?? 1) % 2 == 0 ? "app/k\(key)" : "App/K\(key)"
            if let value { _ = try await node.set(spelled, to: "\(value)") } else { _ = try await node.unset(spelled) }
            await wrote(index)
        case .insertRow(let index, let row, let value):
            // Some inserts replace a live row: SQLite deletes it and inserts it again.
            let replaces = value % 7 == 3
            // Some keys end in "é", spelled two ways: two rows, as SQLite compares bytes.
            let id = value % 11 == 5 ? "r\(row)" + AppSchema.spelledE(value) : "r\(row)"
            try await appWrite(
                index,
                sql: "INSERT OR \(replaces ? "REPLACE" : "IGNORE") INTO items (id, name, level) VALUES (?, ?, ?)",
                [id, AppSchema.text(value), value],
                seed: value % 4 == 0 && !replaces
            )
        case .editRow(let index, let row, let column, let value):
            let columns =
                nodes[index].schemaVersion >= 2 ? ["name", "note", "level", "extra"] : ["name", "note", "level"]
            let name = columns[column % columns.count]
            // Some writes edit the row twice, in two statements: the changes are made after both ran.
            let twice = value % 5 == 0
            try await appWrite(
                index,
                sql: "UPDATE items SET \(name) = ? WHERE id = ?"
                    + (twice ? "; UPDATE items SET level = coalesce(level, 0) + 1, note = name WHERE id = ?" : ""),
                twice
                    ? [name == "level" ? value : AppSchema.text(value), "r\(row)", "r\(row)"]
                    : [name == "level" ? value : AppSchema.text(value), "r\(row)"]
            )
        case .deleteRow(let index, let row):
            // The item's strokes that this device holds go with it, on every device.
            let before = try nodes[index].node.map { try GroupChecker.strokeIDs($0, of: "r\(row)") } ?? []
            let made = try await appWrite(index, sql: "DELETE FROM items WHERE id = ?", ["r\(row)"])
            let gone = before.subtracting(
                try nodes[index].node.map { try GroupChecker.strokeIDs($0, of: "r\(row)") } ?? []
            )
            cascaded.formUnion(gone)
            // A device out of the group (left, until it joins again) takes its deletes with it; one
            // on its way out may leave before a member took them (its writes after its "left" record).
            if !nodes[index].removed, !nodes[index].hasLeft, !nodes[index].isLeaving, !gone.isEmpty,
                let delete = made.first(where: { $0.kind == .delete })
            {
                cascadedBy[index, default: []].append(Cascade(strokes: gone, delete: delete.dot))
            }
        case .renameRow(let index, let row, let to):
            try await appWrite(index, sql: "UPDATE OR IGNORE items SET id = ? WHERE id = ?", ["r\(to)", "r\(row)"])
        case .addToCounter(let index, let row, let amount):
            try await appWrite(
                index,
                sql: "UPDATE items SET total = total + ?, km = km + ? WHERE id = ?",
                [amount, Double(amount) / 8, "r\(row)"]
            )
        case .writeBest(let index, let row, let value):
            try await appWrite(
                index,
                sql: "UPDATE items SET best = ?, low = ? WHERE id = ?",
                [value, value, "r\(row)"]
            )
        case .appendRows(let index, let count):
            guard let node = nodes[index].node else { return }
            let ids = (0..<count).map { _ in nextID("s", index) }
            let watts = written
            // Most runs belong to r0 or r1 (and go when it is deleted), which the app makes first
            // unless this device holds it (as a rowing app opens a session); some to none.
            let item = Schedule.Action.strokeItem(count: count)
            if let item { try await appWrite(index, sql: "INSERT OR IGNORE INTO items (id) VALUES (?)", [item]) }
            try await node.write { db in
                for id in ids {
                    try db.execute(
                        sql: "INSERT INTO strokes (id, watts, item) VALUES (?, ?, ?)",
                        arguments: [id, watts, item]
                    )
                }
            }
            acknowledged[index]!.strokes.formUnion(ids)
            await wrote(index)
        case .upgradeSchema(let index):
            guard let node = nodes[index].node, nodes[index].schemaVersion < 2 else { return }
            _ = try node.applySchema(AppSchema.second)
            nodes[index].schemaVersion = 2
        case .connect(let a, let b): try await connect(a, b)
        case .disconnect(let a, let b):
            for connection in connections.values where Set([connection.ends.0, connection.ends.1]) == Set([a, b]) {
                try await drop(connection)
            }
        case .partition(let mask):
            partition = mask
            for connection in connections.values where !reachable(connection.ends.0, connection.ends.1) {
                try await drop(connection)
            }
        case .heal: partition = nil
        case .kill(let index):
            guard let node = nodes[index].node else { return }
            try await dropConnections(of: index)
            let directory = node.dataDirectory
            let clock = node.clock
            nodes[index].node = nil
            let reopened = try LANSyncNode.open(at: directory, clock: clock)
            reopened.store.extendChainInCommits(true)
            nodes[index].node = reopened
        case .goAway(let index):
            guard nodes[index].node != nil else { return }
            nodes[index].online = false
            try await dropConnections(of: index)
        case .comeBack(let index):
            nodes[index].online = true
        case .reinstall(let index, let voucher):
            guard nodes[index].node != nil, !nodes[index].removed, index != schedule.byzantine,
                let vouching = active(voucher)
            else { return }
            try await dropConnections(of: index)
            // A wiped device is no longer leaving, nor gone: it joins with the code again.
            nodes[index].leavingSince = nil
            nodes[index].handover = nil
            nodes[index].hasLeft = false
            // What it wrote and nobody else holds is gone with the wipe: the group cannot keep it.
            let held = try forgetWritesHeldOnlyBy(index)
            let old = nodes[index].node!.dataDirectory.path
            nodes[index].node = nil
            cascadedBy[index] = nil
            try? FileManager.default.removeItem(atPath: old)
            nodes[index].retired.entries.formUnion(acknowledged[index]!.entries.intersection(held.entries))
            nodes[index].retired.strokes.formUnion(acknowledged[index]!.strokes.intersection(held.strokes))
            let fresh = try await install(index)
            try await vouching.vouch(for: fresh.deviceID, name: "n\(index)")
            await wrote(voucher)
        case .join(let index):
            guard nodes[index].node == nil, nodes[index].generation == 0 else { return }
            try await install(index)
        case .remove(let index, let by):
            guard nodes[index].node != nil, !nodes[index].removed, let remover = active(by) else { return }
            // The removed member, if hostile, is simply gone; the checker leaves it out either way.
            // A remover whose records do not know the device yet is refused, as `group remove` is.
            guard try remover.member(nodes[index].deviceID) != nil else { return }
            // So is a reinstalled remover that has not heard of its vouch yet: its records pin its
            // earlier key, and the others would not count a removal it signed.
            if let me = try remover.member(remover.deviceID), let pinned = me.key,
                pinned != remover.identity.publicKeyHex
            {
                return
            }
            _ = try await remover.removeMember(nodes[index].deviceID)
            // What only the removed device held (relayed from a device wiped since) leaves with it.
            _ = try forgetWritesHeldOnlyBy(index)
            nodes[index].removed = true
            cascadedBy[index] = nil
            try await dropConnections(of: index)
            await wrote(by)
        case .leave(let index):
            guard let node = nodes[index].node, !nodes[index].removed, !nodes[index].hasLeft,
                !nodes[index].isLeaving, index != schedule.byzantine
            else { return }
            nodes[index].handover = try await node.announceLeaving()
            nodes[index].leavingSince = now
            await wrote(index)
        case .rejoin(let index):
            guard nodes[index].hasLeft, let node = nodes[index].node else { return }
            _ = try node.joinGroup(code: joinCode)
            nodes[index].hasLeft = false
            // As the agent does on its first start in the group again.
            try await node.announceReturnIfLeft()
            await wrote(index)
        case .extendChain(let index): try await extendChain(index)
        }
    }

    /// Before a device's data leaves the group (wiped, or removed): earlier installs' writes that
    /// no other honest device in the group holds are no longer the group's to keep. Returns what
    /// the others hold.
    func forgetWritesHeldOnlyBy(_ index: Int) throws -> (entries: Set<String>, strokes: Set<String>) {
        var held: (entries: Set<String>, strokes: Set<String>) = ([], [])
        // The hostile member counts as no holder: it may withhold what it holds for good.
        // A device that left counts as no holder either: it gives nothing to the group any more.
        for other in nodes.indices where other != index && other != schedule.byzantine {
            guard let node = nodes[other].node, !nodes[other].removed, !nodes[other].hasLeft else { continue }
            held.entries.formUnion(try GroupChecker.entryIDs(node))
            held.strokes.formUnion(try GroupChecker.strokeIDs(node))
        }
        for node in nodes {
            node.retired.entries.formIntersection(held.entries)
            node.retired.strokes.formIntersection(held.strokes)
            node.heldWhenLeft.entries.formIntersection(held.entries)
            node.heldWhenLeft.strokes.formIntersection(held.strokes)
        }
        return held
    }

    func nextID(_ kind: String, _ index: Int) -> String {
        written += 1
        return "\(kind)\(index)-\(nodes[index].generation)-\(written)"
    }

    /// Runs an app's write on a node; returns the changes of the `items` table it made.
    @discardableResult
    func appWrite(
        _ index: Int,
        sql: String,
        _ arguments: StatementArguments,
        seed: Bool = false
    ) async throws -> [RowChange] {
        guard let node = nodes[index].node else { return [] }
        let before = try node.store.versionVector()
        try await node.write(seed: seed) { db in try db.execute(sql: sql, arguments: arguments) }
        // The change as its writer made it (nothing of it superseded yet): the reference model's input.
        let own = node.replicaID
        let made = try node.store.delta(since: before, maxRows: 100).rows.filter {
            $0.dot.replica == own && $0.key.table == "items"
        }
        itemChanges.formUnion(made)
        await wrote(index)
        return made
    }

    /// A local commit: wakes every session, and, when the commit did not sign the chain over
    /// its changes (more than a commit signs itself, or a chain already behind), the chain is
    /// extended shortly after, as the agent does before it sends (`chainCoversKnownWrites`).
    func wrote(_ index: Int) async {
        if nodes[index].node?.store.chainCoversKnownWrites == false {
            queue.schedule(.extendChain(node: index), at: now + 20)
        }
        wakeSessions(of: index)
    }

    func extendChain(_ index: Int) async throws {
        guard let node = nodes[index].node else { return }
        try await node.store.extendOwnChain()
        wakeSessions(of: index)
    }

    func wakeSessions(of index: Int) {
        for connection in connections.values {
            for side in 0..<2 where connection.ends(side) == index { schedulePump(connection, side: side, at: now + 1) }
        }
    }

    func schedulePump(_ connection: Connection, side: Int, at time: Int64) {
        guard connection.open, !connection.pumpScheduled[side] || time < connection.pumpAt[side] else { return }
        connection.pumpScheduled[side] = true
        connection.pumpAt[side] = time
        queue.schedule(.pump(connection: connection.id, side: side), at: time)
    }

    // MARK: Network

    func reachable(_ a: Int, _ b: Int) -> Bool {
        guard let mask = partition else { return true }
        return (mask >> a) & 1 == (mask >> b) & 1
    }

    /// Every device back, the network whole, everyone connected to everyone its records admit.
    /// A device that a member refuses because the group pinned another key for it (reinstalled,
    /// and the vouch for it never reached that member: its voucher was wiped too, say) gets what
    /// a user gives it after the refusal's advice: that member vouches for it.
    func healEverything() async throws {
        // A leave still waiting for a member has run past the command's timeout by now.
        try await completeLeaves()
        partition = nil
        for node in nodes where node.node != nil { node.online = true }
        for member in nodes.indices {
            guard let voucher = active(member) else { continue }
            // Not a device on its way out: a vouch after its leave would take it back in.
            for device in nodes.indices where device != member && !nodes[device].isLeaving {
                guard let node = active(device), let record = try voucher.member(node.deviceID), !record.isRemoved,
                    let key = record.key, key != node.identity.publicKeyHex
                else { continue }
                try await voucher.vouch(for: node.deviceID, name: "n\(device)")
                await wrote(member)
            }
        }
        for index in nodes.indices {
            try await extendChain(index)
            for other in nodes.indices where other > index { try await connect(index, other) }
        }
    }

    /// A handshake between two devices: each admits the other by its own records (a device the
    /// group pinned another key for, or removed, is refused); each then records the keys the
    /// other presented, as the agent does.
    func connect(_ a: Int, _ b: Int) async throws {
        guard a != b, let first = active(a), let second = active(b), reachable(a, b),
            !connections.values.contains(where: { Set([$0.ends.0, $0.ends.1]) == Set([a, b]) })
        else { return }
        for (one, other) in [(first, second), (second, first)] {
            if let member = try one.member(other.deviceID) {
                if member.isRemoved || (member.key.map { $0 != other.identity.publicKeyHex } ?? false) {
                    if Self.tracing {
                        print(
                            "t=\(now) \(one.identity.name) refuses \(other.identity.name): removed \(member.isRemoved)"
                        )
                    }
                    return
                }
            }
        }
        for (one, other) in [(first, second), (second, first)] {
            try await one.observe(
                other.deviceID,
                name: other.identity.name,
                key: other.identity.publicKeyHex,
                signingKey: other.identity.signingKey.publicKey.hexString
            )
        }
        let connection = Connection(
            id: nextConnection,
            ends: (a, b),
            idleKeepalive: idleKeepalive,
            now: clock.instant(now)
        )
        nextConnection += 1
        connections[connection.id] = connection
        for side in 0..<2 {
            let node = nodes[connection.ends(side)].node!
            let summary = try node.store.syncSummary()
            let opening = connection.sessions[side].opening(
                PeerState(versionVector: summary.versionVector, digest: summary.digest, hlc: summary.hlc),
                now: clock.instant(now)
            )
            send(opening, on: connection, from: side)
        }
        wakeSessions(of: a)
        wakeSessions(of: b)
    }

    func dropConnections(of index: Int) async throws {
        for connection in connections.values where connection.ends.0 == index || connection.ends.1 == index {
            try await drop(connection)
        }
    }

    /// The connection is lost: both sides see it close, and what was in flight is gone.
    func drop(_ connection: Connection) async throws {
        guard connection.open else { return }
        connection.open = false
        for side in 0..<2 { _ = connection.sessions[side].peerClosed() }
        connections[connection.id] = nil
    }

    /// Sends `message` from `side`: encoded as on the wire, delivered in order after a delay.
    func send(_ message: WireMessage, on connection: Connection, from side: Int) {
        guard connection.open else { return }
        let toward = 1 - side
        let delay: Int64 =
            network.chance(0.05)
            ? Int64.random(in: 50...400, using: &network) : Int64.random(in: 1...25, using: &network)
        let at = max(connection.lastDelivery[toward], now + delay)
        connection.lastDelivery[toward] = at
        connection.inFlight[toward].append(message.wireBytes())
        connection.sessions[side].sent(message, at: clock.instant(now))
        outcome.messages += 1
        queue.schedule(.deliver(connection: connection.id, toward: toward), at: at)
    }

    func deliver(_ id: Int, toward side: Int) async throws {
        guard let connection = connections[id], connection.open, !connection.inFlight[side].isEmpty else { return }
        let bytes = connection.inFlight[side].removeFirst()
        // Now and then a link drops, as Wi-Fi does; or the path duplicates or reorders a frame,
        // which the transport's authentication turns into the end of the connection (§4).
        if network.chance(0.002) {
            try await drop(connection)
            return
        }
        if network.chance(0.001) {
            end(
                connection,
                side: side,
                connection.sessions[side].receiveFailed("a frame failed authentication (duplicated or reordered)")
            )
            return
        }
        guard let node = nodes[connection.ends(side)].node else { return }
        let message: WireMessage
        do {
            message = try WireMessage.decode(bytes)
        } catch {
            end(connection, side: side, connection.sessions[side].receiveFailed(error.description))
            return
        }
        switch connection.sessions[side].received(message, now: clock.instant(now)) {
        case .nothing: break
        case .wakeSender:
            if case .state = message { try askToSettleClaims(connection, side: side, node: node) }
            schedulePump(connection, side: side, at: now + 1)
        case .merge(let delta): try await merge(delta, on: connection, side: side, node: node)
        case .mergeRecords(let records):
            do {
                _ = try await node.mergeHandedRecords(records)
            } catch {
                end(connection, side: side, connection.sessions[side].mergeFailed(error.message, clockSkew: false))
            }
        case .end(let why): end(connection, side: side, why)
        }
    }

    func merge(_ delta: Delta, on connection: Connection, side: Int, node: LANSyncNode) async throws {
        let signed: LANSyncNode.SignedMergeOutcome
        do {
            // As a session does: the chain's hashes worked out ahead from where the deltas before
            // led (a hostile delta's guess, or a range left out, makes a fold that is not used).
            let folded = try node.store.foldingAhead(
                node.store.check(delta, signed: true),
                expected: connection.expectedHeads[side]
            )
            connection.expectedHeads[side] = folded.expected
            signed = try await node.mergeSigned(folded.checked, maxSkewMilliseconds: 60_000)
        } catch {
            outcome.refusedDeltas += 1
            if Self.tracing {
                print(
                    "t=\(now) n\(connection.ends(side)) <- n\(connection.ends(1 - side)) refused \(Self.traced(delta.coverage)): \(error)"
                )
            }
            end(connection, side: side, connection.sessions[side].mergeFailed("\(error)", clockSkew: false))
            return
        }
        if Self.tracing {
            print(
                "t=\(now) n\(connection.ends(side)) <- n\(connection.ends(1 - side)) merged \(Self.traced(delta.coverage)) notTaken \(Self.traced(signed.notTaken))"
            )
        }
        _ = connection.sessions[side].mergeFinished(
            ourDigest: { try? node.store.syncSummary().digest },
            notTaken: signed.notTaken,
            changedAnything: signed.outcome.changedAnything,
            keysKnown: signed.keysKnown,
            ourVector: try node.store.versionVector()
        )
        try askToSettleClaims(connection, side: side, node: node)
        // Every session of this node hears of the merge (its state changed), this one first.
        schedulePump(connection, side: side, at: now + 1)
        if signed.outcome.changedAnything {
            wakeSessions(of: connection.ends(side))
            // As the agent does when a merge brings this device's own "left" record from before
            // it joined again (a reinstall learns it from a member).
            let ownLeftRecord = MemberKeys.left(node.deviceID.description)
            if !nodes[connection.ends(side)].isLeaving, !nodes[connection.ends(side)].hasLeft,
                delta.preferences.contains(where: { $0.key == ownLeftRecord })
            {
                try await node.announceReturnIfLeft()
            }
            try await completeLeaves()
        }
    }

    func askToSettleClaims(_ connection: Connection, side: Int, node: LANSyncNode) throws {
        let claims = try node.store.openClaims()
        guard !claims.isEmpty else { return }
        outcome.claimsOpened += 1
        let asked = connection.sessions[side].claimsOpen(claims, ourVector: try node.store.versionVector())
        if Self.tracing {
            print(
                "t=\(now) n\(connection.ends(side)) claims open \(Self.traced(claims)) with n\(connection.ends(1 - side)): \(asked)"
            )
        }
        if case .wakeSender = asked {
            schedulePump(connection, side: side, at: now + 1)
        }
    }

    /// Ends one side's session as the machine decided (its goodbye sent, if any), and the connection with it.
    func end(_ connection: Connection, side: Int, _ why: SessionEnd?) {
        guard let why, connection.open else { return }
        if let goodbye = why.goodbye { send(goodbye, on: connection, from: side) }
        connection.open = false
        _ = connection.sessions[1 - side].peerClosed()
        connections[connection.id] = nil
    }

    /// The sending side of one session, as the agent's `SyncSession.pushMissing`: replies owed,
    /// then every batch the peer lacks (signed ranges, up to what this node holds now), then our
    /// state when it is owed.
    func pump(_ id: Int, side: Int) async throws {
        guard let connection = connections[id], connection.open, let node = nodes[connection.ends(side)].node else {
            return
        }
        connection.pumpScheduled[side] = false
        for reply in connection.sessions[side].takeReplies() {
            if case .resend(let replica, let counter) = reply, !connection.noteResend(side: side, replica, counter) {
                outcome.failure =
                    "n\(connection.ends(side)) asked n\(connection.ends(1 - side)) for replica \(replica) after \(counter) "
                    + "more than \(Self.resendsWithoutProgress) times without progress"
                return
            }
            if Self.tracing {
                print("t=\(now) n\(connection.ends(side)) -> n\(connection.ends(1 - side)) reply \(reply)")
            }
            send(reply, on: connection, from: side)
        }
        let summary = try node.store.syncSummary()
        let ours = PeerState(versionVector: summary.versionVector, digest: summary.digest, hlc: summary.hlc)
        var batches = 0
        while connection.open, batches < 64 {
            let known = connection.sessions[side].peerKnown
            guard ours.versionVector.counters.contains(where: { $0.value > known[$0.key] }) else { break }
            let delta = try node.store.signedDelta(since: known, upTo: ours.versionVector, maxRows: 2_000)
            if delta.isEmpty { break }
            batches += 1
            if Self.tracing {
                print(
                    "t=\(now) n\(connection.ends(side)) -> n\(connection.ends(1 - side)) sends \(Self.traced(delta.coverage)) prefs \(delta.preferences.count) stubs \(delta.preferenceStubs.count)"
                )
            }
            let hostile =
                connection.ends(side) == schedule.byzantine
                ? try await hostileCopy(of: delta, node: node, peerKnown: known) : nil
            if hostile != nil { outcome.hostileSends += 1 }
            // The machine takes the batch as sent whatever the hostile member does with it.
            let message = try connection.sessions[side].outgoing(delta) { try node.store.syncSummary().digest }
            switch hostile {
            case .withhold?: continue
            case .replace(let altered)?: send(.delta(altered), on: connection, from: side)
            case .records(let records)?:
                send(.records(records), on: connection, from: side)
                send(message, on: connection, from: side)
            case .prepend(let extra)?:
                send(.delta(extra), on: connection, from: side)
                send(message, on: connection, from: side)
            case nil: send(message, on: connection, from: side)
            }
        }
        if case .send(let state) = connection.sessions[side].closingState(now: clock.instant(now), { ours }) {
            send(state, on: connection, from: side)
        }
        scheduleTimer(connection, side: side)
    }

    /// Schedules one side's timer at its session's next deadline, unless one is due sooner. A
    /// timer that fires early (the deadline moved later) finds nothing due and schedules again.
    func scheduleTimer(_ connection: Connection, side: Int) {
        guard connection.open, let deadline = connection.sessions[side].nextDeadline else { return }
        let at = now + clock.milliseconds(until: deadline, from: now)
        guard !connection.timerScheduled[side] || at < connection.timerAt[side] else { return }
        connection.timerScheduled[side] = true
        connection.timerAt[side] = at
        queue.schedule(.timer(connection: connection.id, side: side), at: at)
    }

    /// A session's timer, as the agent's `SyncSession` carries it out.
    func timerFired(_ id: Int, side: Int) {
        guard let connection = connections[id], connection.open, connection.timerAt[side] <= now else { return }
        connection.timerScheduled[side] = false
        switch connection.sessions[side].timerFired(now: clock.instant(now)) {
        case .nothing: break
        case .wakeSender: schedulePump(connection, side: side, at: now + 1)
        case .end(let why):
            end(connection, side: side, why)
            return
        }
        scheduleTimer(connection, side: side)
    }
}

/// The simulation's clock: milliseconds since the epoch, moved only by the event loop.
final class SimulatedClock: Sendable {
    private let current = Mutex<Int64>(1_800_000_000_000)
    private let origin = ContinuousClock.now

    var milliseconds: Int64 { current.withLock { $0 } }
    func set(_ simulated: Int64) { current.withLock { $0 = 1_800_000_000_000 + simulated } }
    /// A machine instant for simulated time `simulated` (the session machine reads instants).
    func instant(_ simulated: Int64) -> ContinuousClock.Instant { origin + .milliseconds(simulated) }
    /// Milliseconds from simulated time `from` until `instant` (at least 1).
    func milliseconds(until instant: ContinuousClock.Instant, from simulated: Int64) -> Int64 {
        let delta = instant - self.instant(simulated)
        return max(1, delta.components.seconds * 1000 + delta.components.attoseconds / 1_000_000_000_000_000)
    }
}

/// One simulated device across its installs.
final class SimulatedNode {
    let index: Int
    /// Its machine's device ID: the same across reinstalls.
    let deviceID: DeviceID
    /// Keys and replica IDs for each install, from the seed.
    var keys: SeededRandom
    var node: LANSyncNode?
    var generation = 0
    var online = false
    var removed = false
    /// When it started leaving (`Schedule.Action.leave`): `lansync group leave` gives up on
    /// telling a member after its timeout and leaves all the same. The leave is done once another
    /// honest device took everything of `handover` (`completeLeaves`).
    var leavingSince: Int64?
    /// What a member must take before the leave is done, as `announceLeaving` said.
    var handover: LeaveHandover?
    /// Said it leaves, and the leave is not done yet.
    var isLeaving: Bool { leavingSince != nil }
    /// Left the group (its secret dropped): it takes part in nothing until it joins again.
    var hasLeft = false
    /// What it had written when its leave was done: held by a member then, so still the group's.
    var heldWhenLeft: (entries: Set<String>, strokes: Set<String>) = ([], [])
    var schemaVersion = 0
    /// Writes of earlier installs that others held when it was wiped: still the group's.
    var retired: (entries: Set<String>, strokes: Set<String>) = ([], [])

    init(index: Int, deviceID: DeviceID, keys: SeededRandom) {
        self.index = index
        self.deviceID = deviceID
        self.keys = keys
    }
}

/// A connection between two nodes: a session machine at each end, and what is in flight toward each.
final class Connection {
    let id: Int
    let ends: (Int, Int)
    var sessions: [SyncProtocol]
    var inFlight: [[[UInt8]]] = [[], []]
    var lastDelivery: [Int64] = [0, 0]
    var open = true
    var pumpScheduled = [false, false]
    var pumpAt: [Int64] = [0, 0]
    var timerScheduled = [false, false]
    var timerAt: [Int64] = [0, 0]
    /// Per side and replica: the last place asked for again, and how often.
    var resends: [[ReplicaID: (counter: UInt64, times: Int)]] = [[:], [:]]
    /// Per side: where the deltas checked so far lead each chain (`ReplicaStore.foldingAhead`).
    var expectedHeads: [[ReplicaID: ChainHead]] = [[:], [:]]

    init(id: Int, ends: (Int, Int), idleKeepalive: Duration, now: ContinuousClock.Instant) {
        self.id = id
        self.ends = ends
        sessions = (0..<2).map { _ in
            SyncProtocol(
                hasher: ReplicaStore.elementHasher,
                keepalive: GroupSimulation.keepalive,
                idleKeepalive: idleKeepalive,
                announceInterval: .milliseconds(250),
                now: now
            )
        }
    }

    func ends(_ side: Int) -> Int { side == 0 ? ends.0 : ends.1 }

    /// Counts a request to send `replica` again after `counter`; false past the bound.
    func noteResend(side: Int, _ replica: ReplicaID, _ counter: UInt64) -> Bool {
        var entry = resends[side][replica] ?? (counter, 0)
        if entry.counter != counter { entry = (counter, 0) }
        entry.times += 1
        resends[side][replica] = entry
        return entry.times <= GroupSimulation.resendsWithoutProgress
    }
}

/// The app the simulated devices run: rows edited column by column, an INTEGER and a REAL
/// counter, a max and a min column, an append-only log of strokes that go with their item, and a
/// second schema version that adds a column.
enum AppSchema {
    /// The text an app write puts in a column: mostly "v<value>", and a third of the time "café"
    /// spelled one of two ways, so that edits respell a value (another value to SQLite and to
    /// every peer, though Swift compares the two as one string).
    static func text(_ value: Int) -> String { value % 3 == 1 ? "caf" + spelledE(value / 3) : "v\(value)" }

    /// "é" as one code point or as "e" and a combining accent, by `value`'s parity.
    static func spelledE(_ value: Int) -> String { value % 2 == 0 ? "\u{e9}" : "e\u{301}" }

    static let first = """
        -- lansync: counter items.total
        -- lansync: max items.best
        -- lansync: min items.low
        -- lansync: counter items.km
        CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT, note TEXT, level INTEGER NOT NULL DEFAULT 0, best INTEGER NOT NULL DEFAULT 0,
            low INTEGER, km REAL NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0);
        -- lansync: append-only strokes
        CREATE TABLE strokes (id TEXT PRIMARY KEY, watts INTEGER, item TEXT REFERENCES items(id) ON DELETE CASCADE);
        """
    static let second = first.replacingOccurrences(
        of: "total INTEGER NOT NULL DEFAULT 0);",
        with: "total INTEGER NOT NULL DEFAULT 0, extra TEXT);"
    )
}
