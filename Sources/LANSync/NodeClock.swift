import LANSyncCore

/// The node's physical clock in milliseconds since the epoch.
///
/// Test hook: `LANSYNC_TEST_CLOCK_OFFSET_MS` shifts it, so fault tests can run a node whose clock
/// is wrong without touching the machine's clock.
package struct NodeClock: Sendable {
    package let offsetMilliseconds: Int64
    /// Read instead of the machine's clock when set: a group simulation's clock, so that a seed
    /// replays with the same clock readings.
    private let source: (@Sendable () -> UInt64)?

    package init(offsetMilliseconds: Int64 = 0) {
        self.offsetMilliseconds = offsetMilliseconds
        source = nil
    }

    /// A clock that reads `source` (milliseconds since the epoch) instead of the machine's.
    package init(reading source: @escaping @Sendable () -> UInt64) {
        offsetMilliseconds = 0
        self.source = source
    }

    package static func fromEnvironment(_ environment: [String: String]) -> NodeClock {
        NodeClock(offsetMilliseconds: environment["LANSYNC_TEST_CLOCK_OFFSET_MS"].flatMap { Int64($0) } ?? 0)
    }

    package func now() -> UInt64 {
        if let source { return source() }
        return UInt64(max(0, Int64(Timestamps.nowMilliseconds()) + offsetMilliseconds))
    }
}
