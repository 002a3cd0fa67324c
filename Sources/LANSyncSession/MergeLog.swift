/// When a session logs what it merged: one line per burst of merges — once in sync again and
/// nothing more arrived for a second (`quiet`) — and one every `interval` while a long catch-up
/// runs. A burst of fewer than ten rows is logged at debug level (live pushes of single taps).
/// Pure: the session shell passes the time and logs the lines it returns.
package struct MergeLog: Sendable {
    /// A line to log.
    package struct Line: Equatable, Sendable {
        /// In sync again (`synced`), or still catching up (`syncing`).
        package let done: Bool
        /// Rows merged since the last line.
        package let received: Int
        /// Operations the peer announced that we still lack.
        package let remaining: UInt64
        /// Whether the line is worth `info` (else `debug`): a catch-up, or ten rows or more.
        package var isNotable: Bool { !done || received >= 10 }

        package init(done: Bool, received: Int, remaining: UInt64) {
            self.done = done
            self.received = received
            self.remaining = remaining
        }
    }

    private var received = 0
    private var remaining: UInt64 = 0
    private var lastLine: ContinuousClock.Instant
    /// When the "synced" line of the last burst is due, if one is pending.
    package private(set) var flushAt: ContinuousClock.Instant?
    let interval: Duration
    let quiet: Duration

    package init(now: ContinuousClock.Instant, interval: Duration = .seconds(10), quiet: Duration = .seconds(1)) {
        lastLine = now
        self.interval = interval
        self.quiet = quiet
    }

    /// Rows merged.
    package mutating func merged(_ rows: Int) { received += rows }

    /// What we lack of the peer's announced state now: a "syncing" line when a catch-up has run
    /// for an interval since the last line; in sync, a "synced" line is due after a quiet moment.
    package mutating func progress(weLack: UInt64, now: ContinuousClock.Instant) -> Line? {
        remaining = weLack
        guard received > 0 else { return nil }
        if weLack > 0, now - lastLine > interval { return line(now: now) }
        if weLack == 0, flushAt == nil { flushAt = now + quiet }
        return nil
    }

    /// The quiet moment after a burst is over (`flushAt` passed): its line, if rows came.
    package mutating func flush(now: ContinuousClock.Instant) -> Line? {
        flushAt = nil
        guard received > 0 else { return nil }
        return line(now: now)
    }

    private mutating func line(now: ContinuousClock.Instant) -> Line {
        defer {
            received = 0
            lastLine = now
        }
        return Line(done: remaining == 0, received: received, remaining: remaining)
    }
}
