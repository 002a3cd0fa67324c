import Foundation
import LANSyncTestSupport
import Testing

@testable import LANSyncAgent

/// A dial loop's wait between attempts (`Agent.sleepUnlessWoken`): it ends when its time is up,
/// when the network comes back, or when the loop is cancelled, and says which.
@Suite struct DialBackoffTests {
    static func agent() throws -> (Agent, cleanUp: () -> Void) {
        let (agent, root, _) = try RunningAgent.make(port: 0)
        return (agent, { RunningAgent.remove(root) })
    }

    /// Waits until `agent` has a dial loop waiting (the waiter is registered on the actor).
    static func untilWaiting(_ agent: Agent) async throws {
        try #require(await eventually { await !agent.networkWaiters.isEmpty }, "the wait never began")
    }

    @Test func theTimeRunningOutEndsTheWaitUnwoken() async throws {
        let (agent, cleanUp) = try Self.agent()
        defer { cleanUp() }
        #expect(await agent.sleepUnlessWoken(.milliseconds(20)) == false)
        #expect(await agent.networkWaiters.isEmpty)
    }

    @Test func theNetworkComingBackEndsTheWaitWoken() async throws {
        let (agent, cleanUp) = try Self.agent()
        defer { cleanUp() }
        let waiting = Task { await agent.sleepUnlessWoken(.seconds(600)) }
        try await Self.untilWaiting(agent)
        await agent.wakeDialers()
        #expect(await waiting.value == true)
    }

    /// A cancelled dial loop must not sit out its backoff.
    @Test func cancellingTheLoopEndsTheWaitUnwoken() async throws {
        let (agent, cleanUp) = try Self.agent()
        defer { cleanUp() }
        let waiting = Task { await agent.sleepUnlessWoken(.seconds(600)) }
        try await Self.untilWaiting(agent)
        waiting.cancel()
        // The waiter goes when the wait ends; a wait that outlives the cancellation fails here
        // rather than hanging the test for the backoff's 600 s.
        try #require(
            await eventually(within: 60) { await agent.networkWaiters.isEmpty },
            "the cancelled wait still waits"
        )
        #expect(await waiting.value == false)
        #expect(await agent.networkWaiters.isEmpty)
        // Already cancelled before it waits: it returns at once.
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await agent.sleepUnlessWoken(.seconds(600))
        }
        #expect(await cancelled.value == false)
    }
}
