import Synchronization
import LANSyncCore

/// Remembers when the app last wrote, so merges know whether someone is waiting on the writer.
final class LocalWriteActivity: Sendable {
    private let lastWrite = Atomic<Int64>(Int64.min / 2)

    func touch() { lastWrite.store(Self.nowNanoseconds(), ordering: .relaxed) }

    /// True when a local write happened within the last `window`.
    func isActive(within window: Duration = .seconds(1)) -> Bool {
        let (seconds, attoseconds) = window.components
        let windowNanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        return Self.nowNanoseconds() - lastWrite.load(ordering: .relaxed) < windowNanoseconds
    }

    /// Nanoseconds on the monotonic clock since this process first asked.
    static func nowNanoseconds() -> Int64 {
        let elapsed = ContinuousClock().now - origin
        return elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
    }

    private static let origin = ContinuousClock().now
}

/// Cuts a delta into merge transactions sized by time, not by row count.
///
/// SQLite has one writer: a local append that arrives during a merge transaction waits for it to
/// commit. While the app is writing (a local write in the last second) transactions aim at
/// `activeTarget` (1.5 ms), which keeps an append's wait, commit included, under the 5 ms goal; when nobody is
/// waiting they aim at `idleTarget` (25 ms) for throughput. The row count adapts to measured
/// durations, so the pacing holds on fast and slow machines alike.
struct MergePacer {
    static let activeTarget = Duration.microseconds(1_500)
    static let idleTarget = Duration.milliseconds(25)
    static let rowRange = 16...8_192

    let activity: LocalWriteActivity
    private(set) var rows = 256
    private var entryIndex = 0
    private var preferenceIndex = 0
    private var done = false

    init(activity: LocalWriteActivity) { self.activity = activity }

    /// The next transaction's rows; the last one carries the delta's coverage. Nil when all is merged.
    mutating func next(of delta: Delta) -> Delta? {
        guard !done else { return nil }
        var chunk = Delta()
        var budget = rows
        if entryIndex < delta.entries.count {
            let end = min(entryIndex + budget, delta.entries.count)
            chunk.entries = Array(delta.entries[entryIndex..<end])
            budget -= end - entryIndex
            entryIndex = end
        }
        if budget > 0, preferenceIndex < delta.preferences.count {
            let end = min(preferenceIndex + budget, delta.preferences.count)
            chunk.preferences = Array(delta.preferences[preferenceIndex..<end])
            preferenceIndex = end
        }
        if entryIndex == delta.entries.count && preferenceIndex == delta.preferences.count {
            chunk.coverage = delta.coverage
            done = true
        }
        return chunk
    }

    /// Adjusts the next transaction's size from how long this one took.
    mutating func record(_ elapsed: Duration) {
        let target = activity.isActive() ? Self.activeTarget : Self.idleTarget
        let scale = max(0.25, min(4, target / max(elapsed, .microseconds(10))))
        rows = min(Self.rowRange.upperBound, max(Self.rowRange.lowerBound, Int(Double(rows) * scale)))
    }
}
