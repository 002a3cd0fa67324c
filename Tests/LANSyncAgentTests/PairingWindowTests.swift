import Foundation
import Testing

@testable import LANSyncAgent

/// A pairing window belongs to the agent that opened it: an app that stops its in-process agent
/// must not leave the window's port open, nor its advertisement and expiry running.
@Suite struct PairingWindowTests {
    @Test func aWindowClosesWhenItsAgentStops() async throws {
        let (agent, root, _) = try RunningAgent.make(port: 0)
        defer { RunningAgent.remove(root) }
        let running = Task { try await agent.run() }
        _ = try await agent.listeningPort()
        _ = try await agent.openPairingWindow(minutes: 10)
        let window = try #require(await agent.pairingWindow)
        #expect(window.listener.channel.isActive)
        running.cancel()
        _ = await running.result
        // The listener closes on its event loop: wait for that, boundedly (a window left open
        // would hold its port for its ten minutes).
        let deadline = ContinuousClock.now + .seconds(30)
        while window.listener.channel.isActive, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!window.listener.channel.isActive)
    }
}
