import LANSyncSession
import Testing

/// When a session logs its merges (`MergeLog`): one line per burst, one per interval while a
/// catch-up runs, single taps at debug.
@Suite struct MergeLogTests {
    static let start = ContinuousClock.now

    @Test func aBurstIsLoggedOnceAfterAQuietMoment() {
        var log = MergeLog(now: Self.start)
        log.merged(3)
        #expect(log.progress(weLack: 0, now: Self.start) == nil)
        #expect(log.flushAt == Self.start + .seconds(1))
        log.merged(2)
        #expect(log.progress(weLack: 0, now: Self.start + .milliseconds(500)) == nil)
        #expect(log.flushAt == Self.start + .seconds(1), "a burst keeps its first deadline")
        let line = log.flush(now: Self.start + .seconds(1))
        #expect(line == MergeLog.Line(done: true, received: 5, remaining: 0))
        #expect(line?.isNotable == false, "a few live rows are debug")
        #expect(log.flush(now: Self.start + .seconds(2)) == nil, "nothing merged since")
        #expect(log.progress(weLack: 0, now: Self.start + .seconds(3)) == nil)
        #expect(log.flushAt == nil, "no rows, no line pending")
    }

    @Test func aLongCatchUpLogsEveryInterval() {
        var log = MergeLog(now: Self.start)
        log.merged(2_000)
        #expect(log.progress(weLack: 50_000, now: Self.start + .seconds(5)) == nil)
        log.merged(2_000)
        let line = log.progress(weLack: 46_000, now: Self.start + .seconds(11))
        #expect(line == MergeLog.Line(done: false, received: 4_000, remaining: 46_000))
        #expect(line?.isNotable == true)
        log.merged(46_000)
        #expect(log.progress(weLack: 0, now: Self.start + .seconds(15)) == nil)
        #expect(log.flush(now: Self.start + .seconds(16)) == MergeLog.Line(done: true, received: 46_000, remaining: 0))
    }
}
