import Foundation
import GRDB
import LANSync
import LANSyncCore
import LANSyncStore

/// What must hold of a simulated group once its network healed (see `GroupSimulation`).
struct GroupChecker {
    let simulation: GroupSimulation

    /// The devices the promises are about: set up, still in the group, and honest.
    var honest: [(index: Int, node: LANSyncNode)] {
        simulation.nodes.compactMap { simulated in
            guard let node = simulated.node, !simulated.removed, !simulated.hasLeft,
                simulated.index != simulation.schedule.byzantine
            else {
                return nil
            }
            return (simulated.index, node)
        }
    }

    /// Whether every honest device holds the same state, with no loss claim open. In a Byzantine
    /// run, claims open alike on every honest device are the hostile member's: it passed off as
    /// lost a change that no honest device holds (one of a device wiped since), which no honest
    /// peer can ever settle; the value is lost with the device, as anything only it relayed.
    func converged() async throws -> Bool {
        let devices = honest
        guard let first = devices.first else { return true }
        let reference = try first.node.store.syncSummary()
        let claims = try first.node.store.openClaims()
        // A device that left or was removed may have said a write of its own lost to a later
        // one it took with it (past the last batch a member got): nobody can settle that claim,
        // and every honest device keeps the same one.
        let departed = Set(simulation.nodes.filter { $0.hasLeft || $0.removed }.compactMap { $0.node?.replicaID })
        if simulation.schedule.byzantine == nil, !claims.keys.allSatisfy(departed.contains) { return false }
        for (_, node) in devices {
            let summary = try node.store.syncSummary()
            guard summary.digest == reference.digest, summary.versionVector == reference.versionVector,
                try node.store.openClaims() == claims
            else { return false }
        }
        return true
    }

    /// Which device first differs from the first honest one, and how.
    func divergence(_ headline: String) async throws -> String {
        let devices = honest
        var lines = [headline]
        for (index, node) in devices {
            let summary = try node.store.syncSummary()
            let status = try node.status()
            let strokes = try Self.strokeIDs(node).count
            let items = try node.read { db in
                try Row.fetchAll(db, sql: Self.itemsSQL).map(\.description).joined(separator: " ")
            }
            lines.append(
                "  n\(index): digest \(summary.digest.description.prefix(12)), \(status.entries) entries, "
                    + "\(strokes) strokes, items \(items), vector \(summary.versionVector), "
                    + "open claims \(try node.store.openClaims())"
            )
        }
        // The elements (rows, entries, preferences) a device holds otherwise than the first one.
        var reference: Set<String>?
        for (index, node) in devices {
            var elements = Set<String>()
            try node.store.forEachRow(
                entry: { elements.insert("entry \($0)") },
                preference: { elements.insert("preference \($0)") },
                row: { key, state in elements.insert("row \(key) \(state)") }
            )
            guard let reference else {
                reference = elements
                continue
            }
            let differing =
                elements.subtracting(reference).sorted().map { "+ \($0)" }
                + reference.subtracting(elements).sorted().map { "- \($0)" }
            guard !differing.isEmpty else { continue }
            lines.append("  n\(index) against n\(devices[0].index), \(differing.count) elements differ, among them:")
            for element in differing.prefix(4) { lines.append("    \(element.prefix(600))") }
        }
        // The replicas some hold and others lack, and whether those others know their key.
        var all = VersionVector()
        for (_, node) in devices { all = all.merged(with: try node.store.versionVector()) }
        for (index, node) in devices {
            let vector = try node.store.versionVector()
            let keys = try node.replicaSigningKeys()
            for (replica, counter) in all.counters.sorted(by: { $0.key < $1.key }) where vector[replica] < counter {
                let held = try devices.lazy.compactMap { try $0.node.preference(MemberKeys.replica(replica)) }.first
                var record = "no record here"
                if let held, let decoded = try? JSONDecoder().decode(ReplicaRecord.self, from: Data(held.utf8)),
                    let member = try node.members().first(where: { $0.deviceID == decoded.deviceID })
                {
                    record =
                        "its record (held elsewhere) names \(member.name) with key \(decoded.signingKey.prefix(8)); "
                        + "keys pinned for it here: \(member.signingKeysEver.map { $0.prefix(8) })"
                }
                for (other, holder) in devices where try holder.store.versionVector()[replica] == counter {
                    let delta = try holder.store.signedDelta(since: vector, maxRows: 2_000)
                    let range = delta.coverage.first { $0.replica == replica }
                    lines.append(
                        "    n\(other) would send it \(range.map { "(\($0.from), \($0.through)] genesis \($0.genesis?.counter.description ?? "none") record \($0.record != nil)" } ?? "nothing")"
                    )
                    let keys = try node.replicaSigningKeys(alsoIn: delta)
                    lines.append(
                        "    with that, the key is known: \(keys[replica] != nil); verified head here: \(try node.store.verifiedHeads()[replica].map { "\($0.counter)" } ?? "none")"
                    )
                    break
                }
                lines.append(
                    "  n\(index) holds \(vector[replica]) of \(counter) of replica \(replica): \(record), "
                        + (keys[replica] == nil ? "no key" : "key known")
                )
            }
        }
        return lines.joined(separator: "\n")
    }

