import LANSyncCore
import Synchronization

/// What a merged row has been costing, commit included, shared by every merge of a replica, so
/// that each delta's merge starts with transactions of the right size instead of learning it
/// again (a catch-up is hundreds of deltas).
final class MergeCost: Sendable {
    private let nanosecondsPerRow = Atomic<Int>(MergePacer.initialNanosecondsPerRow)

    var perRow: Int {
        get { nanosecondsPerRow.load(ordering: .relaxed) }
        set { nanosecondsPerRow.store(newValue, ordering: .relaxed) }
    }
}

/// Cuts a delta into merge transactions sized by time, not by row count.
///
/// While the app is writing, a transaction aims at `busyTarget` (4 ms): long enough that the
/// commit's flush and the pages it rewrites cost little per row; short enough that its commit,
/// which a local write arriving just then must wait for, stays brief. The app's own writes do not
/// wait for the rest of it: a transaction that sees one waiting commits early (see
/// `LocalWriteQueue`), so a transaction may merge only part of its share; the next share starts
/// where it stopped.
///
/// While the app is not writing (nothing in `LocalWriteQueue.writingWindow`), nobody waits for a
/// commit, and a transaction aims at `quietTarget` (16 ms): a quarter of the commits, each
/// rewriting the last pages of every table it grew, and a quarter of the checkpoints: a
/// catch-up of app-table rows merges a few percent faster so. While the app writes, the short
/// transactions stay: with 16 ms ones, an app writing throughout a 1M-entry catch-up saw its
/// append p99 pass the 5 ms goal (docs/journal/2026-11-speed.md). The first write after a quiet
/// spell may wait for one long transaction's commit.
///
/// The size comes from a running average of what a row costs, so the pacing holds on fast and
/// slow machines alike.
struct MergePacer {
    static let busyTarget = Duration.milliseconds(4)
    static let quietTarget = Duration.milliseconds(16)
    static let rowRange = 16...8_192
    /// A first guess (10 µs a row) until a transaction has been measured.
    static let initialNanosecondsPerRow = 10_000

    /// One transaction's share of a delta: index ranges of its entries, preferences and app-table
    /// changes, and whether it reaches the delta's end (then, merged whole, it carries the delta's coverage).
    struct Share: Equatable {
        var entries: Range<Int>
        var preferences: Range<Int>
        var changes: Range<Int> = 0..<0
        var isLast: Bool
        var rows: Int { entries.count + preferences.count + changes.count }
    }

    let cost: MergeCost
    private var entryIndex = 0
    private var preferenceIndex = 0
    private var changeIndex = 0
    private var done = false

    init(cost: MergeCost) { self.cost = cost }

    /// Rows for the next transaction: the target over the cost of a row.
    func rows(appWriting: Bool) -> Int {
        let target = appWriting ? Self.busyTarget : Self.quietTarget
        return min(Self.rowRange.upperBound, max(Self.rowRange.lowerBound, target.nanoseconds / max(1, cost.perRow)))
    }

    /// The next transaction's share of `delta`, sized for whether the app is writing. Nil when
    /// all is merged.
    mutating func next(of delta: Delta, appWriting: Bool) -> Share? {
        guard !done else { return nil }
        let rows = rows(appWriting: appWriting)
        let entries = entryIndex..<min(entryIndex + rows, delta.entries.count)
        let preferences = preferenceIndex..<min(preferenceIndex + rows - entries.count, delta.preferences.count)
        let changes = changeIndex..<min(changeIndex + rows - entries.count - preferences.count, delta.rows.count)
        return Share(
            entries: entries,
            preferences: preferences,
            changes: changes,
            isLast: entries.upperBound == delta.entries.count && preferences.upperBound == delta.preferences.count
                && changes.upperBound == delta.rows.count
        )
    }

    /// Notes how much of `share` a transaction merged (all of it, or a prefix when it committed
    /// early) and how long it took from BEGIN to the end of COMMIT.
    mutating func record(_ share: Share, merged: (entries: Int, preferences: Int, changes: Int), elapsed: Duration) {
        entryIndex = share.entries.lowerBound + merged.entries
        preferenceIndex = share.preferences.lowerBound + merged.preferences
        changeIndex = share.changes.lowerBound + merged.changes
        let rows = merged.entries + merged.preferences + merged.changes
        if share.isLast && rows == share.rows { done = true }
        // Small transactions say little (their commit dominates) and are left out.
        guard rows >= Self.rowRange.lowerBound else { return }
        let measured = elapsed.nanoseconds / rows
        // Recent transactions weigh most: the machine's load changes during a catch-up.
        cost.perRow = (cost.perRow * 3 + measured) / 4
    }
}

extension Duration {
    /// The duration in whole nanoseconds.
    var nanoseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}
