import Foundation
import LANSync
import LANSyncStore
import LANSyncWire
import LANSyncCore

/// `--stages`: what each step of a catch-up costs per row, one thread, no network, so that a
/// change to one step can be measured without the noise of a whole catch-up. Each step runs over
/// the same 2,000-row batches the agents send, best of several passes.
enum StageBenchmark {
    static func run(root: String) async throws {
        let rows = 100_000
        let batch = 2_000
        let now = Timestamps.nowMilliseconds()
        let delta = Workload.peerDelta(count: rows, startMilliseconds: now - 3_600_000)
        let batches = stride(from: 0, to: rows, by: batch).map { start in
            Delta(entries: Array(delta.entries[start..<min(start + batch, rows)]),
                coverage: [.init(replica: delta.coverage[0].replica, from: UInt64(start), through: UInt64(min(start + batch, rows)))])
        }
        print("Per-row cost of each catch-up step (\(rows) rows in batches of \(batch), one thread, best of 5):")
        func measure(_ label: String, _ body: () throws -> Void) rethrows {
            var best = Duration.seconds(1_000)
            for _ in 0..<5 {
                let start = ContinuousClock.now
                try body()
                best = min(best, ContinuousClock.now - start)
            }
            print(label.padding(toLength: 40, withPad: " ", startingAt: 0)
                + String(format: "%8.3f µs/row", best.seconds * 1e6 / Double(rows)))
        }
        var encoded: [[UInt8]] = []
        measure("encode + compress (sender)") { encoded = batches.map { WireMessage.delta($0).wireBytes() } }
        var decoded: [Delta] = []
        try measure("decompress + decode (receiver)") {
            decoded = try encoded.map { bytes in
                guard case .delta(let delta) = try WireMessage.decode(bytes) else { fatalError("not a delta") }
                return delta
            }
        }
        var checked: [CheckedDelta] = []
        measure("  of which: delta.problem()") { for delta in decoded { precondition(delta.problem() == nil) } }
        measure("  of which: payload JSON check") {
            for delta in decoded { for index in delta.entries.indices { precondition(CompactJSON.isCompact(delta.entries[index].payload)) } }
        }
        measure("  of which: canonical bytes + hash") {
            var bytes = [UInt8]()
            for delta in decoded {
                for index in delta.entries.indices {
                    bytes.removeAll(keepingCapacity: true)
                    delta.entries[index].appendCanonicalBytes(to: &bytes)
                    _ = ReplicaStore.elementHasher.hash(bytes)
                }
            }
        }
        try measure("check + hash (receiver)") { checked = try decoded.map { try ReplicaStore.check($0) } }

        // The database steps: a fresh replica per pass for the merge; reads from the last one.
        var pass = 0
        var store: ReplicaStore?
        func freshStore() throws -> ReplicaStore {
            pass += 1
            return try ReplicaStore.openOrCreate(path: root + "/stages-\(pass).sqlite", device: Workload.device).0
        }
        var best = Duration.seconds(1_000)
        for _ in 0..<5 {
            let target = try freshStore()
            let start = ContinuousClock.now
            for batch in checked { _ = try await target.merge(batch) }
            best = min(best, ContinuousClock.now - start)
            store = target
        }
        print("merge (receiver's writer)".padding(toLength: 40, withPad: " ", startingAt: 0)
            + String(format: "%8.3f µs/row", best.seconds * 1e6 / Double(rows)))
        try measure("read batches (sender)") {
            var known = VersionVector()
            while true {
                let next = try store!.delta(since: known, maxRows: batch)
                if next.isEmpty { break }
                known.advance(by: next.coverage)
            }
        }
    }
}