    /// The promises, once converged: every acknowledged write of a device still in the group is
    /// on every honest device exactly once, and the app's tables are the same everywhere.
    func check() async throws -> String? {
        let devices = honest
        var expectedEntries = Set<String>()
        var expectedStrokes = Set<String>()
        for simulated in simulation.nodes where !simulated.removed && simulated.index != simulation.schedule.byzantine {
            // A device that left: what it had written when a member took the news of its leave.
            let (entries, strokes) =
                simulated.hasLeft ? simulated.heldWhenLeft : simulation.acknowledged[simulated.index] ?? ([], [])
            expectedEntries.formUnion(entries)
            expectedStrokes.formUnion(strokes)
            expectedEntries.formUnion(simulated.retired.entries)
            expectedStrokes.formUnion(simulated.retired.strokes)
        }
        expectedStrokes.subtract(simulation.cascaded)
        let cascades = simulation.cascadedBy.filter { $0.key != simulation.schedule.byzantine }.values.joined()
        var tables: String?
        for (index, node) in devices {
            // The stored states read back as merged (an app-table row's state names the values
            // its row holds): the digest made from them is the running one.
            if try node.store.recomputeDigest() != node.store.status().digest {
                return "n\(index)'s stored rows do not read back as merged: the digest made from them differs"
            }
            let entries = try node.store.readInternals { db in try String.fetchAll(db, sql: "SELECT id FROM entries") }
            if Set(entries).count != entries.count { return "n\(index) holds an entry twice" }
            if let missing = expectedEntries.subtracting(entries).sorted().first {
                return
                    "n\(index) lacks the acknowledged entry \(missing) (of \(expectedEntries.subtracting(entries).count) missing)"
            }
            let strokes = try Self.strokeIDs(node)
            if let missing = expectedStrokes.subtracting(strokes).sorted().first {
                return "n\(index) lacks the acknowledged stroke \(missing)"
            }
            // Only a device that holds the delete must have lost its strokes: a delete that no
            // honest member took before its device left went with that device (Byzantine seed
            // 235017: the one device that held it left the group too).
            let vector = try node.store.versionVector()
            let gone = cascades.filter { vector.covers($0.delete) }.reduce(
                into: Set<String>()
            ) { $0.formUnion($1.strokes) }
            if let kept = gone.intersection(strokes).sorted().first {
                return "n\(index) holds stroke \(kept), which went with its deleted item"
            }
            let shown = try node.read { db in
                try Row.fetchAll(db, sql: Self.itemsSQL).map(\.description).joined(separator: "\n")
            }
            if let tables, SQLValue.text(tables) != .text(shown) {
                return "n\(index)'s items table differs from n\(devices[0].index)'s:\n\(shown)\nagainst\n\(tables)"
            }
            tables = shown
        }
        // Who left and who is back, as every honest device lists the members (in an honest run:
        // a hostile member could hide a device's own "left" record behind a later write of its own).
        if simulation.schedule.byzantine == nil {
            for (index, node) in devices {
                let members = try node.members()
                let allRecords = try node.records()
                for simulated in simulation.nodes where simulated.node != nil && !simulated.removed {
                    guard let member = members.first(where: { $0.deviceID == simulated.deviceID.description }),
                        !member.isRemoved
                    else { continue }
                    let device = simulated.deviceID.description
                    let records = allRecords.filter {
                        $0.key == MemberKeys.left(device) || $0.key == MemberKeys.member(device)
                    }
                    // The news of a leave can be lost: with the only devices that took it, wiped since.
                    let news = records.contains { write in
                        write.key == MemberKeys.left(device)
                            && write.value.flatMap { try? JSONDecoder().decode(LeftRecord.self, from: Data($0.utf8)) }?
                                .left == true
                    }
                    // A leave no member took the news of yet (it found nobody) is one in its own records.
                    let gone = simulated.hasLeft || simulated.isLeaving
                    if member.hasLeft != gone, member.hasLeft || news {
                        let records = records.map {
                            "\($0.key) = \($0.value ?? "unset") by \($0.originDevice) at \($0.hlc)"
                        }
                        return "n\(index) lists n\(simulated.index) as \(member.hasLeft ? "left" : "a member"), "
                            + "but it \(gone ? "left" : "is in the group"); its records: "
                            + records.joined(separator: "; ")
                    }
                }
            }
        }
        if let (index, node) = devices.first {
            let expected = try referenceItems(heldBy: node)
            let shown = try node.read { db in try Row.fetchAll(db, sql: Self.itemsSQL).map(\.description) }
            if shown.map(SQLValue.text) != expected.map(SQLValue.text) {
                return
                    "the items table differs from the reference model of the merge rules (n\(index)):\n\(shown.joined(separator: "\n"))\n"
                    + "against the model's\n\(expected.joined(separator: "\n"))"
            }
        }
        return nil
    }

