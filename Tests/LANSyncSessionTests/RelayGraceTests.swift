import LANSyncCore
import LANSyncSession
import Testing

/// Which rows from other origins a session holds back, and for how long (`RelayGrace`).
@Suite struct RelayGraceTests {
    static let start = ContinuousClock.now
    static let a = ReplicaID(high: 1, low: 1)
    static let b = ReplicaID(high: 2, low: 2)

    @Test func freshRowsAreHeldBackUntilTheySettle() {
        var grace = RelayGrace(grace: .seconds(2))
        grace.merged([.init(replica: Self.a, from: 1600, through: 1700)], at: Self.start)
        let fresh = grace.holdBack(at: Self.start + .milliseconds(10))
        #expect(fresh.cap == [Self.a: 1600])
        #expect(fresh.settles == Self.start + .seconds(2))
        // Rows of another replica were not merged just now: nothing held back for it.
        #expect(fresh.cap[Self.b] == nil)
        let settled = grace.holdBack(at: Self.start + .seconds(2))
        #expect(settled.cap.isEmpty)
        #expect(settled.settles == nil)
    }

    @Test func severalMergesHoldBackFromTheEarliestUntilEachSettles() {
        var grace = RelayGrace(grace: .seconds(2))
        grace.merged([.init(replica: Self.a, from: 10, through: 20)], at: Self.start)
        grace.merged(
            [.init(replica: Self.a, from: 20, through: 30), .init(replica: Self.b, from: 0, through: 5)],
            at: Self.start + .seconds(1)
        )
        let both = grace.holdBack(at: Self.start + .milliseconds(1500))
        #expect(both.cap == [Self.a: 10, Self.b: 0])
        #expect(both.settles == Self.start + .seconds(2))
        // The first merge settled: rows up to 20 may go, the second's still wait.
        let later = grace.holdBack(at: Self.start + .milliseconds(2500))
        #expect(later.cap == [Self.a: 20, Self.b: 0])
        #expect(later.settles == Self.start + .seconds(3))
    }

    @Test func zeroGraceHoldsNothing() {
        var grace = RelayGrace(grace: .zero)
        grace.merged([.init(replica: Self.a, from: 0, through: 9)], at: Self.start)
        #expect(grace.holdBack(at: Self.start).cap.isEmpty)
    }

    @Test func emptyRangesHoldNothing() {
        var grace = RelayGrace(grace: .seconds(1))
        grace.merged([.init(replica: Self.a, from: 9, through: 9)], at: Self.start)
        #expect(grace.holdBack(at: Self.start).cap.isEmpty)
    }
}
