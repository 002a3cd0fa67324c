import Foundation
import LANSync
import LANSyncCore
import LANSyncStore
import LANSyncWire

/// `--stages`: what each step of a catch-up costs per row, on one thread with no network, so that
/// a change to one step can be measured without the noise of a whole catch-up. Every step runs
/// over the same 2,000-row batches the agents send; each figure is the best of five passes.
enum StageBenchmark {
    static let rows = 100_000
    static let batchRows = 2_000
    static let passes = 5

    static func run(root: String) async throws {
        let batches = Workload.peerBatches(count: rows, size: batchRows)
        print(
            "Per-row cost of each catch-up step (\(rows) rows in batches of \(batchRows), one thread, best of \(passes)):"
        )

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
        try measure("check + hash (receiver)") { checked = try decoded.map { try ReplicaStore.check($0) } }
        measure("  of which: delta.problem()") { for delta in decoded { precondition(delta.problem() == nil) } }
        measure("    of which: payload JSON check") {
            for delta in decoded {
                for index in delta.entries.indices { precondition(CompactJSON.isCompact(delta.entries[index].payload)) }
            }
        }
        measure("  of which: canonical bytes + hash") {
            var buffer = [UInt8]()
            for delta in decoded {
                for index in delta.entries.indices {
                    _ = ReplicaStore.elementHasher.hash(delta.entries[index], reusing: &buffer)
                }
            }
        }

        // The database steps: each merge pass into a new replica; the reads from the last one.
        var best = Duration.seconds(1_000)
        var merged: [ReplicaStore] = []
        for pass in 1...passes {
            let target = try ReplicaStore.openOrCreate(path: root + "/stages-\(pass).sqlite", device: Workload.device).0
            let start = ContinuousClock.now
            for batch in checked { _ = try await target.merge(batch) }
            best = min(best, ContinuousClock.now - start)
            merged.append(target)
        }
        report("merge (receiver's writer)", best)
        let source = merged[merged.count - 1]
        try measure("read batches (sender)") {
            var known = VersionVector()
            while true {
                let next = try source.delta(since: known, maxRows: batchRows)
                if next.isEmpty { break }
                known.advance(by: next.coverage)
            }
        }
    }

    static func measure(_ label: String, _ body: () throws -> Void) rethrows {
        var best = Duration.seconds(1_000)
        for _ in 0..<passes {
            let start = ContinuousClock.now
            try body()
            best = min(best, ContinuousClock.now - start)
        }
        report(label, best)
    }

    static func report(_ label: String, _ best: Duration) {
        print(
            label.padding(toLength: 40, withPad: " ", startingAt: 0)
                + String(format: "%8.3f µs/row", best.seconds * 1e6 / Double(rows))
        )
    }
}
