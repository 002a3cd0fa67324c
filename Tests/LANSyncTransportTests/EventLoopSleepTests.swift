import Testing

@testable import LANSyncTransport

/// The agent's timers sleep on NIO's event loop (`EventLoopSleep`); they must keep
/// `Task.sleep`'s promises: not before the deadline, and at once when cancelled.
@Suite struct EventLoopSleepTests {
    @Test func itSleepsUntilTheDeadline() async throws {
        let start = ContinuousClock.now
        try await EventLoopSleep.for(.milliseconds(50))
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test func cancellingEndsTheSleepWithAnError() async {
        let start = ContinuousClock.now
        let sleeper = Task { try await EventLoopSleep.for(.seconds(600)) }
        sleeper.cancel()
        let result = await sleeper.result
        #expect(throws: (any Error).self) { try result.get() }
        #expect(ContinuousClock.now - start < .seconds(60))
    }

    @Test func aPassedDeadlineReturnsAtOnceUnlessCancelled() async throws {
        try await EventLoopSleep.until(.now - .seconds(1))
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await EventLoopSleep.until(.now - .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
    }
}