    /// The `items` table as a device shows it, and as `referenceItems` gives it.
    static let itemsSQL = "SELECT id, name, note, level, best, low, km, total FROM items ORDER BY id"

    /// The `items` table the merge rules give for every change its writers made that the group
    /// holds (its dot within the converged version vector), folded with the rules as stated over
    /// the set of changes, not applied one at a time: per row the highest causal length decides
    /// whether it exists (odd: it does); each column takes the value of the greatest stamp (HLC,
    /// replica ID, counter) among that life's changes that wrote it, then the greater value; the
    /// counter column sums each replica's latest total of that life (docs/protocol.md §6).
    func referenceItems(heldBy node: LANSyncNode) throws -> [String] {
        let vector = try node.store.versionVector()
        // Cells that claims still open say lost at their sender: this device lacks them until
        // what superseded them comes (in a Byzantine run, the hostile member may hold that alone).
        let claimed = try node.store.openClaimedColumns()
        let held = simulation.itemChanges.filter { $0.dot.counter <= vector[$0.dot.replica] }.map { change in
            guard let lost = claimed[change.dot] else { return change }
            return RowChange(
                key: change.key,
                kind: change.kind,
                causalLength: change.causalLength,
                hlc: change.hlc,
                dot: change.dot,
                values: change.values.filter { !lost.contains($0.column) },
                totals: change.totals
            )
        }
        var rows: [(id: String, shown: String)] = []
        for (key, changes) in Dictionary(grouping: held, by: \.key) {
            let life = changes.map(\.causalLength).max() ?? 0
            guard life % 2 == 1, case .text(let id)? = key.primaryKey.first else { continue }
            let current = changes.filter { $0.causalLength == life }
            var values: [String: SQLValue] = [:]
            for column in ["name", "note", "level"] {
                let writes = current.flatMap { change in
                    change.values.filter { $0.column == column }.map { (change.stamp, $0.value) }
                }
                // A column no change of this life wrote (its insert did not arrive) shows its default.
                values[column] =
                    writes.max { a, b in a.0 < b.0 || (a.0 == b.0 && a.1 < b.1) }?.1
                    ?? (column == "level" ? .integer(0) : .null)
            }
            /// A counter's value: the sum of each replica's latest total of this life.
            func sum(_ column: String) -> Int64 {
                var totals: [ReplicaID: (counter: UInt64, total: Int64)] = [:]
                for change in current {
                    for total in change.totals where total.column == column {
                        if let latest = totals[change.dot.replica], latest.counter >= change.dot.counter { continue }
                        totals[change.dot.replica] = (change.dot.counter, total.total)
                    }
                }
                return totals.values.reduce(Int64(0)) { $0 &+ $1.total }
            }
            let total = sum("total")
            // The REAL counter: its totals are millionths.
            let km = Double(sum("km")) / 1_000_000
            // The one-way column: the greatest value any write of this life gave it (each
            // replica's total is the greatest it wrote), or its default.
            let best = current.flatMap { $0.totals.filter { $0.column == "best" }.map(\.total) }.max() ?? 0
            // Its `min` twin: the smallest, or NULL (no default) when no write gave it one.
            let low = current.flatMap { $0.totals.filter { $0.column == "low" }.map(\.total) }.min()
            let row: Row = [
                "id": id, "name": values["name"]?.databaseValue, "note": values["note"]?.databaseValue,
                "level": values["level"]?.databaseValue, "best": best, "low": low, "km": km, "total": total,
            ]
            rows.append((id, row.description))
        }
        // In SQLite's order (`ORDER BY id`): by the UTF-8 bytes, as `SQLValue` orders TEXT.
        return rows.sorted { SQLValue.text($0.id) < .text($1.id) }.map(\.shown)
    }

    static func entryIDs(_ node: LANSyncNode) throws -> Set<String> {
        Set(try node.store.readInternals { db in try String.fetchAll(db, sql: "SELECT id FROM entries") })
    }

    static func strokeIDs(_ node: LANSyncNode) throws -> Set<String> {
        Set(try node.read { db in try String.fetchAll(db, sql: "SELECT id FROM strokes") })
    }

    /// The strokes of `item` that `node` shows.
    static func strokeIDs(_ node: LANSyncNode, of item: String) throws -> Set<String> {
        Set(
            try node.read { db in
                try String.fetchAll(db, sql: "SELECT id FROM strokes WHERE item = ?", arguments: [item])
            }
        )
    }
}
