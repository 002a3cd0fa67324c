import LANSyncCore

/// The node's physical clock in milliseconds since the epoch.
///
/// Test hook: `LANSYNC_TEST_CLOCK_OFFSET_MS` shifts it, so fault tests can run a node whose clock
/// is wrong without touching the machine's clock.
package struct NodeClock: Sendable {
    package let offsetMilliseconds: Int64

    package init(offsetMilliseconds: Int64 = 0) { self.offsetMilliseconds = offsetMilliseconds }

    package static func fromEnvironment(_ environment: [String: String]) -> NodeClock {
        NodeClock(offsetMilliseconds: environment["LANSYNC_TEST_CLOCK_OFFSET_MS"].flatMap { Int64($0) } ?? 0)
    }

    package func now() -> UInt64 {
        UInt64(max(0, Int64(Timestamps.nowMilliseconds()) + offsetMilliseconds))
    }
}
