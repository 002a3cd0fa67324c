import NIOCore
import NIOPosix

/// Sleeping on a NIO event loop's timer rather than with `Task.sleep`.
///
/// While a `Task.sleep` of more than a second is pending, libdispatch on Linux wakes its timer
/// thread once a second (it arms its timer at most a second ahead), so an idle agent holding a
/// minute-long wait (`PeerDirectory`'s next write) or a keepalive timer woke every second for
/// nothing. An event loop arms its timer for the deadline itself, and its thread is awake for the
/// session's messages anyway. Cancelling the sleeping task ends the sleep at once, with an error,
/// as `Task.sleep` does.
package enum EventLoopSleep {
    /// Sleeps until `deadline`; throws when the task is cancelled first.
    package static func until(_ deadline: ContinuousClock.Instant) async throws {
        let delay = ContinuousClock.now.duration(to: deadline)
        guard delay > .zero else { return try Task.checkCancellation() }
        let scheduled = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(delay)) {}
        try await withTaskCancellationHandler {
            try await scheduled.futureResult.get()
        } onCancel: {
            scheduled.cancel()
        }
    }

    /// Sleeps for `duration`; throws when the task is cancelled first.
    package static func `for`(_ duration: Duration) async throws {
        try await until(.now + duration)
    }
}
