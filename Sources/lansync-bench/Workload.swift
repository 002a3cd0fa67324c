import Foundation
import LANSync

/// The rows every measurement uses: AAC symbol taps with about 200-byte JSON payloads, so the
/// baseline and LANSync write exactly the same bytes.
enum Workload {
    /// Payloads made once up front, so generating them costs nothing inside a timed loop.
    static let payloads = (0..<4_096).map(makePayload)

    static func payload(_ index: Int) -> String { payloads[index % payloads.count] }

    private static func makePayload(_ index: Int) -> String {
        let labels = ["more", "stop", "I want juice", "all done", "help", "play", "yes", "no"]
        let session = String(format: "%08x-4c1e-4f7a-9b2d-%012x", index / 500, index % 997)
        return "{\"symbol_id\":\(1_000 + index % 400),\"label\":\"\(labels[index % labels.count])\","
            + "\"language\":\"en-GB\",\"category_path\":[\"core\",\"requests\",\"food-and-drink\"],"
            + "\"grid_position\":[\(index % 6),\(index % 8)],\"session_id\":\"\(session)\","
            + "\"board\":\"home-4x6\",\"input\":\"touch\",\"duration_ms\":\(80 + index % 300)}"
    }

    static let device = DeviceID(bytes: [UInt8](repeating: 0x42, count: 16))!

    /// A delta of `count` entries from a peer replica, as a peer would send it.
    static func peerDelta(count: Int, startMilliseconds: UInt64) -> Delta {
        let replica = ReplicaID(high: 0xABCD_0000_0000_0001, low: UInt64(count))
        var entries = [Entry]()
        entries.reserveCapacity(count)
        for index in 0..<count {
            let hlc = HybridTimestamp(
                physicalMilliseconds: startMilliseconds + UInt64(index / 16),
                logical: UInt16(index % 16)
            )
            entries.append(
                Entry(
                    id: EntryIDs.make(hlc: hlc),
                    stream: "symbol_taps",
                    originDevice: device,
                    dot: Dot(replica: replica, counter: UInt64(index + 1)),
                    hlc: hlc,
                    wallMilliseconds: Int64(hlc.physicalMilliseconds),
                    payload: payload(index)
                )
            )
        }
        return Delta(entries: entries, coverage: [.init(replica: replica, from: 0, through: UInt64(count))])
    }

    /// `peerDelta(count:)` cut into batches of `size` entries, each covering its own counters, as
    /// an agent sends a catch-up.
    static func peerBatches(count: Int, size: Int) -> [Delta] {
        let delta = peerDelta(count: count, startMilliseconds: Timestamps.nowMilliseconds() - 3_600_000)
        let replica = delta.coverage[0].replica
        return stride(from: 0, to: count, by: size).map { start in
            let end = min(start + size, count)
            return Delta(
                entries: Array(delta.entries[start..<end]),
                coverage: [.init(replica: replica, from: UInt64(start), through: UInt64(end))]
            )
        }
    }
}

/// Latency samples in milliseconds.
struct Latencies {
    private(set) var samples: [Double] = []

    mutating func add(_ duration: Duration) {
        samples.append(duration.milliseconds)
    }

    func percentile(_ p: Double) -> Double {
        guard !samples.isEmpty else { return .nan }
        let sorted = samples.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    var milliseconds: Double { seconds * 1_000 }
}
